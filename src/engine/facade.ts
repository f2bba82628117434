/**
 * createCompactionEngine(): the promise facade an agent loop calls.
 *
 * It runs the machine `buildCompactionMachine` wires (the charts of src/machines/ with the
 * services of src/services/ provided) and turns calls into events, and the events the machine
 * emits back into promises and listener calls. It decides nothing about the lifecycle.
 */
import { announceEngine } from './observers';
import { createActor, type Actor, type InspectionEvent, type Observer } from 'xstate';
import { buildCompactionMachine, type CompactionMachineOptions } from './assembly';
import { XcompactError } from '../errors';
import type { CompactionEmitted, EngineEmitted, EngineRequest, compactionMachine, SettledResult } from '../machines/compaction';
import { BACKGROUND_SYSTEM_ID } from '../machines/background';
import type { BackgroundReport } from '../machines/gate';
import type { DeclineReason } from '../machines/overflow';
import type { PressureOutput, PressureStatus } from '../machines/pressure';
import { compactionRecord, type ChartNotification, type CompactionRecord, type ErrorInfo, type PressureReading, type Trigger } from '../machines/types';
import { CompactionError, routeBudget } from '../services/core';
import { BudgetError, type CompactionConfig } from '../services/config';
import type { UnclosedBracket } from '../services/transaction';
import { admitRequest, measureFigures, type EngineMeasurement, type RequestCore } from '../services/pressure';
import type { FitOutput } from '../machines/fit';
import type { Session } from '../session/session';
import { classifyRequestError, type RequestErrorClass } from '../services/overflow';

export { CompactionError } from '../services/core';
export type { EngineServices } from './actors';
export type { CompactionRecord } from '../machines/types';

export interface CompactionEngineOptions extends CompactionMachineOptions {
  /** Passed to the root actor: `@statelyai/inspect`'s `inspect`, or any inspection observer. */
  inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /** XState clock for the breaker's cool-down timer (tests pass a SimulatedClock). */
  clock?: { setTimeout(fn: (...args: unknown[]) => void, timeout: number): unknown; clearTimeout(id: unknown): void };
  /**
   * A model with no known context window is never compacted. By default the first step routed
   * to one makes `afterStep` reject with a `BudgetError` (`no-context-capacity`) that names the
   * `models` entry to add; `false` keeps the old behaviour: a `capacity.missing` notification,
   * and steps answered `skipped` (overflow recovery still works).
   */
  requireCapacity?: boolean;
}

/**
 * `preparing`: a background summary is being prepared and the agent goes on (docs/spec.md#13-background-compaction);
 * `committed`: a background summary was committed since the previous step, or by this call
 * (a summary held until the threshold: the call waited for its commit, not for a model);
 * `waited`: this call waited for a background summary (the threshold came first).
 */
export type AfterStepStatus = Exclude<PressureStatus, 'preparing'> | 'auto-off' | 'paused' | 'busy' | 'preparing' | 'committed' | 'waited';

export interface AfterStepResult {
  status: AfterStepStatus;
  before: PressureReading | undefined;
  after: PressureReading | undefined;
  pruned: PressureOutput['prune'];
  /** Committed by this call, background summaries that landed since the previous call first. */
  compactions: CompactionRecord[];
  error: CompactionError | undefined;
  /** Background mode: how long this call waited for a background summary, or a held one's commit (ms; 0 when it did not). */
  waitedMs: number;
  /** Background runs that failed since the previous call (the breaker counted them). */
  backgroundFailures: CompactionError[];
  /** `beforeRequest` only: the request was over its window after compaction, and its largest tool results were cut to fit. */
  cut?: { count: number; tokensFreed: number };
}

export type RequestErrorAction =
  | { kind: 'retry'; classification: RequestErrorClass }
  | {
      kind: 'fail';
      /** The request's own error, as given. */
      error: unknown;
      reason: DeclineReason | 'busy';
      classification: RequestErrorClass | undefined;
      /** Why the recovery's compaction failed (reason `summary-failed`, `busy`), when one ran. */
      compactionError?: CompactionError;
    };

/** What `engine.on` listeners receive: the machine's notifications, errors as CompactionError. */
export type EngineNotification =
  | Exclude<ChartNotification, { type: 'compaction.failed' }>
  | { type: 'compaction.failed'; trigger: Trigger; error: CompactionError; durationMs: number; background?: true }
  | Exclude<EngineEmitted, { type: 'request.settled' }>
  /**
   * A compaction abandoned mid-way (the engine stopped under it, its chart failed) could not be
   * closed: `stage: 'append'` — the session refused its compaction/end, so the lock stays until
   * `session.recover()`; `stage: 'flush'` — written, but the store failed to persist it.
   */
  | ({ type: 'compaction.unclosed' } & UnclosedBracket);

type Listener = (event: EngineNotification) => void;

export interface CompactionEngine {
  /** Run after a step's facts are durable, before `step/end` (also mid tool loop). Never throws for a failed compaction. */
  afterStep(options?: { signal?: AbortSignal }): Promise<AfterStepResult>;
  /**
   * Run just before a request is sent, once its `request/header` is recorded (its model, tools
   * and `maxTokens`): the first request after a reopen, after a new user message, after tool
   * results, after an overflow recovery. The pressure check of `afterStep` (prune, compact),
   * then the fit chart judges the request against the window: one still over its message budget
   * has its largest tool results cut (head and tail kept, recallable, recorded as prunes: `cut`);
   * it rejects with a `BudgetError` `request-over-window` (nothing sent) only when no cut brings
   * it under — what is left is the system prompt, the tools and the newest messages. A request
   * the engine cannot route (no header, or a model with no known window and
   * `requireCapacity: false`) is not judged.
   */
  beforeRequest(options?: { signal?: AbortSignal }): Promise<AfterStepResult>;
  /**
   * Before a call records anything: a `BudgetError` (`request-over-window`, or `no-message-budget`)
   * when what no compaction, prune or cut makes smaller — the system prompt, the tool definitions
   * and the newest user message — leaves no room for the output cap in the window; undefined
   * otherwise (or when the window is unknown). The faces refuse such a call before it writes.
   */
  admits(request: RequestCore): BudgetError | undefined;
  /** Call with a request's error: `retry` means the surface now fits better and the request should be rebuilt and sent again. */
  onRequestError(error: unknown, options?: { signal?: AbortSignal }): Promise<RequestErrorAction>;
  /** Manual `/compact`: only between turns. Resolves null when there is nothing to compact; throws CompactionError. */
  compactNow(options?: { signal?: AbortSignal; focus?: string }): Promise<CompactionRecord | null>;
  /** Current pressure figures (plain data). */
  measure(): EngineMeasurement;
  /** Subscribe to what the engine does; returns an unsubscribe function. */
  on(listener: Listener): () => void;
  readonly config: CompactionConfig;
  readonly actor: Actor<typeof compactionMachine>;
  /**
   * A graceful stop (the machine's `shutdown` event): a running compaction is cancelled (its
   * summary request aborted) and its bracket closed with `compaction/end {cancelled}`; pending
   * calls reject with `engine-stopped`. (Stopping `engine.actor` directly is what a dying
   * process does: the orphan lock stays until `session.recover()`.)
   */
  stop(): void;
}

const reasonOf = (signal: AbortSignal | undefined): string | undefined =>
  signal?.aborted ? String(signal.reason instanceof Error ? signal.reason.message : (signal.reason ?? 'aborted')) : undefined;

export function createCompactionEngine(options: CompactionEngineOptions): CompactionEngine {
  const built = buildCompactionMachine(options); // checks the options first
  const { session } = options;
  const { config, deps } = built;
  const now = deps.now;
  const listeners = new Set<Listener>();
  // Only the error this failure came from: its code is the one the chart recorded.
  const compactionError = (info: ErrorInfo): CompactionError => {
    const cause = built.lastSummaryError();
    return new CompactionError(info, info.cause !== undefined && (cause as { code?: unknown } | undefined)?.code === info.cause ? cause : undefined);
  };
  const toNotification = (e: CompactionEmitted): EngineNotification | undefined => {
    if (e.type === 'request.settled') return undefined;
    if (e.type !== 'compaction.failed') return e;
    return {
      type: e.type,
      trigger: e.trigger,
      error: compactionError(e.error),
      durationMs: e.startedAt === undefined ? 0 : now() - e.startedAt,
      ...(e.background ? { background: true as const } : {}),
    };
  };

  const actor = createActor(built.machine, {
    input: undefined, // the config is baked into the machine
    ...(options.inspect ? { inspect: options.inspect } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
  });
  const notify = (n: EngineNotification) => {
    for (const l of listeners) {
      try {
        l(n);
      } catch (err) {
        console.error('xcompact: an engine listener threw', err);
      }
    }
  };
  actor.on('*', (e) => {
    const n = toNotification(e);
    if (n) notify(n);
  });
  // The chart warns once per model (capacity.missing); unless the caller opted out, that warning
  // is the rejection of the step that raised it.
  let capacityMissing: Extract<EngineEmitted, { type: 'capacity.missing' }> | undefined;
  if (options.requireCapacity !== false) actor.on('capacity.missing', (e) => (capacityMissing = e));
  // Told directly, not through the actor: it comes when the engine stops (or after, from the store).
  built.onUnclosed((u) => notify({ type: 'compaction.unclosed', ...u }));
  // However the actor ends (engine.stop(), a host stopping engine.actor), no call is left hanging.
  const inFlight = new Set<(err: Error) => void>();
  const rejectInFlight = (why: string) => {
    for (const reject of [...inFlight]) reject(new XcompactError('engine-stopped', `the compaction engine ${why}`));
  };
  // One server slot (machines/background.ts): a reply recorded, or a turn ended, means the agent
  // no longer waits for the model, so a background summary waiting for the slot may start.
  const unsubscribeSlot = options.session.subscribe((e) => {
    if ((e.type === 'assistant/message' && e.surfaceOp === 'append') || e.type === 'turn/end')
      actor.system.get(BACKGROUND_SYSTEM_ID)?.send({ type: 'agent.working' });
  });
  actor.subscribe({
    complete: () => {
      unsubscribeSlot();
      built.dispose();
      rejectInFlight('was stopped while this call was running');
    },
    error: (err) => rejectInFlight(`failed (${String(err)})`),
  });
  actor.start();

  let nextId = 0;
  const request = (make: (id: string) => EngineRequest, signal: AbortSignal | undefined): Promise<SettledResult> =>
    new Promise((resolve, reject) => {
      const snap = actor.getSnapshot();
      if (snap.status !== 'active') {
        const why = snap.status === 'error' ? `failed (${String(snap.error)})` : 'was stopped';
        reject(new XcompactError('engine-stopped', `the compaction engine ${why}; create a new one`));
        return;
      }
      const id = `r${++nextId}`;
      const onAbort = () => actor.send({ type: 'cancel', id, ...(reasonOf(signal) !== undefined ? { reason: reasonOf(signal)! } : {}) });
      const done = () => {
        sub.unsubscribe();
        signal?.removeEventListener('abort', onAbort);
        inFlight.delete(stopped);
      };
      const stopped = (err: Error) => {
        done();
        reject(err);
      };
      const sub = actor.on('request.settled', (e) => {
        if (e.id !== id) return;
        done();
        resolve(e.result);
      });
      inFlight.add(stopped);
      signal?.addEventListener('abort', onAbort, { once: true });
      actor.send(make(id));
    });

  const records = (out: PressureOutput): CompactionRecord[] =>
    out.transactions.flatMap((t) => (t.status === 'committed' ? [compactionRecord(t.trigger, t.commit, t.summary)] : []));
  const idle = { before: undefined, after: undefined, pruned: undefined, compactions: [], error: undefined, waitedMs: 0, backgroundFailures: [] };
  const statusOf = (out: PressureOutput, report: BackgroundReport | undefined): AfterStepStatus => {
    if (!report) return out.status;
    // Waiting for a held summary's commit (three appends) is not waiting for a model: `committed`.
    const waitedOn = report.outcomes.filter((o) => o.waited);
    const waitedForSummary = report.waited && !(waitedOn.length > 0 && waitedOn.every((o) => o.held && o.status === 'committed'));
    if (waitedForSummary && (out.status === 'below' || out.status === 'relieved-by-pruning' || out.status === 'compacted')) return 'waited';
    if (out.status === 'below' && report.outcomes.some((o) => o.status === 'committed')) return 'committed';
    return out.status;
  };

  const engine: CompactionEngine = {
    config,
    actor,
    on(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stop() {
      if (actor.getSnapshot().status === 'active') actor.send({ type: 'shutdown' });
      actor.stop();
    },
    async afterStep(given = {}) {
      // `null` options are no options, as `undefined` is.
      const opts = given ?? {};
      const startedAt = now();
      await built.prefetch(opts.signal);
      capacityMissing = undefined;
      const result = await request((id) => ({ type: 'step.completed', id, turn: session.openTurn, aborted: opts.signal?.aborted ?? false }), opts.signal);
      if (capacityMissing) {
        const { provider, model, message } = capacityMissing;
        capacityMissing = undefined;
        throw new BudgetError(
          'no-context-capacity',
          provider,
          model,
          `${message}. Without a window this model is never compacted; to run so anyway (overflow recovery only), pass requireCapacity: false`,
        );
      }
      if (result.kind === 'pressure') {
        const out = result.output;
        const report = (out as PressureOutput & { background?: BackgroundReport }).background;
        const landed = (report?.outcomes ?? []).flatMap((o) => (o.record ? [o.record] : []));
        return {
          status: statusOf(out, report),
          before: out.before,
          after: out.after,
          pruned: out.prune,
          compactions: [...landed, ...records(out)],
          error: out.error ? compactionError(out.error) : undefined,
          waitedMs: report?.waited ? now() - startedAt : 0,
          backgroundFailures: (report?.outcomes ?? []).flatMap((o) => (o.status === 'failed' && o.error ? [new CompactionError(o.error)] : [])),
        };
      }
      if (result.kind === 'error') return { ...idle, status: 'failed', error: new CompactionError(result.error) };
      return { ...idle, status: result.kind === 'busy' ? 'busy' : result.kind === 'auto-off' ? 'auto-off' : 'paused' };
    },
    async beforeRequest(given = {}) {
      const opts = given ?? {};
      const result = await engine.afterStep(opts);
      // The fit chart judges the request against its window, and cuts what it must (machines/fit.ts).
      const settled = await request((id) => ({ type: 'request.ready', id }), opts.signal);
      if (settled.kind !== 'fit') return result;
      const fit = settled.output;
      if (fit.status === 'over') throw overWindow(session, fit, result, options.pruner === false || !config.prune.enabled);
      return fit.cut ? { ...result, cut: fit.cut } : result;
    },
    async onRequestError(error, given = {}) {
      // `null` options are no options, as `undefined` is.
      const opts = given ?? {};
      const lastAssistantSeq = session.latestReply?.seq ?? -1;
      await built.prefetch(opts.signal);
      const aborted = opts.signal?.aborted ?? false;
      // Classified here (work), decided in the gate (a job that cannot recover anything waits for no background summary).
      const overflow = ((): boolean | undefined => {
        try {
          return classifyRequestError(error).kind === 'context-overflow';
        } catch {
          return undefined; // an error that cannot be read: the overflow chart's classify reports it
        }
      })();
      const result = await request(
        (id) => ({ type: 'request.failed', id, error, turn: session.openTurn, aborted, lastAssistantSeq, ...(overflow === undefined ? {} : { overflow }) }),
        opts.signal,
      );
      if (result.kind === 'error') return { kind: 'fail', error, reason: 'internal', classification: undefined };
      if (result.kind !== 'overflow') return { kind: 'fail', error, reason: 'busy', classification: undefined };
      const out = result.output;
      if (out.action === 'retry') return { kind: 'retry', classification: out.classification };
      const tx = out.transaction;
      return {
        kind: 'fail',
        error,
        reason: out.reason,
        classification: out.classification,
        ...(tx?.status === 'failed' ? { compactionError: compactionError(tx.error) } : {}),
      };
    },
    async compactNow(given = {}) {
      // `null` options are no options, as `undefined` is.
      const opts = given ?? {};
      const signal = opts.signal;
      const result = await request(
        (id) => ({ type: 'compact.requested', id, aborted: signal?.aborted ?? false, abortReason: reasonOf(signal), focus: opts.focus }),
        signal,
      );
      if (result.kind === 'busy') throw new CompactionError({ code: 'busy', message: `the engine is running ${result.running} compaction` });
      if (result.kind === 'error') throw new CompactionError(result.error);
      if (result.kind !== 'manual') throw new CompactionError({ code: 'internal', message: `unexpected result ${result.kind}` });
      const out = result.output;
      if (out.status === 'nothing') return null;
      if (out.status === 'failed') throw compactionError(out.error);
      return compactionRecord(out.transaction.trigger, out.transaction.commit, out.transaction.summary);
    },
    measure: () => measureFigures(deps),
    admits: (core) => admitRequest(deps, core),
  };
  announceEngine(engine, options);
  return engine;
}

/** The refusal of a request no cut brings under its window: what it measures, and what the caller can change. */
function overWindow(session: Session, fit: FitOutput, result: AfterStepResult, cutOff: boolean): BudgetError {
  const header = session.latestHeader!.data;
  const r = fit.after ?? fit.before;
  const figures = r
    ? `the request measures ${r.totalTokens} tokens, and with its output cap ${r.outputReservation} it does not fit the window ${r.window} (at most ${r.messageBudget} for the prompt)`
    : 'the request could not be measured against its window';
  const why = fit.error
    ? ` (cutting its tool results failed: ${fit.error.message})`
    : fit.cut
      ? ` even after its ${fit.cut.count} largest tool result(s) were cut (${fit.cut.tokensFreed} tokens freed; the whole texts stay recallable)`
      : result.error
        ? ` (the compaction failed: ${result.error.message})`
        : '';
  return new BudgetError(
    'request-over-window',
    header.provider,
    header.model,
    `${header.provider}/${header.model}: ${figures}${why}; nothing was sent. What is left is the system prompt, the tool definitions and the newest messages: ` +
      `shorten the system prompt or the newest user message, send fewer tool definitions, or lower max_tokens` +
      (cutOff ? '; pruning is off (prune.enabled: false), so no tool result was cut: turn it on to let the newest results be cut to fit' : ''),
  );
}
