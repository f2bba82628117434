/**
 * The invariants checkLoop holds a run to (check.ts), judged on the session log it left and
 * on how the loop ended against what the scenario expects, and the report that names every
 * one a run broke.
 */
import type { SessionEvent } from '../../session/events';
import type { TransitionLog } from './coverage';
import type { LoopScenario } from './scenarios';

export type Invariant =
  | 'tool-results-paired'
  | 'within-window'
  | 'retry-only-when-told'
  | 'resend-smaller'
  | 'sends-checkpoint'
  | 'resume-keeps-history'
  | 'no-message-twice'
  | 'after-step-inside-step'
  | 'no-acknowledged-event-lost'
  | 'resumes-after-crash'
  | 'session-closed'
  | 'expected-outcome'
  | 'stops-on-abort'
  | 'finishes';

export interface Violation {
  invariant: Invariant;
  message: string;
}

export interface LoopReport {
  scenario: string;
  /** The loop model's states along the scenario's path. */
  path: readonly string[];
  /** The engine chart states the path exercises. */
  charts: readonly string[];
  ok: boolean;
  violations: Violation[];
  /** How the loop ended: resolved, or the error it rejected with. */
  ended: { kind: 'resolved' } | { kind: 'rejected'; error: unknown } | { kind: 'timeout' };
  /** Agent requests the server received (summary requests not counted). */
  requests: number;
  /** Chart transitions the loop's engines took (empty when the loop built no engine through createCompactionEngine). */
  transitions: TransitionLog;
  /** The session log at the end. */
  events: readonly SessionEvent[];
}

/** The provider's HTTP error as the client reports it: the openai SDK's `status`, the AI SDK's `statusCode` (also as a cause). */
function isProviderError(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const { status, statusCode } = e as { status?: unknown; statusCode?: unknown };
    if (typeof status === 'number' || typeof statusCode === 'number') return true;
  }
  return false;
}

/** Turns completed in a log (a `turn/end` with no reason, or `completed`). */
export function turnsAnswered(events: readonly SessionEvent[]): number {
  return events.filter((e) => {
    if (e.type !== 'turn/end') return false;
    const reason = (e.data as { reason?: string }).reason;
    return reason === undefined || reason === 'completed';
  }).length;
}

export function describeEnd(end: { kind: 'rejected'; error: unknown } | { kind: 'timeout' }): string {
  return end.kind === 'timeout'
    ? 'it did not finish in time'
    : `it rejected with ${String(end.error instanceof Error ? `${end.error.name}: ${end.error.message}` : end.error)}`;
}

/** What the log itself must show: no compaction left open, pressure work inside a step. */
export function logViolations(events: readonly SessionEvent[]): Violation[] {
  const out: Violation[] = [];
  let open: { turn: number; step: number } | null = null;
  let bracket: SessionEvent | undefined;
  for (const e of events) {
    if (e.type === 'step/start') open = e.data;
    if (e.type === 'step/end') open = null;
    if (e.type === 'session/end-seed') bracket = undefined;
    if (e.type === 'compaction/start') {
      bracket = e;
      const d = e.data as { trigger?: string; background?: boolean };
      if (d.trigger === 'pressure' && !d.background && open === null) {
        out.push({
          invariant: 'after-step-inside-step',
          message: `the pressure compaction at seq ${e.seq} ran with no step open: call afterStep() before step/end`,
        });
      }
    }
    if (e.type === 'compaction/prune' && open === null) {
      out.push({ invariant: 'after-step-inside-step', message: `the prune at seq ${e.seq} ran with no step open: call afterStep() before step/end` });
    }
    if (e.type === 'compaction/end') bracket = undefined;
  }
  if (bracket)
    out.push({
      invariant: 'session-closed',
      message: `the compaction opened at seq ${bracket.seq} was never closed (a crash needs session.recover() on reopen)`,
    });
  return out;
}

export function expectationViolations(
  scenario: LoopScenario,
  ended: LoopReport['ended'],
  events: readonly SessionEvent[],
  seen: { breakerOpened: boolean; breakerClosed: boolean; observed: boolean; abortIgnoredBy?: 'engine-call' | 'request' },
): Violation[] {
  const out: Violation[] = [];
  const x = scenario.expect;
  const fail = (invariant: Invariant, message: string) => out.push({ invariant, message });
  if (seen.abortIgnoredBy !== undefined)
    fail(
      'stops-on-abort',
      `${seen.abortIgnoredBy === 'engine-call' ? 'ctx.signal aborted while an engine call given no signal (or another one) waited on the summary it cancelled' : 'the summary request ctx.signal cancelled was still running when the run ended'}: pass ctx.signal to every request and engine call (afterStep, beforeRequest, onRequestError) and stop when it aborts`,
    );
  if (x.outcome === 'done' && ended.kind === 'rejected') fail('expected-outcome', `every turn should have been answered, but ${describeEnd(ended)}`);
  if (x.outcome === 'provider-error') {
    if (ended.kind !== 'rejected')
      fail('expected-outcome', 'the provider rejected a request the engine could not shrink: the loop should have ended with that error');
    else if (!isProviderError(ended.error)) fail('expected-outcome', `the loop should end with the provider's own error, not ${String(ended.error)}`);
  }
  if (x.outcome === 'cancelled' && ended.kind === 'resolved')
    fail('expected-outcome', 'the loop was cancelled mid-summary but resolved as if nothing happened');
  if (x.outcome === 'done' && ended.kind === 'resolved') {
    const userTurns = events.filter((e) => e.type === 'turn/start').length;
    if (turnsAnswered(events) < scenario.turns.length && userTurns >= scenario.turns.length) {
      fail('expected-outcome', `${turnsAnswered(events)} of ${scenario.turns.length} turns ended completed`);
    }
  }
  const brackets = bracketsOf(events);
  if (x.pruned && !events.some((e) => e.type === 'compaction/prune'))
    fail('expected-outcome', 'the oversized tool result was never pruned (is afterStep() called after each step?)');
  if (x.committed) {
    const ok = brackets.some(
      (b) => b.trigger === x.committed!.trigger && (x.committed!.background === undefined || b.background === x.committed!.background) && b.committed,
    );
    if (!ok)
      fail(
        'expected-outcome',
        `no ${x.committed.background ? 'background ' : ''}${x.committed.trigger} compaction was committed (brackets: ${describeBrackets(brackets)})`,
      );
  }
  if (x.summaryFailed && !brackets.some((b) => b.error !== undefined)) fail('expected-outcome', 'the summary failed, but no compaction ended with that error');
  if (x.breaker && seen.observed && !(seen.breakerOpened && seen.breakerClosed)) {
    fail('expected-outcome', `the circuit breaker should have opened and closed again (opened: ${seen.breakerOpened}, closed: ${seen.breakerClosed})`);
  }
  return out;
}

interface Bracket {
  startSeq: number;
  trigger: string;
  background: boolean;
  committed: boolean;
  error: string | undefined;
}

/** The compaction brackets of a log: a start, then (one at a time) its summary and its end. */
function bracketsOf(events: readonly SessionEvent[]): Bracket[] {
  const out: Bracket[] = [];
  let open: Bracket | undefined;
  for (const e of events) {
    if (e.type === 'compaction/start') {
      const d = e.data as { trigger: string; background?: boolean };
      open = { startSeq: e.seq, trigger: d.trigger, background: d.background === true, committed: false, error: undefined };
      out.push(open);
    } else if (e.type === 'compaction/summary' && open) open.committed = true;
    else if (e.type === 'compaction/end' && open) {
      const error = (e.data as { error?: { code?: string; cause?: string } }).error;
      if (error) open.error = error.cause ?? error.code ?? 'error';
      open = undefined;
    } else if (e.type === 'session/end-seed') open = undefined;
  }
  return out;
}

function describeBrackets(brackets: readonly Bracket[]): string {
  if (brackets.length === 0) return 'none';
  return brackets
    .map((b) => `${b.background ? 'background ' : ''}${b.trigger} ${b.committed ? 'committed' : b.error ? `failed (${b.error})` : 'never closed'}`)
    .join(', ');
}

/** Throws an Error naming the scenario, its chart path and every broken invariant; returns the report otherwise. */
export function assertLoop(report: LoopReport): LoopReport {
  if (report.ok) return report;
  const lines = report.violations.map((v) => `  ✗ ${v.invariant}: ${v.message}`);
  throw new Error([`scenario "${report.scenario}" (path ${report.path.join(' → ')}; charts ${report.charts.join(', ')}):`, ...lines].join('\n'));
}
