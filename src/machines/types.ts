/**
 * Data that flows through the charts: what the invoked services return and what each
 * chart outputs. Plain, serialisable values only — services live outside the charts.
 */
import { enqueueActions, fromPromise, type AnyActorRef, type EventObject, type MachineContext } from 'xstate';
import { XcompactError } from '../errors';
import type { EconomicVerdict, ModelPrices, SessionPace } from '../services/economics';
import type { RangeSelection } from '../services/range';

export type Trigger = 'pressure' | 'overflow' | 'manual';
/** `background`: a summary prepared while the agent works on (SPEC §13); its span must stay as selected. */
export type Mode = 'automatic' | 'manual' | 'background';

/** Stable codes of a failed compaction (SPEC §9 plus the automatic path's own). */
export type CompactionErrorCode =
  | 'busy' // a turn is open, or another compaction holds the lock
  | 'cancelled' // the caller's signal aborted it
  | 'changed' // the surface changed under the transaction
  | 'summary' // the summarizer failed or its summary was unusable (too long, empty, no shrink)
  | 'no-progress' // the checkpoint would free less than minProgressRatio of the span
  | 'commit' // appending the commit events failed
  | 'persistence' // committed in memory, but the store could not make it durable
  | 'still-above-threshold' // pressure stayed at or above the threshold after every attempt
  | 'internal'; // a service threw something unexpected

export interface ErrorInfo {
  code: CompactionErrorCode;
  message: string;
  /** The underlying error's own code (e.g. 'summary-truncated'), when there is one. */
  cause?: string;
}

export interface PressureReading {
  provider: string;
  model: string;
  totalTokens: number;
  threshold: number;
  retainTokens: number;
  contextWindow: number;
  /** Where a background summary starts (SPEC §13); absent when background compaction is off for the route. */
  prepareAt?: number;
  /** The provider reported a prompt above the window: it truncated the request silently (llama.cpp, Ollama). */
  silentOverflow?: { seq: number; promptTokens: number };
  /** The cost model's figures (config `economics`): whether compacting below the threshold, or pruning at it, pays. */
  economics?: PressureEconomics;
  /**
   * Requests the route's server works on at once (the model's `concurrency`; llama.cpp's `-np`):
   * with 1, a background summary waits until the agent is not waiting for a reply. Absent: unbounded.
   */
  concurrency?: number;
}

/** What compacting or pruning now would cost and save (services/economics.ts), for the pressure chart to decide on. */
/** What the cost model decided for a job (in its context and its notifications), with the numbers it decided on. */
export type EconomicDecision = EconomicVerdict & { decision: 'compact-early' | 'prune' | 'skip-prune' };

export interface PressureEconomics {
  prices: ModelPrices;
  pace: SessionPace;
  /** Weighed below the threshold only (at it, compaction is due whatever it costs); absent when nothing can be compacted. */
  compaction?: EconomicVerdict;
  /** Weighed at or above the threshold, when pruning is enabled. */
  prune?: EconomicVerdict;
}

export type ReadingResult =
  | { kind: 'unrouted' }
  | { kind: 'misconfigured'; provider: string; model: string; code: string; message: string }
  | { kind: 'reading'; reading: PressureReading };

/**
 * What a chart asks of range selection. The chart decides the policy; the service applies it.
 * `retain: 'budget'` keeps the model's retained tail verbatim, `'floor'` the smaller tail a
 * compaction the cost model starts early may keep (retainFloorTokens), `'newest-unit'` only the newest
 * unit (overflow recovery, manual compaction). `stackCheckpoints` keeps small earlier
 * checkpoints in place (warm prompt cache); false merges them from the head.
 */
export interface SelectInput {
  purpose: Trigger;
  attempt: number;
  retain: 'budget' | 'floor' | 'newest-unit';
  stackCheckpoints: boolean;
}

/**
 * What a chart asks of the pruner. `protectRecent`: leave the retained tail alone and skip a
 * pass that frees too little to be worth a prompt-cache miss (pressure, an optimisation);
 * false prunes every oversized result, the newest included (overflow, a necessity).
 */
export interface PruneInput {
  trigger: 'pressure' | 'overflow';
  protectRecent: boolean;
}

export interface PruneSummary {
  count: number;
  tokensFreed: number;
  generation: number;
}

export interface SpanCheck {
  lockHeld: boolean;
  /** What the stability check compares against after the summary arrives. */
  snapshot: { generation: number; surfaceLength: number };
}

export interface SummaryOutcome {
  text: string;
  provider?: string;
  model?: string;
  usage?: { promptTokens: number; completionTokens: number; cachedTokens?: number };
  requests: number;
}

export interface Verdict {
  stable: boolean;
  spanTokens: number;
  checkpointTokens: number;
  /** Tokens the commit must free at least (minProgressRatio × spanTokens; 0 for manual). */
  requiredTokens: number;
}

/** What opening a bracket (appending compaction/start) gives the transaction. */
export interface OpenedBracket {
  startSeq: number;
  /** Pressure just before the bracket opened. */
  tokensBefore: number;
  /** Clock time the bracket opened (ms). */
  startedAt: number;
}

export interface CommitRecord {
  startSeq: number;
  summarySeq: number;
  checkpointSeq: number;
  endSeq: number;
  shadowedCount: number;
  spanTokens: number;
  checkpointTokens: number;
  tokensBefore: number;
  tokensAfter: number;
  durationMs: number;
}

/** A committed compaction, as the engine reports it. */
export interface CompactionRecord {
  trigger: Trigger;
  checkpointSeq: number;
  /** Surface nodes the checkpoint replaced. */
  shadowedNodes: number;
  spanTokens: number;
  checkpointTokens: number;
  tokensBefore: number;
  tokensAfter: number;
  durationMs: number;
  summary: string;
  summarizer: { provider?: string; model?: string; requests: number; usage?: SummaryOutcome['usage'] };
}

/** The record of a committed transaction: plain data built from what its services returned. */
export function compactionRecord(trigger: Trigger, commit: CommitRecord, summary: SummaryOutcome): CompactionRecord {
  return {
    trigger,
    checkpointSeq: commit.checkpointSeq,
    shadowedNodes: commit.shadowedCount,
    spanTokens: commit.spanTokens,
    checkpointTokens: commit.checkpointTokens,
    tokensBefore: commit.tokensBefore,
    tokensAfter: commit.tokensAfter,
    durationMs: commit.durationMs,
    summary: summary.text,
    summarizer: {
      ...(summary.provider ? { provider: summary.provider } : {}),
      ...(summary.model ? { model: summary.model } : {}),
      requests: summary.requests,
      ...(summary.usage ? { usage: summary.usage } : {}),
    },
  };
}

export interface TransactionInput {
  trigger: Trigger;
  mode: Mode;
  range: RangeSelection;
  turn: number | null;
  focus?: string;
  /** The cost model's decision that started it (pressure), announced with compaction.started. */
  economics?: EconomicDecision;
}

export type TransactionOutput =
  | { status: 'committed'; trigger: Trigger; range: RangeSelection; commit: CommitRecord; summary: SummaryOutcome }
  | { status: 'failed'; trigger: Trigger; range: RangeSelection; error: ErrorInfo; startSeq: number | undefined };

export interface LockProbe {
  held: boolean;
  generation: number;
}

/** The done/error event of an invoked actor, as guards and actions see it. */
export function outputOf<T>(event: EventObject): T {
  return (event as EventObject & { output: T }).output;
}

export function errorOf(event: EventObject): unknown {
  return (event as EventObject & { error: unknown }).error;
}

/** Stand-in for a service the host must provide; charts stay inspectable without them. */
export function notProvided<TOutput, TInput>(name: string) {
  return fromPromise<TOutput, TInput>(async () => {
    throw new XcompactError('service-not-provided', `the '${name}' service was not provided to this chart: wire it with machine.provide({ actors })`);
  });
}

/** Turns whatever a service threw into the chart's error record. */
export function toErrorInfo(error: unknown, fallback: CompactionErrorCode): ErrorInfo {
  if (error && typeof error === 'object') {
    const e = error as { code?: unknown; message?: unknown; chartCode?: unknown; cause?: unknown };
    const code = typeof e.chartCode === 'string' ? (e.chartCode as CompactionErrorCode) : fallback;
    const info: ErrorInfo = { code, message: typeof e.message === 'string' ? e.message : String(error) };
    if (typeof e.code === 'string') info.cause = e.code;
    return info;
  }
  return { code: fallback, message: String(error) };
}

/**
 * What the charts announce. The charts emit these (`emit`) and send each to the engine chart
 * they run under (an `xcompact.notify` event), which emits it to its own listeners and
 * sends it on to a host machine that invoked it.
 */
export type ChartNotification =
  /** `background: true`: prepared while the agent works on (SPEC §13). */
  | {
      type: 'compaction.started';
      trigger: Trigger;
      startSeq: number;
      nodes: number;
      spanTokens: number;
      tokensBefore: number;
      background?: true;
      /** The cost model's decision and numbers, when it (not the threshold) started this compaction. */
      economics?: EconomicDecision;
    }
  | ({ type: 'compaction.committed'; background?: true } & CompactionRecord)
  /** `startedAt`: when the bracket opened (clock ms), undefined when the transaction failed before. */
  | { type: 'compaction.failed'; trigger: Trigger; error: ErrorInfo; startedAt: number | undefined; background?: true }
  | { type: 'compaction.skipped'; trigger: Trigger; reason: string }
  | { type: 'pruned'; trigger: Trigger; count: number; tokensFreed: number; economics?: EconomicDecision }
  /** Pruning threw (a store that refused its write, a custom pruner's bug): the chart went on to compaction without it. */
  | { type: 'prune.failed'; trigger: Trigger; error: ErrorInfo }
  /** The provider reported a prompt larger than the window: it truncated the request silently (llama.cpp, Ollama). */
  | { type: 'overflow.silent'; seq: number; promptTokens: number; contextWindow: number };

export const NOTIFY = 'xcompact.notify';
export type NotifyEvent = { type: typeof NOTIFY; notification: ChartNotification };

/** The engine chart this actor runs under (its nearest `engine` ancestor), if any. */
export function engineAncestor(self: AnyActorRef): AnyActorRef | undefined {
  for (let a = self._parent; a; a = a._parent) {
    if ((a.getSnapshot() as { machine?: { id?: string } }).machine?.id === 'engine') return a;
  }
  return undefined;
}

/**
 * Inside an `enqueueActions`: emits a notification and hands it to the engine chart above (a
 * chart run on its own only emits).
 */
export function tell(
  enqueue: { emit: (e: never) => void; sendTo: (to: AnyActorRef, e: NotifyEvent) => void },
  self: AnyActorRef,
  notification: ChartNotification,
): void {
  enqueue.emit(notification as never);
  const engine = engineAncestor(self);
  if (engine) enqueue.sendTo(engine, { type: NOTIFY, notification });
}

/** The announcement of a prune that threw (an optimisation that failed: the chart goes on to compaction). */
export function announcePruneFailure<TContext extends MachineContext, TEvent extends EventObject>(trigger: Trigger) {
  return announceAction<TContext, TEvent>(({ event }) => ({ type: 'prune.failed', trigger, error: toErrorInfo(errorOf(event), 'internal') }));
}

/**
 * An action that announces what `make` returns (nothing when it returns undefined). Built
 * outside `setup()` so its types do not depend on the chart's other actions.
 */
export function announceAction<TContext extends MachineContext, TEvent extends EventObject>(
  make: (args: { context: TContext; event: TEvent }) => ChartNotification | undefined,
) {
  return enqueueActions<TContext, TEvent, undefined, TEvent, never, never, never, never, ChartNotification>(({ context, event, enqueue, self }) => {
    const n = make({ context, event });
    if (n) tell(enqueue as never, self, n);
  });
}
