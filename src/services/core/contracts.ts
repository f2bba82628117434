/**
 * The data the charts and the services exchange: what a chart asks of a service (selection,
 * pruning) and what the transaction's steps hand back. Defined here, below both, so services
 * never import the charts; src/machines/types.ts re-exports them for the charts.
 */

export type Trigger = 'pressure' | 'overflow' | 'manual';
/** `background`: a summary prepared while the agent works on (docs/spec.md#13-background-compaction); its span must stay as selected. */
export type Mode = 'automatic' | 'manual' | 'background';

/** Stable codes of a failed compaction (docs/spec.md#9-manual-compaction-compact plus the automatic path's own). */
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

/**
 * What a chart asks of range selection. The chart decides the policy; the service applies it.
 * `retain: 'budget'` keeps the model's retained tail verbatim, `'ahead'` (a background summary
 * started below the threshold) that tail less the growth still to come before the threshold, so
 * the tail at the commit is the budget's, `'floor'` the smaller tail a
 * compaction the cost model starts early may keep (retainFloorTokens), `'newest-unit'` only the newest
 * unit (overflow recovery, manual compaction). `stackCheckpoints` keeps small earlier
 * checkpoints in place (warm prompt cache); false merges them from the head.
 */
export interface SelectInput {
  purpose: Trigger;
  attempt: number;
  retain: 'budget' | 'floor' | 'ahead' | 'newest-unit';
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

/**
 * Why a truncation checkpoint (the model-free last resort) stood in for a summary: the circuit
 * breaker is open (no summary was asked for), the summary failed (an error, a cut reply, its
 * deadline), or it came back over its cap (it would not shrink the span enough).
 */
export type TruncationReason = 'breaker-open' | 'summary-failed' | 'summary-over-cap';

export interface SummaryOutcome {
  text: string;
  provider?: string;
  model?: string;
  usage?: { promptTokens: number; completionTokens: number; cachedTokens?: number };
  requests: number;
  /** A truncation checkpoint: the ledger alone, no model prose (no model was asked: `requests` is 0). */
  truncation?: { reason: TruncationReason };
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
