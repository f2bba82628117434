/**
 * The pruner's contract (pruner.ts plans a pass, apply.ts writes it): its settings and the
 * pricing it is given, the plan and the result of a pass, and the errors a pass throws.
 */
import { XcompactError } from '../../errors';
import type { EventData } from '../../session/events';
import type { ArgumentPruneTarget } from './arguments';

export interface PruneSettings {
  /** A text block with more code points than this is oversized. */
  thresholdChars: number;
  /** Code points kept from the start of an oversized block. */
  headChars: number;
  /** Code points kept from the end of an oversized block. */
  tailChars: number;
  /** The newest nodes inside this token budget (counted from the surface tail) are never pruned. */
  protectRecentTokens: number;
  /** A pass that would free fewer tokens than this does nothing. */
  minReclaimTokens: number;
  /** Tool names never pruned (matched against the result's toolName, else the call's name). */
  neverPrune: readonly string[];
  /** Recall is on: each marker names the handle (`pr-N`) the recall tool brings the original back by. */
  recall?: boolean;
}

/** Exact per-node token prices (the token meter provides them, cached). */
export interface Pricing {
  /** Price of a current surface node. */
  priceOf(seq: number): number;
  /** Price of a node that is not appended yet (a pruned result, or an assistant message with pruned arguments). */
  priceEvent(event: { type: 'tool/result'; data: EventData<'tool/result'> } | { type: 'assistant/message'; data: EventData<'assistant/message'> }): number;
  /** Provider tokens per priced token (the meter's calibration): the budgets are in the provider's tokens. Absent = 1. */
  readonly providerRatio?: number;
}

export type ToolResultContent = EventData<'tool/result'>['content'];

export interface PruneTarget {
  /** The tool/result node to replace. */
  readonly seq: number;
  readonly callId: string;
  /** The result's toolName, else the name of the call it answers. */
  readonly toolName?: string;
  /** The content the plan was made from: applyPrune checks the node still has exactly this. */
  readonly contentBefore: ToolResultContent;
  /** The pruned content. */
  readonly content: ToolResultContent;
  readonly charsBefore: number;
  readonly charsAfter: number;
  readonly tokensBefore: number;
  readonly tokensAfter: number;
}

/**
 * Why a pass writes nothing: `nothing-oversized` — no oversized result that may be pruned
 * (there may be oversized ones that are protected or in neverPrune: see `kept`);
 * `below-min-reclaim` — the eligible ones would free fewer than minReclaimTokens (or none).
 */
export type PruneSkip = 'nothing-oversized' | 'below-min-reclaim';

/** Why an oversized result is left as it is. */
export type PruneKeepReason = 'protected-recent' | 'never-prune' | 'no-gain';

export interface PrunePlan {
  /** What applyPrune will rewrite, in surface order (oldest first). Empty when skipped. */
  readonly targets: readonly PruneTarget[];
  /** Assistant messages whose oversized tool-call arguments applyPrune will cut (docs/spec.md#15-pruning-what-the-agent-wrote). Empty when skipped. */
  readonly argumentTargets: readonly ArgumentPruneTarget[];
  /** Tokens the pass frees (0 when skipped). */
  readonly tokensFreed: number;
  /** Tokens (priced) the eligible oversized results would free: × providerRatio, tells how far a skipped pass was from minReclaimTokens. */
  readonly reclaimableTokens: number;
  /** Oversized results (and calls, by their assistant message's seq) left alone, and why. */
  readonly kept: ReadonlyArray<{ readonly seq: number; readonly callId: string; readonly reason: PruneKeepReason }>;
  readonly skipped?: PruneSkip;
}

export interface PruneResult {
  pruned: Array<{
    /** The original node. */
    seq: number;
    /** A tool result's content, or an assistant message's tool-call arguments. */
    kind: 'result' | 'arguments';
    replacementSeq: number;
    callId: string;
    toolName?: string;
    charsBefore: number;
    charsAfter: number;
    tokensBefore: number;
    tokensAfter: number;
  }>;
  tokensFreed: number;
  skipped?: PruneSkip;
}

// ---------------------------------------------------------------------------
// Errors

/** The pricing returned something that is not a token count. */
export class PrunePricingError extends XcompactError {
  constructor(message: string) {
    super('prune-pricing', message);
  }
}

/** The session changed since the plan was made (or the plan is not from this session); nothing was written. */
export class PrunePlanStaleError extends XcompactError {
  readonly seq: number;

  constructor(seq: number, message: string) {
    super('prune-plan-stale', message);
    this.seq = seq;
  }
}
