/**
 * Deferred service calls: the engine's `services` option wraps every default service in a call
 * the path's script takes (`take`) and settles — with the real service, or, where the world
 * cannot give an outcome, a forced output or error. When the script is done the controller turns
 * to `auto` and lets every later call run for real. runner.ts builds the world around it.
 */
import type { EngineServices } from '../../src/engine/facade';

export type ServiceName = keyof EngineServices;

export class Call {
  settled = false;
  output: unknown;
  error: unknown;
  private readonly done: Promise<unknown>;
  private resolveFn!: (v: unknown) => void;
  private rejectFn!: (e: unknown) => void;

  constructor(
    readonly service: ServiceName,
    readonly input: unknown,
    readonly signal: AbortSignal | undefined,
    private readonly real: () => unknown,
  ) {
    this.done = new Promise((resolve, reject) => {
      this.resolveFn = resolve;
      this.rejectFn = reject;
    });
    // A held call whose actor was stopped is never awaited: keep its rejection quiet.
    this.done.catch(() => undefined);
  }

  get promise(): Promise<unknown> {
    return this.done;
  }

  resolve(value: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.output = value;
    this.resolveFn(value);
  }

  reject(error: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.error = error;
    this.rejectFn(error);
  }

  /** Runs the real service and settles with what it gives; resolves with the outcome. */
  async runReal(): Promise<{ output?: unknown; error?: unknown }> {
    try {
      const output = await this.real();
      this.resolve(output);
      return { output };
    } catch (error) {
      this.reject(error);
      return { error };
    }
  }
}

export class Controller {
  private readonly pending: Call[] = [];
  private waiters: Array<() => void> = [];
  private auto = false;
  /** In auto mode, services listed here are settled by the function instead of for real. */
  overrides: Partial<Record<ServiceName, (call: Call) => void | Promise<void>>> = {};
  /** Every call made, in order. */
  readonly calls: Call[] = [];

  wrap(defaults: EngineServices): EngineServices {
    const wrapped = {} as Record<string, unknown>;
    for (const name of Object.keys(defaults) as ServiceName[]) {
      const real = defaults[name] as (input: unknown, signal?: AbortSignal) => unknown;
      wrapped[name] = (input: unknown, signal?: AbortSignal) => {
        // A crashed process runs nothing more: a call released after the crash never reaches the service.
        const call = new Call(name, input, signal, () => (this.dead ? Promise.reject(new Error('the process crashed')) : real(input, signal)));
        this.calls.push(call);
        if (this.auto) void this.release(call);
        else {
          this.pending.push(call);
          for (const w of this.waiters.splice(0)) w();
        }
        return call.promise;
      };
    }
    return wrapped as unknown as EngineServices;
  }

  private async release(call: Call): Promise<void> {
    // A macrotask between calls: a chart that loops through services (a mutant) must not starve
    // the timers that bound a run.
    await new Promise((r) => setImmediate(r));
    const o = this.overrides[call.service];
    if (o) await o(call);
    else await call.runReal();
  }

  /** Lets every pending and later call run (real, or as `overrides` say). */
  setAuto(overrides: Controller['overrides'] = {}): void {
    this.auto = true;
    this.overrides = overrides;
    for (const c of this.pending.splice(0)) void this.release(c);
  }

  hold(): void {
    this.auto = false;
  }

  private dead = false;

  /** The process died: no service runs any more, and the script's next `take` fails. */
  kill(): void {
    this.dead = true;
    this.auto = false;
    for (const w of this.waiters.splice(0)) w();
  }

  /** Returns a taken, unsettled call to the front of the queue (the next step settles it). */
  putBack(call: Call): void {
    this.pending.unshift(call);
  }

  /**
   * The first pending call to `service`, whatever calls wait before it (another actor's, which
   * the script settles later).
   */
  async takeOf(service: ServiceName, timeoutMs = timing.takeMs): Promise<Call> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.dead) throw new Error(`expected a call to ${service}, but the process crashed`);
      const at = this.pending.findIndex((c) => c.service === service);
      if (at >= 0) return this.pending.splice(at, 1)[0]!;
      if (Date.now() >= deadline)
        throw new Error(`expected a call to ${service} within ${timeoutMs} ms; none came (calls so far: ${this.calls.map((c) => c.service).join(', ')})`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => (clearTimeout(t), r()));
      });
    }
  }

  /**
   * The next service call, which must be to `service`. Fails when the engine calls another
   * service first, or when `settledFirst` (the facade call) settles before any call comes.
   */
  async take(service: ServiceName, settledFirst?: Promise<unknown>, timeoutMs = timing.takeMs): Promise<Call> {
    let outcome: 'call' | 'settled' | 'timeout' = 'call';
    const deadline = Date.now() + timeoutMs;
    while (this.pending.length === 0 || this.dead) {
      if (this.dead) throw new Error(`expected a call to ${service}, but the process crashed`);
      const wait = new Promise<'call'>((r) => this.waiters.push(() => r('call')));
      const races: Array<Promise<'call' | 'settled' | 'timeout'>> = [
        wait,
        new Promise((r) => setTimeout(() => r('timeout'), Math.max(1, deadline - Date.now()))),
      ];
      if (settledFirst)
        races.push(
          settledFirst.then(
            () => 'settled' as const,
            () => 'settled' as const,
          ),
        );
      outcome = await Promise.race(races);
      if (outcome !== 'call' && this.pending.length === 0) {
        throw new Error(
          outcome === 'settled'
            ? `expected a call to ${service}, but the facade call settled first (calls so far: ${this.calls.map((c) => c.service).join(', ')})`
            : `expected a call to ${service} within ${timeoutMs} ms; none came (calls so far: ${this.calls.map((c) => c.service).join(', ')})`,
        );
      }
    }
    const call = this.pending.shift()!;
    if (call.service !== service) {
      throw new Error(`expected a call to ${service}, the engine called ${call.service} (calls so far: ${this.calls.map((c) => c.service).join(', ')})`);
    }
    return call;
  }
}

/** How long a script waits for the engine's next service call (the mutation run shortens it). */
// A right chart calls the service at once; this only bounds how long a broken one is waited for, so
// it is generous (a loaded machine must not fail a path). mutate.run.ts lowers it for mutants.
export const timing = { takeMs: 60_000 };

/** `promise`, or a failure naming `what` when it has not settled within `timing.takeMs`. */
export function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not settled within ${timing.takeMs} ms`)), timing.takeMs);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
