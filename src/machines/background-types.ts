/**
 * The background chart's contract (background.ts): the runs it reports, the events it takes and
 * the replies it gives, its context, and the two judgements its guards share.
 */
import type { AnyActorRef } from 'xstate';
import type { RangeSelection } from '../services/selection';
import type { CommitRecord, CompactionRecord, EconomicDecision, ErrorInfo, OpenedBracket, PressureReading, SpanCheck, SummaryOutcome } from './types';

/** One background run, as the gate reports it to the host. */
export interface BackgroundOutcome {
  status: 'committed' | 'failed' | 'cancelled' | 'nothing';
  record: CompactionRecord | undefined;
  error: ErrorInfo | undefined;
  /** A job waited for this run. */
  waited: boolean;
  /** The summary was ready before any job waited (held): a job that waited, waited for its commit only, not for a model. */
  held: boolean;
}

export type BackgroundEvent =
  | { type: 'step'; reading: PressureReading; silentSeenSeq: number; turn: number | null; replyTo: AnyActorRef }
  | { type: 'await'; replyTo: AnyActorRef }
  | { type: 'cancel'; reason?: string }
  /** The agent is not waiting for the model (its reply was recorded, or its turn ended): the server's slot is free. */
  | { type: 'agent.working' };

export type BackgroundReply =
  | { type: 'background.proceed'; outcomes: BackgroundOutcome[] }
  | { type: 'background.preparing'; outcomes: BackgroundOutcome[] }
  | { type: 'background.waiting' }
  | { type: 'background.settled'; outcomes: BackgroundOutcome[] };

export interface BackgroundContext {
  turn: number | null;
  range: RangeSelection | undefined;
  snapshot: SpanCheck['snapshot'] | undefined;
  opened: OpenedBracket | undefined;
  summary: SummaryOutcome | undefined;
  commit: CommitRecord | undefined;
  error: ErrorInfo | undefined;
  outcome: BackgroundOutcome['status'] | undefined;
  waiters: AnyActorRef[];
  waited: boolean;
  unreported: BackgroundOutcome[];
  /** The cost model's decision that started this run (not the prepare point), announced with compaction.started. */
  economics: EconomicDecision | undefined;
  /** The step that started this run, until it is answered (`preparing` once the bracket is open, else `proceed`). */
  starter: AnyActorRef | undefined;
  /** The route's server works on one request at a time: the summary waits for the agent's slot to free. */
  oneSlot: boolean;
  /** The route's backgroundCommit is 'ready': the summary is committed once ready, not held until a job must wait. */
  commitWhenReady: boolean;
  /** The ready summary was held (no job waited for it yet). */
  held: boolean;
}

export const IDLE: Omit<BackgroundContext, 'unreported' | 'turn'> = {
  range: undefined,
  snapshot: undefined,
  opened: undefined,
  summary: undefined,
  commit: undefined,
  error: undefined,
  outcome: undefined,
  waiters: [],
  waited: false,
  economics: undefined,
  starter: undefined,
  oneSlot: false,
  commitWhenReady: false,
  held: false,
};

export type StepEvent = Extract<BackgroundEvent, { type: 'step' }>;

/** At or above the threshold, or a prompt the provider truncated silently: relief is due (no run starts in the background then). */
export function atThreshold(e: StepEvent): boolean {
  return reaches(e, e.reading.threshold);
}

/**
 * At or above the wait point (`waitAt`, the threshold when the reading has none), or a prompt
 * the provider truncated silently: the agent must not go on while a summary is still being written.
 */
export function mustWait(e: StepEvent): boolean {
  return reaches(e, e.reading.waitAt ?? e.reading.threshold);
}

function reaches(e: StepEvent, limit: number): boolean {
  const r = e.reading;
  return r.totalTokens >= limit || (r.silentOverflow !== undefined && r.silentOverflow.seq > e.silentSeenSeq);
}

export const cancelledError = (reason: string | undefined): ErrorInfo => ({
  code: 'cancelled',
  message: reason === undefined ? 'the background compaction was cancelled' : `the background compaction was cancelled: ${reason}`,
});

