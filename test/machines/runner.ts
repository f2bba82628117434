/**
 * Runs generated paths against the real engine: `createCompactionEngine` over a real
 * Session on a JsonlStore in a temp dir, the OpenAISummarizer talking to the local
 * OpenAI-compatible server, a SimulatedClock, and the `services` option wrapping every
 * default service in a deferred call that the path's script settles.
 *
 * A script takes the engine's service calls (controller.ts), writes the agent's work and
 * arranges the world (world.ts), and checks what came of it (observe.ts); this file builds the
 * world and re-exports the three.
 *
 * The transitions of every actor are recorded from its `@xstate.snapshot` inspection events:
 * per world (to compare what the real chart took with the generated path) and in the
 * process-wide runtime coverage set.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { SimulatedClock, type AnyEventObject, type AnyMachineSnapshot, type AnyStateMachine, type InspectionEvent } from 'xstate';
import {
  createCompactionEngine,
  type CompactionEngine,
  type CompactionEngineOptions,
  type EngineNotification,
  type EngineServices,
} from '../../src/engine/facade';
import type { CompactionConfigInput } from '../../src/services/config';
import type { Summarizer } from '../../src/services/summarizing';
import { OpenAISummarizer } from '../../src/services/summarizing';
import { Session } from '../../src/session/session';
import { JsonlStore } from '../../src/session/stores/jsonl';
import { SessionWriter } from '../../src/session/writer';
import { OVERFLOW_BODIES, startOpenAIServer, type LocalOpenAIServer, type Scenario } from '../../src/testing/openai-server';
import { valueHas } from './crash-paths';
import { initialStep, pureStep, transitionDefs, type TransitionInfo } from './model';
import { Controller } from './controller';

export * from './controller';
export * from './observe';
export * from './world';

export const MODELS = {
  'test/small': { contextWindow: 6000, maxOutputTokens: 500 },
  'test/big': { contextWindow: 200_000, maxOutputTokens: 500 },
  // The agent switches to a smaller window: the same request is suddenly over its threshold.
  'test/tiny': { contextWindow: 4000, maxOutputTokens: 500 },
  // A local server with one slot (llama.cpp -np 1): a background summary waits for the agent's reply.
  'test/slot1': { contextWindow: 6000, maxOutputTokens: 500, concurrency: 1 },
};
// The cost model is off unless a world turns it on (the pressure paths that weigh costs do).
// Background off: these paths walk the foreground charts (pressure, transaction, engine); the
// background and gate charts' suites turn it on (suite-background-engine.ts, suite-gate-engine.ts).
// The model-free fallback (truncationFallback) off too, unless a world turns it on: the charts'
// inputs labelled 'fallback' and 'breaker open' walk it (a failed summary then truncates instead).
export const BASE_CONFIG: CompactionConfigInput = {
  headroomTokens: 500,
  maxTokens: 400,
  thresholdRatio: 0.8,
  retainRatio: 0.2,
  economics: false,
  background: false,
  truncationFallback: false,
};
export const SUMMARY_TEXT = '## Goal\nFix the build.\n## Progress\nListed the files of every directory; nothing failed yet.';

// ---------------------------------------------------------------------------
// Runtime coverage (process-wide)

export const runtimeCovered = new Set<string>();

export interface Recorded {
  actor: string;
  machine: string;
  transitions: TransitionInfo[];
}

/**
 * The transitions a real actor took, from the public `@xstate.snapshot` inspection event (the
 * event it processed, its new snapshot) and its previous snapshot: the same pure stepping the
 * generator uses (model.ts), on the actor's own logic (the engine's `provide()`d copy, or a
 * mutant). `@xstate.microstep` names them only in its internal `_transitions`.
 */
export function transitionsTaken(e: Extract<InspectionEvent, { type: '@xstate.snapshot' }>, previous: Map<string, AnyMachineSnapshot>): TransitionInfo[] {
  const logic = (e.actorRef as { logic?: unknown }).logic as AnyStateMachine | undefined;
  if (!logic || typeof (logic as { getTransitionData?: unknown }).getTransitionData !== 'function') return [];
  const id = e.actorRef.sessionId;
  const before = previous.get(id);
  const after = e.snapshot as AnyMachineSnapshot;
  previous.set(id, after);
  const event = e.event;
  let keys: string[];
  if (before) keys = pureStep(logic, before, event).fired;
  else if (event.type === 'xstate.init') keys = initialStep(logic, (event as { input?: unknown }).input).fired;
  else return [];
  if (keys.length === 0) return [];
  const byKey = infoCache(logic);
  return keys.map(
    (k) => byKey.get(k) ?? { key: k, machine: logic.id, source: k, event: k, index: 0, guard: undefined, targets: [], actions: [], name: `${logic.id}: ${k}` },
  );
}

const infos = new WeakMap<object, Map<string, TransitionInfo>>();
function infoCache(logic: AnyStateMachine): Map<string, TransitionInfo> {
  let m = infos.get(logic.config);
  if (!m) {
    m = new Map(transitionDefs(logic).map((t) => [t.key, t]));
    infos.set(logic.config, m);
  }
  return m;
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
  /** The engine chart's `request.settled` events, as a createCompactionMachine host gets them. */
  settled: unknown[];
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
/**
 * World folders live under one parent, removed whole by cleanupWorlds (and when the process
 * exits, for a mutant worker that ends mid-path), so no folder is left in the temp dir.
 */
let worldsRoot: string | undefined;
function worldDir(): string {
  if (worldsRoot === undefined) {
    const root = mkdtempSync(join(tmpdir(), 'xcompact-graph-'));
    worldsRoot = root;
    process.once('exit', () => rmSync(root, { recursive: true, force: true }));
  }
  return mkdtempSync(join(worldsRoot, 'world-'));
}
const sessions: Session[] = [];

const live: World[] = [];

/** Every world's engine dies (its controller runs nothing more) and its session closes. */
export async function stopWorlds(): Promise<void> {
  for (const w of live.splice(0)) {
    w.ctl.kill();
    w.engine.actor.stop();
    await w.session.close().catch(() => undefined);
  }
}

/**
 * Closes every session a test opened (its store's queued writes land first), then removes
 * their folders: removing a folder while a session still flushed into it failed with ENOTEMPTY.
 */
export async function cleanupWorlds(): Promise<void> {
  live.length = 0;
  for (const s of sessions.splice(0)) await s.close().catch(() => undefined);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true, maxRetries: 5, retryDelay: 20 });
  if (worldsRoot !== undefined) rmSync(worldsRoot, { recursive: true, force: true, maxRetries: 5, retryDelay: 20 });
  worldsRoot = undefined;
}

export async function openWorld(srv: Server, opts: WorldOptions = {}): Promise<World> {
  const dir = worldDir();
  dirs.push(dir);
  const store = new JsonlStore(dir, { sync: false });
  const id = opts.id ?? 'graph';
  const session = await Session.open(store, id);
  sessions.push(session);
  return attachEngine(srv, { dir, store, id, session }, opts);
}

/** An engine (with a fresh controller and recorder) over an already open session. */
export function attachEngine(srv: Server, base: { dir: string; store: JsonlStore; id: string; session: Session }, opts: WorldOptions = {}): World {
  const ctl = new Controller();
  const clock = new SimulatedClock();
  const recorded: Recorded[] = [];
  let defaults: EngineServices | undefined;
  const previous = new Map<string, AnyMachineSnapshot>();
  let self: World | undefined;
  const inspect = (e: InspectionEvent) => {
    if (e.type !== '@xstate.snapshot') return;
    const plan = crashPlan;
    if (
      plan &&
      !plan.crashed &&
      (e.actorRef as { logic?: { id?: string } }).logic?.id === plan.machine &&
      valueHas((e.snapshot as AnyMachineSnapshot).value, plan.state)
    ) {
      plan.crashed = true;
      // Once the step that entered the state is done (an actor cannot be stopped from inside its
      // own step): the process dies, no cleanup code runs.
      queueMicrotask(() => {
        if (!self) throw new Error('a crash planned before the engine existed');
        plan.world = self;
        self.ctl.kill();
        self.engine.actor.stop();
        plan.live = self.session.events().map((x) => JSON.stringify(x));
        // The dead process's file handle is released; nothing it had not written is written.
        plan.closed = self.session.close().catch(() => undefined);
        plan.resolve();
      });
    }
    const transitions = transitionsTaken(e, previous);
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
    clock: clock,
    services: (d) => {
      defaults = d;
      return ctl.wrap(d);
    },
    ...(opts.pruner === false ? { pruner: false as const } : {}),
    quickCheck: opts.quickCheck ?? false,
    // The paths route to unknown models on purpose (pressure:unknown-model) and check the chart's
    // warning: the facade's rejection of that step is tested in engine-charts.test.ts.
    requireCapacity: false,
  };
  const engine = createCompactionEngine(options);
  if (crashPlan) {
    // A planned crash rejects the facade call in flight (engine-stopped), which a path script may
    // never await once it failed on the dead process: marked handled here, still rejected for it.
    const facade = engine as unknown as Record<string, (...args: unknown[]) => unknown>;
    for (const name of ['afterStep', 'onRequestError', 'compactNow'] as const) {
      const call = facade[name]!.bind(engine);
      facade[name] = (...args: unknown[]) => {
        const p = call(...args);
        if (p instanceof Promise) p.catch(() => undefined);
        return p;
      };
    }
  }
  const notes: EngineNotification[] = [];
  engine.on((n) => notes.push(n));
  const settled: unknown[] = [];
  engine.actor.on('request.settled', (e) => void settled.push(e));
  self = {
    ...base,
    writer: new SessionWriter(base.session),
    engine,
    defaults: defaults!,
    ctl,
    clock,
    notes,
    settled,
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
  live.push(self);
  return self;
}

/** A crash planned by crash.test.ts: the engine's actor stops as soon as a `machine` actor enters `state`. */
export interface CrashPlan {
  machine: string;
  state: string;
  crashed: boolean;
  /** The world whose engine crashed. */
  world: World | undefined;
  /** The session's log when the process died (JSON per event). */
  live: string[];
  /** Settles once the dead process's session is closed. */
  closed: Promise<void>;
  /** Settles once the engine's actor was stopped. */
  done: Promise<void>;
  resolve(): void;
}

let crashPlan: CrashPlan | undefined;

export function planCrash(machine: string, state: string): CrashPlan {
  let resolve!: () => void;
  const done = new Promise<void>((r) => (resolve = r));
  crashPlan = { machine, state, crashed: false, world: undefined, live: [], closed: Promise.resolve(), done, resolve };
  return crashPlan;
}

export function clearCrashPlan(): void {
  crashPlan = undefined;
}
