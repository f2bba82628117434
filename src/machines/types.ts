/**
 * Data that flows through the charts: what the invoked services return and what each
 * chart outputs. Plain, serialisable values only — services live outside the charts.
 */
import { fromPromise, type EventObject } from 'xstate';
import { XcompactError } from '../errors';
import type { RangeSelection } from '../services/range';

export type Trigger = 'pressure' | 'overflow' | 'manual';
export type Mode = 'automatic' | 'manual';

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
}

export type ReadingResult =
  | { kind: 'unrouted' }
  | { kind: 'misconfigured'; provider: string; model: string; code: string; message: string }
  | { kind: 'reading'; reading: PressureReading };

/**
 * What a chart asks of range selection. The chart decides the policy; the service applies it.
 * `retain: 'budget'` keeps the model's retained tail verbatim, `'newest-unit'` only the newest
 * unit (overflow recovery, manual compaction). `stackCheckpoints` keeps small earlier
 * checkpoints in place (warm prompt cache); false merges them from the head.
 */
export interface SelectInput {
  purpose: Trigger;
  attempt: number;
  retain: 'budget' | 'newest-unit';
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

export interface CommitRecord {
  startSeq: number;
  summarySeq: number;
  checkpointSeq: number;
  endSeq: number;
  shadowedCount: number;
  spanTokens: number;
  checkpointTokens: number;
}

export interface TransactionInput {
  trigger: Trigger;
  mode: Mode;
  range: RangeSelection;
  turn: number | null;
  focus?: string;
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
