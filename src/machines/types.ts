/**
 * Data that flows through the charts: what the invoked services return and what each
 * chart outputs. Plain, serialisable values only — services live outside the charts.
 */
import { enqueueActions, fromPromise, type AnyActorRef, type EventObject, type MachineContext } from 'xstate';
import { XcompactError } from '../errors';
import type { RangeSelection } from '../services/selection';

export type {
  Trigger,
  Mode,
  CompactionErrorCode,
  ErrorInfo,
  SelectInput,
  PruneInput,
  PruneSummary,
  SpanCheck,
  SummaryOutcome,
  Verdict,
  OpenedBracket,
  CommitRecord,
  TruncationReason,
} from '../services/core';
export type { PressureReading, ReadingResult } from '../services/pressure';
export type { PressureEconomics, EconomicDecision } from '../services/economics';
import type { Trigger, Mode, CompactionErrorCode, ErrorInfo, SummaryOutcome, CommitRecord, TruncationReason } from '../services/core';
import type { PressureReading } from '../services/pressure';
import type { EconomicDecision } from '../services/economics';

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
  /** A truncation checkpoint (the model-free last resort) and why no summary was: `summary` is then the ledger alone. */
  truncation?: { reason: TruncationReason };
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
    ...(summary.truncation ? { truncation: { reason: summary.truncation.reason } } : {}),
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
  /** A truncation transaction (the model-free last resort): no summary is asked for, the checkpoint is the ledger alone. */
  truncation?: TruncationReason;
}

/** The transaction committed a truncation checkpoint in place of a summary. */
export function truncated(t: TransactionOutput): boolean {
  return t.status === 'committed' && t.summary.truncation !== undefined;
}

/**
 * Why a failed transaction leaves the model-free last resort to try: its summary failed or was
 * unusable (an error, a cut reply, its deadline: `summary`; it would not free enough: `no-progress`).
 * Undefined when a truncation would not help (busy, cancelled, the surface changed, a store that failed).
 */
export function truncationAfter(t: TransactionOutput): TruncationReason | undefined {
  if (t.status !== 'failed' || t.startSeq === undefined) return undefined;
  if (t.error.code === 'no-progress' || t.error.cause === 'summary-no-shrink') return 'summary-over-cap';
  if (t.error.code === 'summary') return 'summary-failed';
  return undefined;
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
  /** `background: true`: prepared while the agent works on (docs/spec.md#13-background-compaction). */
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
  | { type: 'overflow.silent'; seq: number; promptTokens: number; contextWindow: number }
  /** A request still over its message budget by `over` tokens after compaction and pruning: its largest tool results were cut to fit (fit.ts). */
  | { type: 'fit.cut'; count: number; tokensFreed: number; over: number };

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
    if (n) tell(enqueue, self, n);
  });
}

/**
 * A summary past its deadline (config `summaryTimeoutMs`, per model policy too): the chart
 * leaves the summarizing state, which aborts the request; the bracket is closed with this error.
 */
export const SUMMARY_TIMEOUT_ERROR: ErrorInfo = {
  code: 'summary',
  cause: 'summary-timeout',
  message: 'the summary did not finish within its deadline (summaryTimeoutMs): the request was abandoned and nothing was committed',
};

/** Placeholder for the `summaryDeadline` delay: the engine provides the route's summaryTimeoutMs. */
export const DEFAULT_SUMMARY_DEADLINE_MS = 600_000;
