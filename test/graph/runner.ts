/**
 * Runs generated paths against the real engine: `createCompactionEngine` over a real
 * Session on a JsonlStore in a temp dir, the OpenAISummarizer talking to the local
 * OpenAI-compatible server, a SimulatedClock, and the `services` option wrapping every
 * default service in a deferred call that the path's script settles.
 *
 * A script takes the engine's service calls in order (`take`): each is settled with the
 * real service (the world already gives the outcome, or the script arranged it first), or,
 * where the world cannot give it, with a forced output/error. When the script is done the
 * controller turns to `auto` and lets every later call run for real.
 *
 * Every `@xstate.microstep` of every actor is recorded: per world (to compare the
 * transitions the real chart took with the generated path) and in the process-wide
 * runtime coverage set.
 */
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { SimulatedClock, type InspectionEvent } from 'xstate';
import { expect } from 'vitest';
import {
  createCompactionEngine,
  type CompactionEngine,
  type CompactionEngineOptions,
  type EngineNotification,
  type EngineServices,
} from '../../src/engine';
import type { CompactionConfigInput } from '../../src/services/config';
import { frameCheckpoint } from '../../src/services/checkpoint';
import type { RangeSelection } from '../../src/services/range';
import type { Summarizer } from '../../src/services/summarizer';
import { OpenAISummarizer } from '../../src/services/summarizers/openai';
import { getTokenizer } from '../../src/services/tokenizer';
import type { SessionEvent } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { JsonlStore } from '../../src/session/stores/jsonl';
import { SessionWriter } from '../../src/session/writer';
import { OVERFLOW_BODIES, startOpenAIServer, type LocalOpenAIServer, type Scenario } from '../../src/testing/openai-server';
import { openAIMessageProblems } from '../helpers/openai-validator';
import type { GeneratedPath } from './paths';
import { transitionsOfMicrostep, type TransitionInfo } from './model';

export const SYSTEM_PROMPT = 'You are a coding agent. Keep answers short.';
export const MODELS = {
  'test/small': { contextWindow: 6000, maxOutputTokens: 500 },
  'test/big': { contextWindow: 200_000, maxOutputTokens: 500 },
};
// The cost model is off unless a world turns it on (the pressure paths that weigh costs do).
// Background off: these paths walk the foreground charts (pressure, transaction, engine); the
// background and gate charts have their own suite (suite-background.ts).
export const BASE_CONFIG: CompactionConfigInput = { headroomTokens: 500, maxTokens: 400, thresholdRatio: 0.8, retainRatio: 0.2, economics: false, background: false };
export const SUMMARY_TEXT = '## Goal\nFix the build.\n## Progress\nListed the files of every directory; nothing failed yet.';

export type ServiceName = keyof EngineServices;

// ---------------------------------------------------------------------------
// Runtime coverage (process-wide)

export const runtimeCovered = new Set<string>();

export interface Recorded {
  actor: string;
  machine: string;
  transitions: TransitionInfo[];
}

// ---------------------------------------------------------------------------
// Deferred service calls

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
        const call = new Call(name, input, signal, () => real(input, signal));
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

  /** Returns a taken, unsettled call to the front of the queue (the next step settles it). */
  putBack(call: Call): void {
    this.pending.unshift(call);
  }

  /**
   * The next service call, which must be to `service`. Fails when the engine calls another
   * service first, or when `settledFirst` (the facade call) settles before any call comes.
   */
  async take(service: ServiceName, settledFirst?: Promise<unknown>, timeoutMs = 5000): Promise<Call> {
    let outcome: 'call' | 'settled' | 'timeout' = 'call';
    const deadline = Date.now() + timeoutMs;
    while (this.pending.length === 0) {
      const wait = new Promise<'call'>((r) => this.waiters.push(() => r('call')));
      const races: Array<Promise<'call' | 'settled' | 'timeout'>> = [wait, new Promise((r) => setTimeout(() => r('timeout'), Math.max(1, deadline - Date.now())))];
      if (settledFirst) races.push(settledFirst.then(() => 'settled' as const, () => 'settled' as const));
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

// ---------------------------------------------------------------------------
// The local server, shared by the paths of one test file

export interface Server {
  server: LocalOpenAIServer;
  client: OpenAI;
  /** The next summary responses, per world (the handler takes from the front). */
  queue: Scenario[];
  /** A real SDK error for a context overflow, as the provider answered it. */
  overflowError: unknown;
  /** A real SDK error that is not an overflow. */
  otherError: unknown;
  close(): Promise<void>;
}

export async function startServer(): Promise<Server> {
  const queue: Scenario[] = [];
  const server = await startOpenAIServer({ scenarios: () => queue.shift() ?? { kind: 'reply', content: SUMMARY_TEXT } });
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
  const errorOf = async (scenario: Scenario): Promise<unknown> => {
    queue.push(scenario);
    try {
      await client.chat.completions.create({ model: 'small', messages: [{ role: 'user', content: 'hi' }] });
    } catch (err) {
      return err;
    }
    throw new Error('the server was scripted to fail');
  };
  const overflowError = await errorOf({ kind: 'status', ...OVERFLOW_BODIES.openai });
  const otherError = await errorOf({
    kind: 'status',
    status: 400,
    body: { error: { message: "Invalid 'messages[3]': tool_call_id c1 has no matching call", type: 'invalid_request_error', param: 'messages', code: null } },
  });
  return { server, client, queue, overflowError, otherError, close: () => server.close() };
}

// ---------------------------------------------------------------------------
// A world: one session on disk, its writer, the engine over it

export interface WorldOptions {
  config?: CompactionConfigInput;
  pruner?: false;
  /** Session id (file name). */
  id?: string;
  /**
   * The host passes its own summarizer: the OpenAISummarizer over the same client, whose
   * request also listens to the host's shutdown signal (`World.shutdownSummaries`). A summary
   * the host aborts fails `summary-cancelled` while the engine's own signal is still live.
   */
  hostSummarizer?: boolean;
  /** The engine's quick check of a step below the threshold (off here: every step runs the pressure chart, its measure held). */
  quickCheck?: boolean;
}

export interface World {
  dir: string;
  store: JsonlStore;
  id: string;
  session: Session;
  writer: SessionWriter;
  engine: CompactionEngine;
  defaults: EngineServices;
  ctl: Controller;
  clock: SimulatedClock;
  notes: EngineNotification[];
  srv: Server;
  /** Server requests before this world's run (index of its first summary request). */
  firstRequest: number;
  recorded: Recorded[];
  /** Index in `recorded` where the run under test starts. */
  mark: number;
  /** Log length where the run under test starts, and the log then (JSON per event). */
  logMark: string[];
  file: string;
  steps: number;
  /** Aborts the summaries in flight through the host's summarizer (`hostSummarizer` worlds only). */
  shutdownSummaries(): void;
}

const dirs: string[] = [];
const sessions: Session[] = [];

/**
 * Closes every session a test opened (its store's queued writes land first), then removes
 * their folders: removing a folder while a session still flushed into it failed with ENOTEMPTY.
 */
export async function cleanupWorlds(): Promise<void> {
  for (const s of sessions.splice(0)) await s.close().catch(() => undefined);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true, maxRetries: 5, retryDelay: 20 });
}

export async function openWorld(srv: Server, opts: WorldOptions = {}): Promise<World> {
  const dir = mkdtempSync(join(tmpdir(), 'xcompact-graph-'));
  dirs.push(dir);
  const store = new JsonlStore(dir, { sync: false });
  const id = opts.id ?? 'graph';
  const session = await Session.open(store, id);
  sessions.push(session);
  return attachEngine(srv, { dir, store, id, session }, opts);
}

/** An engine (with a fresh controller and recorder) over an already open session. */
export function attachEngine(
  srv: Server,
  base: { dir: string; store: JsonlStore; id: string; session: Session },
  opts: WorldOptions = {},
): World {
  const ctl = new Controller();
  const clock = new SimulatedClock();
  const recorded: Recorded[] = [];
  let defaults: EngineServices | undefined;
  const inspect = (e: InspectionEvent) => {
    if (e.type !== '@xstate.microstep') return;
    const transitions = transitionsOfMicrostep(e);
    if (transitions.length === 0) return;
    for (const t of transitions) runtimeCovered.add(t.key);
    recorded.push({ actor: e.actorRef.sessionId, machine: transitions[0]!.machine, transitions });
  };
  let shutdown = new AbortController();
  let summarizer: Summarizer | undefined;
  if (opts.hostSummarizer) {
    const inner = new OpenAISummarizer({ client: srv.client });
    summarizer = {
      name: `host(${inner.name})`,
      summarize: (request, signal) => inner.summarize(request, AbortSignal.any([signal, shutdown.signal])),
    };
  }
  const options: CompactionEngineOptions = {
    session: base.session,
    client: srv.client,
    ...(summarizer ? { summarizer } : {}),
    models: MODELS,
    config: { ...BASE_CONFIG, ...opts.config },
    inspect,
    clock: clock as unknown as CompactionEngineOptions['clock'],
    services: (d) => {
      defaults = d;
      return ctl.wrap(d);
    },
    ...(opts.pruner === false ? { pruner: false as const } : {}),
    quickCheck: opts.quickCheck ?? false,
  };
  const engine = createCompactionEngine(options);
  const notes: EngineNotification[] = [];
  engine.on((n) => notes.push(n));
  return {
    ...base,
    writer: new SessionWriter(base.session),
    engine,
    defaults: defaults!,
    ctl,
    clock,
    notes,
    srv,
    firstRequest: srv.server.requests.length,
    recorded,
    mark: 0,
    logMark: [],
    file: base.store.pathOf(base.id),
    steps: 0,
    shutdownSummaries: () => {
      if (!summarizer) throw new Error('shutdownSummaries: the world was opened without hostSummarizer');
      shutdown.abort(new Error('the host is shutting down'));
      shutdown = new AbortController(); // later summaries run again
    },
  };
}

// ---------------------------------------------------------------------------
// Writing an agent's work

export function route(w: World, model: string = 'small'): void {
  w.writer.request({ provider: 'test', model, systemPrompt: SYSTEM_PROMPT, tools: [], maxTokens: 500 });
}

export function startTurn(w: World, text = 'Please fix the build.'): void {
  w.writer.startTurn();
  route(w);
  w.writer.user(text);
}

export function endTurn(w: World): void {
  if (w.session.openStep) w.writer.endStep();
  if (w.session.openTurn !== null) w.writer.endTurn();
}

/** One agent step: header, an assistant message with one tool call, its result. */
/** `promptTokens`: the provider's reported usage for the step's reply. */
export function toolStep(w: World, opts: { result?: string; open?: boolean; model?: string; promptTokens?: number } = {}): void {
  if (w.session.openTurn === null) startTurn(w);
  if (w.session.openStep) w.writer.endStep();
  const i = w.session.length; // unique per session, also across engines over a reopened one
  w.steps++;
  w.writer.startStep();
  route(w, opts.model);
  w.writer.assistant({
    text: `step ${i}`,
    toolCalls: [{ id: `c${i}`, name: 'bash', arguments: JSON.stringify({ command: `ls dir${i}` }) }],
    ...(opts.promptTokens !== undefined ? { usage: { promptTokens: opts.promptTokens, completionTokens: 20 } } : {}),
  });
  w.writer.toolResult(`c${i}`, opts.result ?? `file${i}.ts\n`.repeat(60), { toolName: 'bash' });
  if (!opts.open) w.writer.endStep();
}

export function pressureNow(w: World): { total: number; threshold: number } {
  const m = w.engine.measure();
  return { total: m.totalTokens, threshold: m.threshold ?? Infinity };
}

/** Tool steps until the request is at least `margin` tokens over the threshold; the last step stays open. */
export function fillAbove(w: World, margin = 0, opts: { result?: string } = {}): void {
  for (let i = 0; i < 200; i++) {
    toolStep(w, { open: true, ...opts });
    const p = pressureNow(w);
    if (p.total >= p.threshold + margin) return;
  }
  throw new Error('fillAbove: pressure never reached the threshold');
}

/** Tool steps that stay under the threshold; the last step stays open. */
export function fillBelow(w: World, steps = 3): void {
  for (let i = 0; i < steps; i++) toolStep(w, { open: true });
  const p = pressureNow(w);
  if (p.total >= p.threshold) throw new Error('fillBelow: already above the threshold');
}

/** An orphan lock: a compaction/start no compaction/end follows (another compaction, or a dead process). */
export function takeLock(w: World): SessionEvent {
  return w.session.append({ type: 'compaction/start', data: { turn: w.session.openTurn, trigger: 'manual' } });
}

/**
 * Rewrites one surface node in place (content-only, as a prune pass does): the node's seq
 * leaves the surface, so a span that names it is no longer intact.
 */
export function rewriteNode(w: World, seq: number): void {
  const e = w.session.event(seq);
  const op = { op: 'replace' as const, start: seq, end: seq };
  if (e.type === 'tool/result') {
    w.session.append({ type: 'tool/result', data: { ...e.data, content: [{ type: 'text', text: 'rewritten while the compaction ran' }] }, surfaceOp: op, sourceEventSeqs: [seq] });
  } else if (e.type === 'user/message' || e.type === 'assistant/message') {
    w.session.append({ type: e.type, data: e.data, surfaceOp: op, sourceEventSeqs: [seq] } as never);
  } else {
    throw new Error(`rewriteNode: cannot rewrite a ${e.type}`);
  }
}

/** Makes the store refuse the next write: bytes appended behind the writer's back. */
export async function breakStore(w: World): Promise<void> {
  await w.session.flush();
  appendFileSync(w.file, '{"torn":');
}

/** A summary text whose framed checkpoint costs about `tokens` tokens. */
export function summaryOfTokens(tokens: number): string {
  const tokenizer = getTokenizer('o200k_base');
  const textOf = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(' ') || 'x';
  const cost = (n: number) => tokenizer.count(frameCheckpoint(textOf(n))) + 4;
  let lo = 0;
  let hi = Math.max(1, tokens);
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cost(mid) < tokens) lo = mid + 1;
    else hi = mid;
  }
  return textOf(lo);
}

/** Plain text of about `tokens` tokens (distinct words, so it costs what it looks like). */
export function textOfTokens(tokens: number): string {
  const tokenizer = getTokenizer('o200k_base');
  const textOf = (n: number) => Array.from({ length: n }, (_, i) => `note${i}`).join(' ');
  let lo = 1;
  let hi = Math.max(2, tokens);
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (tokenizer.count(textOf(mid)) < tokens) lo = mid + 1;
    else hi = mid;
  }
  return textOf(lo);
}

export function rangeOf(call: Call): RangeSelection {
  const r = call.output as RangeSelection | null;
  if (!r) throw new Error('selectRange gave no range');
  return r;
}

// ---------------------------------------------------------------------------
// Observation

/** Marks where the run under test starts (transitions and log). */
export function markRun(w: World): void {
  w.mark = w.recorded.length;
  w.firstRequest = w.srv.server.requests.length;
  w.logMark = w.session.events().map((e) => JSON.stringify(e));
}

/** Transitions the first actor of `machine` took since the mark. */
export function firedSinceMark(w: World, machine: string): TransitionInfo[] {
  const since = w.recorded.slice(w.mark).filter((r) => r.machine === machine);
  const actor = since[0]?.actor;
  return since.filter((r) => r.actor === actor).flatMap((r) => r.transitions);
}

/** The real chart took exactly the generated path's transitions. */
/**
 * The chart took the path's transitions, in order. Relayed notifications (`xcompact.notify`)
 * are left out of both: real charts announce as often as they prune or compact.
 */
export function expectPathTaken(w: World, path: GeneratedPath, byKey: Map<string, TransitionInfo>): void {
  const relay = (name: string) => name.includes('--xcompact.notify-->');
  const got = firedSinceMark(w, path.machine)
    .map((t) => t.name)
    .filter((n) => !relay(n));
  const want = path.fired.map((k) => byKey.get(k)?.name ?? k).filter((n) => !relay(n));
  expect(got, `the ${path.machine} chart's transitions at run time`).toEqual(want);
}

/** Event types appended since the mark. */
export function newTypes(w: World): string[] {
  return w.session
    .events()
    .slice(w.logMark.length)
    .map((e) => e.type);
}

export function newEvents(w: World): readonly SessionEvent[] {
  return w.session.events().slice(w.logMark.length);
}

/** Nothing logged before the mark was changed or removed. */
export function expectLogOnlyGrew(w: World): void {
  const now = w.session.events();
  expect(now.length).toBeGreaterThanOrEqual(w.logMark.length);
  expect(now.slice(0, w.logMark.length).map((e) => JSON.stringify(e))).toEqual(w.logMark);
}

export function expectValidRequest(w: World): void {
  expect(openAIMessageProblems(w.session.deriveMessages())).toEqual([]);
}

/** Summary requests the server received during this world's run. */
export function summaryRequests(w: World) {
  return w.srv.server.requests.slice(w.firstRequest).filter((r) => r.path === '/v1/chat/completions');
}

/**
 * Stops the engine (gracefully), closes the session and reopens it from the store: the
 * replayed log must equal the live one as it was before the stop. (A graceful stop closes a
 * bracket this engine left open with a compaction/end {cancelled}; at the end of a run none
 * may be open, so the stop must write nothing. A crash is `w.engine.actor.stop()`.)
 */
export async function expectReplays(w: World): Promise<Session> {
  const events = w.session.events().map((e) => JSON.stringify(e));
  const messages = JSON.stringify(w.session.deriveMessages());
  w.engine.stop();
  await w.session.close();
  const reopened = await Session.open(w.store, w.id);
  expect(reopened.events().map((e) => JSON.stringify(e))).toEqual(events);
  expect(JSON.stringify(reopened.deriveMessages())).toBe(messages);
  return reopened;
}
