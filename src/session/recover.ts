/**
 * Recovery of a log a stopped process left mid-flight (see `Session.recover`).
 */
import type { LockState } from './brackets';
import type { AppendInput } from './events';
import type { Surface } from './surface';

/** What recovery uses of a session (the Session class satisfies it; not imported, so no cycle). */
interface RecoverableSession {
  readonly surface: Pick<Surface, 'pendingCalls'>;
  readonly openStep: { turn: number; step: number } | null;
  readonly lock: LockState;
  readonly openTurn: number | null;
  append(event: AppendInput): unknown;
}

export interface RecoveryReport {
  /** Calls that never got a result; each now has an error result saying so. */
  closedCalls: string[];
  closedStep: boolean;
  closedTurn: boolean;
  /** Seq of the orphan `compaction/start` made stale by a `session/end-seed`, if any. */
  clearedLock: number | undefined;
}

const INTERRUPTED_RESULT = 'Tool call interrupted: the process stopped before this result was recorded. The call may or may not have run.';

/**
 * Answers every call still waiting for its result with an error result saying `why`: a request
 * with an unanswered call is invalid for every OpenAI-compatible API. Returns the call ids.
 */
export function answerPendingCalls(session: RecoverableSession, why: string): string[] {
  const answered: string[] = [];
  for (const callId of session.surface.pendingCalls()) {
    session.append({ type: 'tool/result', data: { callId, content: [{ type: 'text', text: why }], isError: true }, surfaceOp: 'append' });
    answered.push(callId);
  }
  return answered;
}

/** Appends, through the ordinary rules, what closes every open thing of `session`. */
export function recoverSession(session: RecoverableSession): RecoveryReport {
  const report: RecoveryReport = { closedCalls: answerPendingCalls(session, INTERRUPTED_RESULT), closedStep: false, closedTurn: false, clearedLock: undefined };
  const step = session.openStep;
  if (step) {
    session.append({ type: 'step/end', data: { ...step, reason: 'interrupted' } });
    report.closedStep = true;
  }
  // Before the turn ends: a compaction ends in the turn it started in.
  const lock = session.lock;
  if (lock.held) {
    report.clearedLock = lock.startSeq;
    session.append({ type: 'session/end-seed', data: { reason: 'recover' } });
  }
  const turn = session.openTurn;
  if (turn !== null) {
    session.append({ type: 'turn/end', data: { turn, reason: 'interrupted' } });
    report.closedTurn = true;
  }
  return report;
}
