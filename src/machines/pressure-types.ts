/**
 * The pressure chart's contract (pressure.ts): what it is given (input, and what its measure
 * actor is asked), what it answers (status and output, also for a step on which it did not
 * run), and the context and events of the chart itself.
 */
import type { RangeSelection } from '../services/selection';
import type { EconomicDecision, ErrorInfo, PressureReading, PruneSummary, ReadingResult, TransactionOutput } from './types';

export interface PressureInput {
  turn: number | null;
  /** The caller's signal was already aborted when the step was reported. */
  aborted: boolean;
  pruneEnabled: boolean;
  /** 1 + compactionRetries (the routed model's policy). */
  maxAttempts: number;
  /** The newest usage seq a silent overflow was already reported for (-1: none). */
  silentSeenSeq: number;
  /**
   * A reading the caller took with nothing appended or committed since (the background gate's):
   * decided on as it is, so a step is measured once.
   */
  given?: ReadingResult;
}

/** What the measure actor is asked: the phase, and a reading already taken for it (returned as it is). */
export interface MeasureInput {
  phase: 'initial' | 'after-prune' | 'after-compaction';
  given?: ReadingResult;
}

export type PressureStatus =
  | 'skipped' // no routed model yet, or the model's budget cannot be resolved
  | 'below' // under the threshold: nothing to do
  | 'relieved-by-pruning' // pruning alone brought pressure under the threshold
  | 'compacted' // one or more checkpoints brought it under
  | 'stuck' // above the threshold with nothing compactable (one indivisible unit)
  | 'failed' // a transaction failed, or pressure stayed above after every attempt
  | 'cancelled'
  /** Background mode (gate.ts): a summary is being prepared below the threshold; this chart did not run. */
  | 'preparing';

export interface PressureOutput {
  status: PressureStatus;
  before: PressureReading | undefined;
  after: PressureReading | undefined;
  skipped: Extract<ReadingResult, { kind: 'misconfigured' }> | undefined;
  prune: PruneSummary | undefined;
  transactions: TransactionOutput[];
  error: ErrorInfo | undefined;
  /** The usage seq of a silent overflow this run handled (reported once per seq). */
  silentOverflowSeq: number | undefined;
  /** What the cost model decided, with its numbers (undefined: the threshold alone decided). */
  economics: EconomicDecision | undefined;
}

/**
 * The answer to a step on which nothing ran (found below the threshold before any job, or a
 * background summary is being prepared): the reading, unchanged, and nothing else.
 */
export function restingOutput(status: 'below' | 'preparing', reading: PressureReading | undefined): PressureOutput {
  return { status, before: reading, after: reading, skipped: undefined, prune: undefined, transactions: [], error: undefined, silentOverflowSeq: undefined, economics: undefined };
}

export interface PressureContext extends PressureInput {
  attempts: number;
  before: PressureReading | undefined;
  last: PressureReading | undefined;
  skipped: PressureOutput['skipped'];
  prune: PruneSummary | undefined;
  range: RangeSelection | undefined;
  transactions: TransactionOutput[];
  error: ErrorInfo | undefined;
  status: PressureStatus;
  /** A cancel arrived while a transaction was running: nothing new starts after it. */
  cancelRequested: boolean;
  silentOverflowSeq: number | undefined;
  /** What the cost model decided this run, with its numbers (undefined: the threshold alone decided). */
  economics: EconomicDecision | undefined;
}

export type PressureEvent = { type: 'cancel'; reason?: string };
