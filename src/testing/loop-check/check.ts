/**
 * checkLoop: runs a user's agent loop against one scenario (the local server scripted as the
 * scenario says, a crashable JSONL store, fixture files) and checks the invariants a user
 * relies on. The loop is a function of a {@link LoopContext}; it builds its own engine (or the
 * drop-in client, or its own XState machine) the way it does in production.
 */
import { mkdtempSync, rmSync, writeFileSync, mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, basename } from 'node:path';
import type { CompactionConfigInput } from '../../services/config';
import type { CompactionEngine, CompactionEngineOptions } from '../../engine';
import { observeEngines } from '../../engine-observers';
import type { SessionEvent } from '../../session/events';
import { Session } from '../../session/session';
import { JsonlStore } from '../../session/stores/jsonl';
import type { SessionStore } from '../../session/store';
import { estimatePromptTokens, startOpenAIServer } from '../openai-server.js';
import type { ChatRequestBody } from '../scenarios.js';
import { openAIMessageProblems } from '../request-problems.js';
import { CrashableStore } from './crash-store.js';
import { collectTransitions, type TransitionLog } from './coverage.js';
import type { LoopScenario } from './scenarios.js';
import { isSummaryRequest, scenarioScript } from './script.js';

/** What a loop under test is given. */
export interface LoopContext {
  /** The scripted server: `new OpenAI({ baseURL, apiKey, maxRetries: 0 })`. */
  readonly baseURL: string;
  readonly apiKey: string;
  /** Where the session lives: open it with `Session.open(store, sessionId)`. */
  readonly store: SessionStore;
  readonly sessionId: string;
  /** The user turns to run, in order (after a crash: the turns still to answer). */
  readonly turns: readonly string[];
  /** True for the run after a simulated crash: the session must be reopened (and recovered). */
  readonly resumed: boolean;
  readonly provider: string;
  readonly model: string;
  readonly contextWindow: number;
  /** Send this as `max_tokens` (the engine's output reservation). */
  readonly maxOutputTokens: number;
  /** `{ [`${provider}/${model}`]: { contextWindow, maxOutputTokens } }`, for `createCompactionEngine({ models })`. */
  readonly models: Readonly<Record<string, { contextWindow: number; maxOutputTokens: number }>>;
  /** Pass as the engine's `config`. */
  readonly config: CompactionConfigInput;
  /** A directory holding the scenario's fixture files: a read-file tool rooted here reads them. */
  readonly workdir: string;
  /** A tool the scripted model may call, for loops without tools of their own. */
  readonly tools: ReadonlyArray<{ type: 'function'; function: { name: string; description: string; parameters: Record<string, unknown> } }>;
  /** Runs that tool (or any call whose first string argument names a fixture file). */
  runTool(name: string, args: string): Promise<string>;
  /** Aborted when the scenario cancels the loop, or when the process "crashes". */
  readonly signal: AbortSignal;
}

export type UserLoop = (ctx: LoopContext) => Promise<unknown>;

export type Invariant =
  | 'tool-results-paired'
  | 'within-window'
  | 'retry-only-when-told'
  | 'after-step-inside-step'
  | 'no-acknowledged-event-lost'
  | 'resumes-after-crash'
  | 'session-closed'
  | 'expected-outcome'
  | 'finishes';

export interface Violation {
  invariant: Invariant;
  message: string;
}

export interface LoopReport {
  scenario: string;
  /** The loop model's states along the scenario's path. */
  path: readonly string[];
  /** The engine chart states the path exercises. */
  charts: readonly string[];
  ok: boolean;
  violations: Violation[];
  /** How the loop ended: resolved, or the error it rejected with. */
  ended: { kind: 'resolved' } | { kind: 'rejected'; error: unknown } | { kind: 'timeout' };
  /** Agent requests the server received (summary requests not counted). */
  requests: number;
  /** Chart transitions the loop's engines took (empty when the loop built no engine through createCompactionEngine). */
  transitions: TransitionLog;
  /** The session log at the end. */
  events: readonly SessionEvent[];
}

export interface CheckLoopOptions {
  /** A run that takes longer fails with `finishes` (default 20 s). */
  timeoutMs?: number;
  /** Keep the temporary folder (its path is in the violation messages) instead of removing it. */
  keepFiles?: boolean;
}

const FIXTURE_TOOL = {
  type: 'function' as const,
  function: {
    name: 'read_fixture',
    description: 'Read one of the project notes by file name.',
    parameters: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
  },
};

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<{ kind: 'resolved'; value: T } | { kind: 'rejected'; error: unknown } | { kind: 'timeout' }> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ kind: 'timeout' }), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve({ kind: 'resolved', value });
      },
      (error: unknown) => {
        clearTimeout(timer);
        resolve({ kind: 'rejected', error });
      },
    );
  });
}

/** Runs `loop` on `scenario` and checks every invariant; never throws for a broken loop (see {@link assertLoop}). */
export async function checkLoop(loop: UserLoop, scenario: LoopScenario, options: CheckLoopOptions = {}): Promise<LoopReport> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const dir = mkdtempSync(join(tmpdir(), 'xcompact-loop-check-'));
  const workdir = join(dir, 'work');
  mkdirSync(workdir);
  for (const [name, text] of Object.entries(scenario.fixtures)) writeFileSync(join(workdir, name), text);
  const sessionsDir = join(dir, 'sessions');
  const store = new CrashableStore(new JsonlStore(sessionsDir));
  const sessionId = 'loop';
  const violations: Violation[] = [];
  const transitions: TransitionLog = { taken: new Map() };
  const afterStepOutside: string[] = [];
  const retried = new Map<number, 'retry' | 'fail'>();
  let breakerOpened = false;
  let breakerClosed = false;

  let controller = new AbortController();
  let crashRequested: (() => void) | undefined;
  const crashPoint = new Promise<void>((resolve) => (crashRequested = resolve));
  let crashedAt: number | undefined;

  const script = scenarioScript(scenario, {
    onCrashPoint: () => crashRequested?.(),
    onCancelPoint: () => controller.abort(new Error('cancelled by the scenario')),
  });
  const server = await startOpenAIServer({ scenarios: script.handler, defaultModel: scenario.model });

  const stopObserving = observeEngines((engineObject, optionsObject) => {
    const engine = engineObject as CompactionEngine;
    const engineOptions = optionsObject as CompactionEngineOptions;
    collectTransitions(engine.actor, transitions);
    engine.on((e) => {
      if (e.type === 'breaker.opened') breakerOpened = true;
      if (e.type === 'breaker.closed') breakerClosed = true;
    });
    const afterStep = engine.afterStep.bind(engine);
    engine.afterStep = (opts) => {
      if (engineOptions.session.openStep === null) afterStepOutside.push(`afterStep() was called with no step open (after step/end, or before step/start)`);
      return afterStep(opts);
    };
    const onRequestError = engine.onRequestError.bind(engine);
    engine.onRequestError = async (error, opts) => {
      const action = await onRequestError(error, opts);
      const last = [...server.requests].reverse().find((r) => !isSummaryRequest((r.json ?? {}) as ChatRequestBody));
      if (last) retried.set(last.index, action.kind);
      return action;
    };
  });

  const contextFor = (turns: readonly string[], resumed: boolean): LoopContext => ({
    baseURL: server.baseURL,
    apiKey: 'test',
    store,
    sessionId,
    turns,
    resumed,
    provider: scenario.provider,
    model: scenario.model,
    contextWindow: scenario.contextWindow,
    maxOutputTokens: scenario.maxOutputTokens,
    models: { [`${scenario.provider}/${scenario.model}`]: { contextWindow: scenario.contextWindow, maxOutputTokens: scenario.maxOutputTokens } },
    config: scenario.config,
    workdir,
    tools: [FIXTURE_TOOL],
    runTool: async (_name, args) => {
      let file: string | undefined;
      try {
        const parsed = JSON.parse(args) as Record<string, unknown>;
        file = Object.values(parsed).find((v): v is string => typeof v === 'string');
      } catch {
        return 'error: the arguments are not JSON';
      }
      if (!file) return 'error: name a file';
      try {
        return readFileSync(join(workdir, basename(file)), 'utf8');
      } catch {
        return `error: no file ${file}`;
      }
    },
    signal: controller.signal,
  });

  let ended: LoopReport['ended'] = { kind: 'timeout' };
  let acknowledgedAtCrash: SessionEvent[] | undefined;
  try {
    const first = loop(contextFor(scenario.turns, false));
    const raced = await Promise.race([withTimeout(first, timeoutMs), crashPoint.then(() => 'crash' as const)]);
    if (raced === 'crash') {
      crashedAt = server.requests.length;
      // The process dies: what was flushed survives, the rest is gone, and the first run is abandoned.
      const acknowledged = store.acknowledgedCount(sessionId);
      await store.crash();
      controller.abort(new Error('the process crashed (simulated)'));
      await withTimeout(first, 5_000);
      const survived = readLog(sessionsDir, sessionId);
      acknowledgedAtCrash = survived.slice(0, acknowledged);
      script.resume();
      controller = new AbortController();
      // The turns the user has not had an answer to: the interrupted one is asked again.
      const remaining = scenario.turns.slice(turnsAnswered(survived));
      const second = await withTimeout(loop(contextFor(remaining, true)), timeoutMs);
      ended = second.kind === 'resolved' ? { kind: 'resolved' } : second;
      if (second.kind !== 'resolved' && scenario.expect.outcome === 'done') {
        violations.push({ invariant: 'resumes-after-crash', message: `after the crash the loop did not finish the remaining turns: ${describeEnd(second)}` });
      }
    } else {
      ended = raced.kind === 'resolved' ? { kind: 'resolved' } : raced;
    }
  } finally {
    stopObserving();
    await server.close();
  }

  // ---- the invariants -------------------------------------------------------------------------
  const agent = server.requests.filter((r) => r.path === '/v1/chat/completions' && !isSummaryRequest((r.json ?? {}) as ChatRequestBody));
  for (const r of agent) {
    const body = (r.json ?? {}) as ChatRequestBody;
    for (const problem of openAIMessageProblems(body.messages ?? [])) {
      violations.push({ invariant: 'tool-results-paired', message: `request ${r.index}: ${problem}` });
    }
    const tokens = estimatePromptTokens(body);
    if (tokens > scenario.contextWindow) {
      violations.push({ invariant: 'within-window', message: `request ${r.index} is ${tokens} tokens, over the ${scenario.contextWindow}-token window` });
    }
  }
  for (const index of script.overflowed) {
    const position = agent.findIndex((r) => r.index === index);
    const next = agent[position + 1];
    const told = retried.get(index);
    if (!next || (crashedAt !== undefined && next.index >= crashedAt)) continue;
    if (told === undefined && retried.size === 0 && !observedAnyEngine(transitions)) {
      // A loop without an engine we could watch: judge by the request itself.
      if (estimatePromptTokens((next.json ?? {}) as ChatRequestBody) >= estimatePromptTokens((agent[position]!.json ?? {}) as ChatRequestBody)) {
        violations.push({ invariant: 'retry-only-when-told', message: `request ${next.index} re-sent the overflowed request ${index} without it shrinking` });
      }
    } else if (told !== 'retry') {
      violations.push({
        invariant: 'retry-only-when-told',
        message: `request ${index} overflowed and the engine answered ${told ?? 'nothing (onRequestError was not called)'}, but the loop sent request ${next.index}`,
      });
    }
  }
  for (const message of afterStepOutside) violations.push({ invariant: 'after-step-inside-step', message });

  let events: SessionEvent[] = [];
  try {
    const reopened = await Session.open(new JsonlStore(sessionsDir), sessionId);
    events = [...reopened.events()];
    await reopened.close();
  } catch (err) {
    const code = (err as { code?: string }).code;
    violations.push({
      invariant: 'session-closed',
      message: code === 'store-locked' ? 'the loop left the session open: close it (session.close()) when the loop ends' : `the session does not reopen: ${String(err)}`,
    });
    events = readLog(sessionsDir, sessionId);
  }
  violations.push(...logViolations(events));
  if (acknowledgedAtCrash) {
    const lost = acknowledgedAtCrash.findIndex((e, i) => JSON.stringify(events[i]) !== JSON.stringify(e));
    if (lost >= 0) violations.push({ invariant: 'no-acknowledged-event-lost', message: `event ${lost} (${acknowledgedAtCrash[lost]!.type}), acknowledged before the crash, is not in the log any more` });
  }
  violations.push(...expectationViolations(scenario, ended, events, { breakerOpened, breakerClosed, observed: observedAnyEngine(transitions) }));

  if (!options.keepFiles) rmSync(dir, { recursive: true, force: true });
  return {
    scenario: scenario.name,
    path: scenario.path,
    charts: scenario.charts,
    ok: violations.length === 0,
    violations,
    ended,
    requests: agent.length,
    transitions,
    events,
  };
}

/** The provider's HTTP error as the client reports it: the openai SDK's `status`, the AI SDK's `statusCode` (also as a cause). */
function isProviderError(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const { status, statusCode } = e as { status?: unknown; statusCode?: unknown };
    if (typeof status === 'number' || typeof statusCode === 'number') return true;
  }
  return false;
}

function observedAnyEngine(t: TransitionLog): boolean {
  return t.taken.size > 0;
}

function readLog(dir: string, id: string): SessionEvent[] {
  try {
    return readFileSync(join(dir, `${id}.jsonl`), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as SessionEvent];
        } catch {
          return [];
        }
      });
  } catch {
    return [];
  }
}

/** Turns completed in a log (a `turn/end` with no reason, or `completed`). */
function turnsAnswered(events: readonly SessionEvent[]): number {
  return events.filter((e) => {
    if (e.type !== 'turn/end') return false;
    const reason = (e.data as { reason?: string }).reason;
    return reason === undefined || reason === 'completed';
  }).length;
}

function describeEnd(end: { kind: 'rejected'; error: unknown } | { kind: 'timeout' }): string {
  return end.kind === 'timeout' ? 'it did not finish in time' : `it rejected with ${String(end.error instanceof Error ? `${end.error.name}: ${end.error.message}` : end.error)}`;
}

/** What the log itself must show: no compaction left open, pressure work inside a step. */
function logViolations(events: readonly SessionEvent[]): Violation[] {
  const out: Violation[] = [];
  let open: { turn: number; step: number } | null = null;
  let bracket: SessionEvent | undefined;
  for (const e of events) {
    if (e.type === 'step/start') open = e.data as { turn: number; step: number };
    if (e.type === 'step/end') open = null;
    if (e.type === 'session/end-seed') bracket = undefined;
    if (e.type === 'compaction/start') {
      bracket = e;
      const d = e.data as { trigger?: string; background?: boolean };
      if (d.trigger === 'pressure' && !d.background && open === null) {
        out.push({ invariant: 'after-step-inside-step', message: `the pressure compaction at seq ${e.seq} ran with no step open: call afterStep() before step/end` });
      }
    }
    if (e.type === 'compaction/prune' && open === null) {
      out.push({ invariant: 'after-step-inside-step', message: `the prune at seq ${e.seq} ran with no step open: call afterStep() before step/end` });
    }
    if (e.type === 'compaction/end') bracket = undefined;
  }
  if (bracket) out.push({ invariant: 'session-closed', message: `the compaction opened at seq ${bracket.seq} was never closed (a crash needs session.recover() on reopen)` });
  return out;
}

function expectationViolations(
  scenario: LoopScenario,
  ended: LoopReport['ended'],
  events: readonly SessionEvent[],
  seen: { breakerOpened: boolean; breakerClosed: boolean; observed: boolean },
): Violation[] {
  const out: Violation[] = [];
  const x = scenario.expect;
  const fail = (invariant: Invariant, message: string) => out.push({ invariant, message });
  if (ended.kind === 'timeout') fail('finishes', 'the loop did not finish in time (is it waiting on something the engine never answers, or ignoring ctx.signal?)');
  if (x.outcome === 'done' && ended.kind === 'rejected') fail('expected-outcome', `every turn should have been answered, but ${describeEnd(ended)}`);
  if (x.outcome === 'provider-error') {
    if (ended.kind !== 'rejected') fail('expected-outcome', 'the provider rejected a request the engine could not shrink: the loop should have ended with that error');
    else if (!isProviderError(ended.error)) fail('expected-outcome', `the loop should end with the provider's own error, not ${String(ended.error)}`);
  }
  if (x.outcome === 'cancelled' && ended.kind === 'resolved') fail('expected-outcome', 'the loop was cancelled mid-summary but resolved as if nothing happened');
  if (x.outcome === 'done' && ended.kind === 'resolved') {
    const userTurns = events.filter((e) => e.type === 'turn/start').length;
    if (turnsAnswered(events) < scenario.turns.length && userTurns >= scenario.turns.length) {
      fail('expected-outcome', `${turnsAnswered(events)} of ${scenario.turns.length} turns ended completed`);
    }
  }
  const brackets = bracketsOf(events);
  if (x.pruned && !events.some((e) => e.type === 'compaction/prune')) fail('expected-outcome', 'the oversized tool result was never pruned (is afterStep() called after each step?)');
  if (x.committed) {
    const ok = brackets.some(
      (b) => b.trigger === x.committed!.trigger && (x.committed!.background === undefined || b.background === x.committed!.background) && b.committed,
    );
    if (!ok) fail('expected-outcome', `no ${x.committed.background ? 'background ' : ''}${x.committed.trigger} compaction was committed (brackets: ${describeBrackets(brackets)})`);
  }
  if (x.summaryFailed && !brackets.some((b) => b.error !== undefined)) fail('expected-outcome', 'the summary failed, but no compaction ended with that error');
  if (x.breaker && seen.observed && !(seen.breakerOpened && seen.breakerClosed)) {
    fail('expected-outcome', `the circuit breaker should have opened and closed again (opened: ${seen.breakerOpened}, closed: ${seen.breakerClosed})`);
  }
  return out;
}

interface Bracket {
  startSeq: number;
  trigger: string;
  background: boolean;
  committed: boolean;
  error: string | undefined;
}

/** The compaction brackets of a log: a start, then (one at a time) its summary and its end. */
function bracketsOf(events: readonly SessionEvent[]): Bracket[] {
  const out: Bracket[] = [];
  let open: Bracket | undefined;
  for (const e of events) {
    if (e.type === 'compaction/start') {
      const d = e.data as { trigger: string; background?: boolean };
      open = { startSeq: e.seq, trigger: d.trigger, background: d.background === true, committed: false, error: undefined };
      out.push(open);
    } else if (e.type === 'compaction/summary' && open) open.committed = true;
    else if (e.type === 'compaction/end' && open) {
      const error = (e.data as { error?: { code?: string; cause?: string } }).error;
      if (error) open.error = error.cause ?? error.code ?? 'error';
      open = undefined;
    } else if (e.type === 'session/end-seed') open = undefined;
  }
  return out;
}

function describeBrackets(brackets: readonly Bracket[]): string {
  if (brackets.length === 0) return 'none';
  return brackets.map((b) => `${b.background ? 'background ' : ''}${b.trigger} ${b.committed ? 'committed' : b.error ? `failed (${b.error})` : 'never closed'}`).join(', ');
}

/** Throws an Error naming the scenario, its chart path and every broken invariant; returns the report otherwise. */
export function assertLoop(report: LoopReport): LoopReport {
  if (report.ok) return report;
  const lines = report.violations.map((v) => `  ✗ ${v.invariant}: ${v.message}`);
  throw new Error([`scenario "${report.scenario}" (path ${report.path.join(' → ')}; charts ${report.charts.join(', ')}):`, ...lines].join('\n'));
}
