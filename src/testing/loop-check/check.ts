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
import type { CompactionEngine, CompactionEngineOptions } from '../../engine/facade';
import { observeEngines } from '../../engine/observers';
import type { SessionEvent } from '../../session/events';
import { Session } from '../../session/session';
import { JsonlStore } from '../../session/stores/jsonl';
import type { SessionStore } from '../../session/store';
import { estimatePromptTokens, startOpenAIServer } from '../openai-server';
import type { ChatRequestBody } from '../scenarios';
import { openAIMessageProblems } from '../request-problems';
import { CrashableStore } from './crash-store';
import { collectTransitions, type TransitionLog } from './coverage';
import type { LoopScenario } from './scenarios';
import { isSummaryRequest, scenarioScript } from './script';
import { checkpointViolations, duplicateViolations, messageKeys, resumeViolations, type AgentRequest, type StoreMark } from './requests';
import { describeEnd, expectationViolations, logViolations, turnsAnswered, type LoopReport, type Violation } from './invariants';

export { assertLoop, type Invariant, type LoopReport, type Violation } from './invariants';

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

export interface CheckLoopOptions {
  /**
   * A run that takes longer fails with `finishes` alone (default 20 s): a run the clock cut short
   * leaves its session open and its log unfinished, so nothing else is judged. Raise it on a
   * loaded machine; the report says so.
   */
  timeoutMs?: number;
  /**
   * No longer used: whether a loop stops on abort is judged by what it did with `ctx.signal`
   * (an engine call given no aborted signal, or the cancelled summary request left running),
   * never by how long it took.
   * @deprecated
   */
  abortGraceMs?: number;
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

  // The scenario's cancel, at a summary request that hangs until the client lets it go. A loop
  // that hands ctx.signal on stops it; one that does not is told by what it did, not by the
  // clock: an engine call waiting (on that summary) was given no signal the abort reached, or,
  // where no engine call was seen, the summary request was still running when time ran out.
  let abortIgnored: (() => void) | undefined;
  const signalIgnored = new Promise<'abort-ignored'>((resolve) => (abortIgnored = () => resolve('abort-ignored')));
  /** Engine calls running now (afterStep, beforeRequest, onRequestError), with the signal each was given. */
  const engineCalls = new Set<{ signal: AbortSignal | undefined }>();
  let cancelledRequest: number | undefined;
  const script = scenarioScript(scenario, {
    onCrashPoint: () => crashRequested?.(),
    onCancelPoint: (index) => {
      cancelledRequest = index;
      controller.abort(new Error('cancelled by the scenario'));
      if (engineCalls.size > 0 && ![...engineCalls].some((c) => c.signal?.aborted === true)) abortIgnored?.();
    },
  });
  const tracked = async <T>(signal: AbortSignal | undefined, call: () => Promise<T>): Promise<T> => {
    const entry = { signal };
    engineCalls.add(entry);
    try {
      return await call();
    } finally {
      engineCalls.delete(entry);
    }
  };
  const server = await startOpenAIServer({ scenarios: script.handler, defaultModel: scenario.model });
  // Every event the loop writes, with how many requests the server had by then: which request came after a commit.
  const marks: StoreMark[] = [];
  const stopWatching = store.watch((_id, event) => marks.push({ event, requests: server.requests.length }));
  // The tool-step crash points: the process dies while the loop runs the step's call(s).
  let toolCalls = 0;
  let firstToolCall: Promise<unknown> = Promise.resolve();
  const crashInTool = (signal: AbortSignal): Promise<never> => {
    crashRequested?.();
    return new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
  };

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
      return tracked(opts?.signal, () => afterStep(opts));
    };
    const beforeRequest = engine.beforeRequest.bind(engine);
    // (Its own afterStep goes through the wrapper above too: one more entry with the same signal.)
    engine.beforeRequest = (opts) => tracked(opts?.signal, () => beforeRequest(opts));
    const onRequestError = engine.onRequestError.bind(engine);
    engine.onRequestError = async (error, opts) => {
      const action = await tracked(opts?.signal, () => onRequestError(error, opts));
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
    runTool: async (name, args) => {
      const signal = controller.signal;
      const call = ++toolCalls;
      if (!resumed && crashedAt === undefined) {
        if (scenario.script.crashAt === 'tool-call' && call === 1) return crashInTool(signal);
        if (scenario.script.crashAt === 'tool-batch' && call === 2) {
          await firstToolCall;
          return crashInTool(signal);
        }
      }
      const result = readTool(name, args);
      if (call === 1) firstToolCall = result;
      return result;
    },
    signal: controller.signal,
  });

  const readTool = async (_name: string, args: string): Promise<string> => {
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
  };

  let ended: LoopReport['ended'] = { kind: 'timeout' };
  let abortIgnoredBy: 'engine-call' | 'request' | undefined;
  /** The clock ended the run: a slow loop (or one waiting forever), not judged on a log it never finished. */
  let outOfTime = false;
  let acknowledgedAtCrash: SessionEvent[] | undefined;
  let resume: { requests: number; logLength: number; keys: string[] } | undefined;
  try {
    const first = loop(contextFor(scenario.turns, false));
    const raced = await Promise.race([withTimeout(first, timeoutMs), crashPoint.then(() => 'crash' as const), signalIgnored]);
    if (raced === 'abort-ignored') {
      abortIgnoredBy = 'engine-call';
      ended = { kind: 'timeout' };
    } else if (raced === 'crash') {
      crashedAt = server.requests.length;
      // The process dies: what was flushed survives, the rest is gone, and the first run is abandoned.
      const acknowledged = store.acknowledgedCount(sessionId);
      await store.crash();
      controller.abort(new Error('the process crashed (simulated)'));
      await withTimeout(first, 5_000);
      const survived = readLog(sessionsDir, sessionId);
      acknowledgedAtCrash = survived.slice(0, acknowledged);
      resume = { requests: server.requests.length, logLength: survived.length, keys: await surfaceKeys(sessionsDir, sessionId) };
      script.resume();
      controller = new AbortController();
      // The turns the user has not had an answer to: the interrupted one is asked again.
      const remaining = scenario.turns.slice(turnsAnswered(survived));
      const second = await withTimeout(loop(contextFor(remaining, true)), timeoutMs);
      ended = second.kind === 'resolved' ? { kind: 'resolved' } : second;
      if (second.kind === 'timeout') outOfTime = true;
      else if (second.kind !== 'resolved' && scenario.expect.outcome === 'done') {
        violations.push({ invariant: 'resumes-after-crash', message: `after the crash the loop did not finish the remaining turns: ${describeEnd(second)}` });
      }
    } else {
      ended = raced.kind === 'resolved' ? { kind: 'resolved' } : raced;
      if (raced.kind === 'timeout') {
        // Cancelled, and the summary it cancelled never let go by the client: the signal was not handed on.
        if (cancelledRequest !== undefined && server.requests[cancelledRequest]?.aborted !== true) abortIgnoredBy = 'request';
        else outOfTime = true;
      }
    }
  } finally {
    // A run still going is stopped (its signal aborted) before its server and folder go.
    if (ended.kind === 'timeout') controller.abort(new Error('checkLoop: the run is over'));
    stopObserving();
    stopWatching();
    await server.close();
  }

  if (outOfTime) {
    if (!options.keepFiles) rmSync(dir, { recursive: true, force: true });
    const seconds = timeoutMs / 1000;
    return {
      scenario: scenario.name,
      path: scenario.path,
      charts: scenario.charts,
      ok: false,
      violations: [
        {
          invariant: 'finishes',
          message:
            `the loop did not finish within ${seconds} s — raise timeoutMs on a loaded machine (checkLoop(loop, scenario, { timeoutMs })); ` +
            'a loop waiting on something that never answers ends here too. Nothing else was judged: a run cut short leaves its session open and its log unfinished',
        },
      ],
      ended,
      requests: server.requests.filter((r) => r.path === '/v1/chat/completions' && !isSummaryRequest((r.json ?? {}) as ChatRequestBody)).length,
      transitions,
      events: readLog(sessionsDir, sessionId),
    };
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
    const unobserved = told === undefined && retried.size === 0 && !observedAnyEngine(transitions);
    if (!unobserved && told !== 'retry') {
      violations.push({
        invariant: 'retry-only-when-told',
        message: `request ${index} overflowed and the engine answered ${told ?? 'nothing (onRequestError was not called)'}, but the loop sent request ${next.index}`,
      });
    } else {
      const [refused, resent] = [
        estimatePromptTokens((agent[position]!.json ?? {}) as ChatRequestBody),
        estimatePromptTokens((next.json ?? {}) as ChatRequestBody),
      ];
      if (resent >= refused)
        violations.push({
          invariant: 'resend-smaller',
          message: `request ${next.index} re-sent the overflowed request ${index} without it shrinking (${resent} tokens, refused at ${refused}): send the messages derived after onRequestError`,
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
      message:
        code === 'store-locked'
          ? 'the loop left the session open: close it (session.close()) when the loop ends'
          : `the session does not reopen: ${String(err)}`,
    });
    events = readLog(sessionsDir, sessionId);
  }
  violations.push(...logViolations(events));
  const sent: AgentRequest[] = agent.map((r) => ({ index: r.index, body: (r.json ?? {}) as ChatRequestBody }));
  violations.push(...duplicateViolations(sent), ...checkpointViolations(sent, marks, events));
  if (resume) violations.push(...resumeViolations(sent, resume, marks, events));
  if (acknowledgedAtCrash) {
    const lost = acknowledgedAtCrash.findIndex((e, i) => JSON.stringify(events[i]) !== JSON.stringify(e));
    if (lost >= 0)
      violations.push({
        invariant: 'no-acknowledged-event-lost',
        message: `event ${lost} (${acknowledgedAtCrash[lost]!.type}), acknowledged before the crash, is not in the log any more`,
      });
  }
  violations.push(
    ...expectationViolations(scenario, ended, events, {
      breakerOpened,
      breakerClosed,
      observed: observedAnyEngine(transitions),
      ...(abortIgnoredBy !== undefined ? { abortIgnoredBy } : {}),
    }),
  );

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

function observedAnyEngine(t: TransitionLog): boolean {
  return t.taken.size > 0;
}

/** What identifies each message the session at `dir` would send now (read as a new process would, changing nothing). */
async function surfaceKeys(dir: string, id: string): Promise<string[]> {
  try {
    const session = await Session.open(new JsonlStore(dir), id);
    const keys = session.deriveMessages().flatMap((m) => messageKeys(m as Parameters<typeof messageKeys>[0]));
    await session.close();
    return keys;
  } catch {
    return [];
  }
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
