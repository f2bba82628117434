/**
 * Background chart and gate paths (SPEC §13) on real actors of the charts: each invoked service
 * is a call the path settles with the catalog's output or error, and the actors around the
 * chart are stand-ins that record what they are told — for the background chart an engine
 * (breaker events, relayed notifications) and the jobs that consult it (replies); for the gate
 * the background chart (consult, cancel) and its job (its input, a forwarded cancel, its output).
 * What each stand-in must have heard is the SPEC's rule, checked after every path; the chart's
 * context (or output) at the end must be the one the generated path computed.
 * The charts over the real services and the real engine: test/background.test.ts and
 * test/background-crash.test.ts.
 */
import { expect } from 'vitest';
import {
  assign,
  createActor,
  createMachine,
  fromCallback,
  fromPromise,
  setup,
  spawnChild,
  type AnyActorRef,
  type AnyMachineSnapshot,
  type AnyStateMachine,
  type InspectionEvent,
} from 'xstate';
import { BACKGROUND_SYSTEM_ID, backgroundMachine } from '../../src/machines/background';
import { gateMachine } from '../../src/machines/gate';
import { GATE_INPUTS } from './catalogs-background';
import type { TransitionInfo } from './model';
import type { GeneratedPath, PathStep } from './paths';
import { runtimeCovered, transitionsTaken, type Server } from './runner';

type Pending = Map<string, { resolve(v: unknown): void; reject(e: unknown): void }>;
type Ev = { type: string; [k: string]: unknown };

const tick = () => new Promise<void>((r) => setTimeout(r, 0));
async function until(ok: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !ok(); i++) await tick();
  expect(ok(), what).toBe(true);
}

/** One scripted actor per service name: a call that waits for the path to settle it. */
function scripted(pending: Pending, names: string[]) {
  return Object.fromEntries(
    names.map((name) => [
      name,
      fromPromise<unknown, unknown>(
        ({ signal }) =>
          new Promise((resolve, reject) => {
            const entry = { resolve, reject };
            pending.set(name, entry);
            // A call its state left (a cancel) is gone: the next call of the same service is a new one.
            signal.addEventListener('abort', () => pending.get(name) === entry && pending.delete(name));
          }),
      ),
    ]),
  );
}

/** Records the transitions the chart's actors take (public `@xstate.snapshot` events, see runner.ts). */
function recorder(machineId: string) {
  const previous = new Map<string, AnyMachineSnapshot>();
  const fired: TransitionInfo[] = [];
  const inspect = (e: InspectionEvent) => {
    if (e.type !== '@xstate.snapshot') return;
    for (const t of transitionsTaken(e, previous)) {
      runtimeCovered.add(t.key);
      if (t.machine === machineId) fired.push(t);
    }
  };
  return { inspect, fired };
}

/** Settles a service step; returns false when the step is an event to send. */
async function settleService(step: PathStep, pending: Pending): Promise<boolean> {
  const type = step.event.type;
  if (!type.startsWith('xstate.done.actor.') && !type.startsWith('xstate.error.actor.')) return false;
  const src = step.outcome.split(':')[0]!;
  await until(() => pending.has(src), `a call to ${src}`);
  const call = pending.get(src)!;
  pending.delete(src);
  if (type.startsWith('xstate.done.actor.')) call.resolve((step.event as { output?: unknown }).output);
  else call.reject((step.event as { error?: unknown }).error);
  return true;
}

/** Plain data for comparison: actor refs by role, errors by code and message. */
function plain(x: unknown, replyTo: AnyActorRef | undefined): unknown {
  if ((replyTo !== undefined && x === replyTo) || (typeof x === 'object' && x !== null && 'id' in x && (x as { id: unknown }).id === 'gate' && Object.keys(x).length === 1)) return '<job>';
  if (x instanceof Error) return { error: x.message, code: (x as { code?: unknown }).code };
  if (Array.isArray(x)) return x.map((v) => plain(v, replyTo));
  if (typeof x === 'object' && x !== null) return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, plain(v, replyTo)]));
  return x;
}

const names = (ts: TransitionInfo[]) => ts.map((t) => t.name);
const expectFired = (got: TransitionInfo[], path: GeneratedPath, byKey: Map<string, TransitionInfo>) =>
  expect(names(got), `the ${path.machine} chart's transitions at run time`).toEqual(path.fired.map((k) => byKey.get(k)!.name));

// ---------------------------------------------------------------------------
// background

export interface Run {
  status: 'committed' | 'failed' | 'cancelled' | 'nothing';
  opened: boolean;
  busy: boolean;
  /** Jobs that waited for it. */
  waiters: number;
}

const stateOf = (value: unknown): string => (typeof value === 'string' ? value : Object.keys(value as object)[0]!);

/**
 * SPEC §13, step by step: the reply each step or await gets, and how each run ends. A cancel is
 * honoured at once while the summary is prepared or checked, at the next decision while the
 * span is selected, validated or its bracket opened, and is too late from the commit on.
 */
export function expectedBackground(path: GeneratedPath): { replies: string[]; runs: Run[] } {
  const replies: string[] = [];
  const runs: Run[] = [];
  let run: (Run & { cancel: boolean }) | undefined;
  const end = (status: Run['status']) => {
    runs.push({ status, opened: run!.opened, busy: run!.busy, waiters: run!.waiters });
    run = undefined;
  };
  for (const s of path.steps) {
    const o = s.outcome;
    const from = stateOf(s.from);
    if (o.startsWith('step:') || o === 'await') {
      if (!run) {
        if (o === 'step:prepare-point') {
          run = { status: 'failed', opened: false, busy: false, waiters: 0, cancel: false };
          replies.push('background.preparing');
        } else replies.push('background.proceed');
      } else if (o === 'step:threshold' || o === 'await') {
        run.waiters++;
        replies.push('background.waiting');
      } else replies.push('background.preparing');
      continue;
    }
    if (!run) continue; // a cancel with nothing running
    if (o === 'cancel') {
      if (from === 'summarizing' || from === 'ready') run.status = 'cancelled';
      else if (from === 'selecting' || from === 'validating' || from === 'opening') run.cancel = true;
      continue;
    }
    if (o === 'openBracket:append-refused') {
      // Another writer's compaction/start came first: busy, like a lock seen while validating.
      run.busy = true;
      end('failed');
    } else if (o === 'selectRange:throws' || o === 'validateSpan:span-invalid') end('failed');
    else if ((o.startsWith('selectRange:') || o.startsWith('validateSpan:')) && run.cancel) end('cancelled');
    else if (o === 'selectRange:nothing') end('nothing');
    else if (o === 'validateSpan:lock-held') {
      run.busy = true;
      end('failed');
    } else if (o === 'openBracket:opened') {
      run.opened = true;
      if (run.cancel) run.status = 'cancelled';
    } else if (o === 'flush:durable') end('committed');
    else if (o === 'flush:store-fails') end('failed');
    else if (o.startsWith('closeWithError:')) end(run.status === 'cancelled' ? 'cancelled' : 'failed');
  }
  return { replies, runs };
}

export async function runBackgroundPath(_srv: Server, path: GeneratedPath, byKey: Map<string, TransitionInfo>): Promise<void> {
  const pending: Pending = new Map();
  const services = ['selectRange', 'validateSpan', 'openBracket', 'summarize', 'revalidate', 'commit', 'flush', 'closeWithError'];
  const chart = backgroundMachine.provide({ actors: scripted(pending, services) as never });
  // The engine stand-in: what the chart tells the engine (breaker events, notifications).
  const toEngine: Ev[] = [];
  const engine = createMachine({
    id: 'engine',
    entry: spawnChild(chart as AnyStateMachine, { id: 'background', systemId: BACKGROUND_SYSTEM_ID }),
    on: { '*': { actions: ({ event }) => void toEngine.push(event as Ev) } },
  });
  const replies: Ev[] = [];
  const job = createActor(fromCallback(({ receive }) => receive((e) => void replies.push(e as Ev)))).start();
  const { inspect, fired } = recorder('background');
  const host = createActor(engine, { inspect }).start();
  const actor = host.getSnapshot().children.background as AnyActorRef;

  for (const step of path.steps) {
    if (!(await settleService(step, pending))) actor.send('replyTo' in step.event ? { ...step.event, replyTo: job } : step.event);
    await tick();
    await tick();
  }

  expectFired(fired, path, byKey);
  const snap = actor.getSnapshot() as AnyMachineSnapshot;
  expect(snap.value).toEqual(path.finalValue);
  expect(plain(snap.context, job), 'the chart context at the end of the path').toEqual(plain(path.finalContext, undefined));

  const want = expectedBackground(path);
  // Every step and await answered as SPEC §13 says; a job that waited is released when its run ends.
  expect(replies.filter((r) => r.type !== 'background.settled').map((r) => r.type)).toEqual(want.replies);
  const released = want.runs.reduce((n, r) => n + r.waiters, 0);
  expect(replies.filter((r) => r.type === 'background.settled')).toHaveLength(released);
  // Every run that ended is handed over exactly once, in order, to a reply or a released job (or still pending).
  const handed = replies.flatMap((r) => (r.outcomes as Array<{ status: string; waited: boolean }> | undefined) ?? []);
  const kept = (snap.context as { unreported: Array<{ status: string; waited: boolean }> }).unreported;
  expect([...handed, ...kept].map((o) => [o.status, o.waited])).toEqual(want.runs.map((r) => [r.status, r.waiters > 0]));
  // The engine's breaker counts every failed run but a busy one, and hears of every commit.
  const breaker = want.runs.flatMap((r) => (r.status === 'committed' ? ['breaker.success'] : r.status === 'failed' && !r.busy ? ['breaker.failure'] : []));
  expect(toEngine.filter((e) => e.type.startsWith('breaker.')).map((e) => e.type)).toEqual(breaker);
  // Announced: every opened bracket's start, then its commit or its failure (a cancel closes it failed).
  const notes = toEngine.filter((e) => e.type === 'xcompact.notify').map((e) => (e.notification as { type: string; background?: boolean }));
  const heard = want.runs.flatMap((r) => (r.opened ? ['compaction.started', r.status === 'committed' ? 'compaction.committed' : 'compaction.failed'] : []));
  expect(notes.map((n) => n.type)).toEqual(heard);
  for (const n of notes) expect(n.background).toBe(true);
  host.stop();
  job.stop();
}

// ---------------------------------------------------------------------------
// gate

/** A job chart stand-in: records its input and any cancel, ends with the output the path gives. */
const jobStandIn = setup({
  types: { context: {} as { input: unknown; cancels: number; output: unknown }, input: {} as unknown, events: {} as { type: 'cancel' } | { type: 'finish'; output: unknown } },
}).createMachine({
  context: ({ input }) => ({ input, cancels: 0, output: undefined }),
  initial: 'running',
  states: {
    running: {
      on: {
        cancel: { actions: assign({ cancels: ({ context }) => context.cancels + 1 }) },
        finish: { target: 'done', actions: assign({ output: ({ event }) => event.output }) },
      },
    },
    done: { type: 'final' },
  },
  output: ({ context }) => context.output,
});

export async function runGatePath(_srv: Server, path: GeneratedPath, byKey: Map<string, TransitionInfo>): Promise<void> {
  const pending: Pending = new Map();
  const told: Ev[] = [];
  const jobs: Array<{ input: unknown; cancels: number }> = [];
  const machine = gateMachine.provide({
    actors: { ...(scripted(pending, ['measure']) as object), pressure: jobStandIn, overflow: jobStandIn, manual: jobStandIn } as never,
    // The background chart is played by the path: what the gate sends it is recorded.
    actions: {
      consult: ({ context }) => void told.push({ type: context.input.kind === 'pressure' ? 'step' : 'await', reading: context.reading }),
      'cancel background': ({ event }) => void told.push({ type: 'cancel', reason: (event as { reason?: string }).reason }),
    },
  });
  const input = GATE_INPUTS.find((i) => i.label === path.input)!.input;
  const { inspect, fired } = recorder('gate');
  const actor = createActor(machine, { input, inspect }).start();
  const jobOf = () => (actor.getSnapshot().children as Record<string, AnyActorRef | undefined>).job;
  for (const step of path.steps) {
    const kind = /^(pressure|overflow|manual):done$/.exec(step.outcome)?.[1];
    if (kind) {
      const child = jobOf()!;
      jobs.push(child.getSnapshot().context);
      child.send({ type: 'finish', output: (step.event as { output?: unknown }).output });
    } else if (!(await settleService(step, pending))) actor.send(step.event as never);
    await tick();
    await tick();
  }

  expectFired(fired, path, byKey);
  const snap = actor.getSnapshot();
  expect(snap.value).toEqual(path.finalValue);
  expect(snap.status).toBe('done');
  expect(plain(snap.output, undefined), 'the gate output').toEqual(plain(path.finalOutput, undefined));

  // SPEC §13: a job is consulted once unless it had no reading to judge; a pressure job sends its reading.
  const o = path.steps.map((s) => s.outcome);
  const noReading = o.includes('measure:unrouted') || o.includes('measure:throws');
  expect(told.filter((t) => t.type !== 'cancel').map((t) => t.type)).toEqual(noReading ? [] : [input.kind === 'pressure' ? 'step' : 'await']);
  if (input.kind === 'pressure' && !noReading) expect(told[0]!.reading).toEqual((path.steps.find((s) => s.outcome === 'measure:reading')!.event as unknown as { output: { reading: unknown } }).output.reading);
  // A cancel while waiting cancels the background summary; the job then starts with its signal aborted.
  const cancelsWaiting = path.steps.filter((s) => s.outcome === 'cancel' && s.from === 'waiting').length;
  expect(told.filter((t) => t.type === 'cancel')).toHaveLength(cancelsWaiting);
  const ran = o.some((x) => x.endsWith(':done'));
  expect(jobs).toHaveLength(ran ? 1 : 0);
  if (ran) {
    const jobStart = o.findIndex((x) => x.endsWith(':done'));
    const cancels = path.steps.slice(0, jobStart).filter((s) => s.outcome === 'cancel');
    const cancelledBefore = cancels.some((s) => !String(s.from).startsWith('running'));
    const cancelledWhileRunning = cancels.filter((s) => String(s.from).startsWith('running')).length;
    expect((jobs[0]!.input as { aborted: boolean }).aborted).toBe(cancelledBefore || (input.job as { aborted: boolean }).aborted);
    // A cancel while the job runs is the job's to handle: forwarded.
    expect(jobs[0]!.cancels).toBe(cancelledWhileRunning);
  }
  actor.stop();
}
