/**
 * The compaction bracket: `compaction/start` … `compaction/end` is the lock, and the rules of
 * what may happen inside it. One bracket is open at a time; it holds at most one
 * `compaction/summary`, whose `range` is the first and last of its `shadowedSeqs`; it ends with
 * that summary before it or with an `error`; the checkpoint that replaces the span is written
 * inside it and names it. A `session/end-seed` makes an open bracket stale (an orphan of a
 * process that stopped), no longer a lock.
 *
 * A bracket also pins the turn structure: it ends in the turn it started in (between turns
 * when `turn` is null), so a turn cannot end, nor a new one start, while it is open. That rule
 * is the one place (`pinsTurn`) a bracket marked background (docs/spec.md#13-background-compaction) is let through.
 *
 * Every check here is O(1), or O(the checkpoint's provenance) for a checkpoint replace.
 */
import { SessionRuleError } from './errors';
import { COMPACTION_CHECKPOINT_SOURCE, type EventData, type EventType, type SessionEvent, type SurfaceOp } from './events';

export type LockState =
  | { held: false; staleOrphans: readonly number[] }
  | {
      held: true;
      startSeq: number;
      turn: number | null;
      trigger: 'pressure' | 'overflow' | 'manual';
      /** Started before this Session object was opened: left behind by a process that stopped. */
      orphan: boolean;
      staleOrphans: readonly number[];
    };

const BRACKET_EVENTS: ReadonlySet<string> = new Set(['compaction/start', 'compaction/summary', 'compaction/end']);

function turnName(turn: number | null): string {
  return turn === null ? 'between turns' : `turn ${turn}`;
}

export class Brackets {
  private start: SessionEvent<'compaction/start'> | undefined;
  /** Seq of the open bracket's summary, if it has one. */
  private summarySeq: number | undefined;
  /** Replaced (never mutated) on change, so `lock` can hand it out without a copy. */
  private stale: readonly number[] = Object.freeze([]);

  constructor(private readonly eventAt: (seq: number) => SessionEvent) {}

  get open(): SessionEvent<'compaction/start'> | undefined {
    return this.start;
  }

  lock(openedLength: number): LockState {
    const l = this.start;
    if (!l) return { held: false, staleOrphans: this.stale };
    return {
      held: true,
      startSeq: l.seq,
      turn: l.data.turn,
      trigger: l.data.trigger,
      orphan: l.seq < openedLength,
      staleOrphans: this.stale,
    };
  }

  /**
   * The open bracket that keeps the turn structure as it is, if any. A background bracket
   * (docs/spec.md#13-background-compaction) does not: its summary is prepared while the agent works on, across step and turn
   * boundaries. It still names the turn it started in, and its compaction/end names the same.
   */
  private pinsTurn(): SessionEvent<'compaction/start'> | undefined {
    return this.start?.data.background ? undefined : this.start;
  }

  /** Throws when a turn boundary (`turn/start`, `turn/end`) would cross an open bracket. */
  checkTurnBoundary(type: 'turn/start' | 'turn/end', turn: number): void {
    const open = this.pinsTurn();
    if (!open) return;
    throw new SessionRuleError(
      'compaction-open',
      `${type} ${turn}: compaction ${open.seq} (${turnName(open.data.turn)}) is still open; a compaction ends in the turn it started in. Close it with compaction/end first (or session/end-seed, as recover() does, when its process is gone).`,
    );
  }

  /** The rules of the log-only compaction events. */
  check(type: EventType, data: unknown, openTurn: number | null): void {
    switch (type) {
      case 'compaction/start': {
        const d = data as EventData<'compaction/start'>;
        if (this.start) {
          throw new SessionRuleError('compaction-locked', `compaction/start: compaction ${this.start.seq} is still open (no compaction/end yet).`);
        }
        if (d.turn !== openTurn) {
          throw new SessionRuleError(
            'compaction-turn',
            `compaction/start names turn ${d.turn ?? 'null'} but the open turn is ${openTurn ?? 'none (use null)'}.`,
          );
        }
        return;
      }
      case 'compaction/summary': {
        const open = this.requireOpen(type);
        if (this.summarySeq !== undefined) {
          throw new SessionRuleError(
            'compaction-summary-twice',
            `compaction/summary: compaction ${open.seq} already has its summary (seq ${this.summarySeq}); one bracket condenses one span.`,
          );
        }
        const d = data as EventData<'compaction/summary'>;
        const first = d.shadowedSeqs[0]!;
        const last = d.shadowedSeqs[d.shadowedSeqs.length - 1]!;
        if (d.range.start !== first || d.range.end !== last) {
          throw new SessionRuleError(
            'summary-range',
            `compaction/summary: range {start: ${d.range.start}, end: ${d.range.end}} must be the first and last of its shadowedSeqs (${first} … ${last}).`,
          );
        }
        return;
      }
      case 'compaction/end': {
        const open = this.requireOpen(type);
        const d = data as EventData<'compaction/end'>;
        if (d.turn !== open.data.turn) {
          throw new SessionRuleError(
            'compaction-turn',
            `compaction/end names turn ${d.turn ?? 'null'} but its compaction/start (${open.seq}) names ${open.data.turn ?? 'null'}.`,
          );
        }
        if (d.error === undefined && this.summarySeq === undefined) {
          throw new SessionRuleError(
            'compaction-end-without-summary',
            `compaction/end: compaction ${open.seq} has no compaction/summary; a compaction that condensed nothing ends with an error saying why.`,
          );
        }
        return;
      }
      default:
        return;
    }
  }

  /**
   * A checkpoint replace belongs to the open bracket: it needs one, names its compaction/start,
   * and names no compaction event of another bracket.
   */
  checkSurface(type: EventType, data: unknown, surfaceOp: SurfaceOp | undefined, sourceEventSeqs: readonly number[] | undefined): void {
    if (type !== 'user/message' || surfaceOp === undefined || surfaceOp === 'append') return;
    if ((data as EventData<'user/message'>).source !== COMPACTION_CHECKPOINT_SOURCE) return;
    const open = this.start;
    if (!open) {
      throw new SessionRuleError(
        'checkpoint-outside-compaction',
        'a compaction checkpoint replace is written inside its compaction: append compaction/start (and its compaction/summary) first.',
      );
    }
    const sources = sourceEventSeqs ?? [];
    for (const s of sources) {
      if (s >= open.seq || !BRACKET_EVENTS.has(this.eventAt(s).type)) continue;
      throw new SessionRuleError(
        'checkpoint-bracket',
        `a compaction checkpoint names ${this.eventAt(s).type} ${s}, which belongs to another compaction than the open one (${open.seq}).`,
      );
    }
    if (!sources.includes(open.seq)) {
      throw new SessionRuleError('checkpoint-bracket', `a compaction checkpoint must name its compaction/start (${open.seq}) in sourceEventSeqs.`);
    }
  }

  fold(e: SessionEvent): void {
    switch (e.type) {
      case 'compaction/start':
        this.start = e;
        this.summarySeq = undefined;
        return;
      case 'compaction/summary':
        this.summarySeq = e.seq;
        return;
      case 'compaction/end':
        this.start = undefined;
        this.summarySeq = undefined;
        return;
      case 'session/end-seed':
        if (this.start) this.stale = Object.freeze([...this.stale, this.start.seq]);
        this.start = undefined;
        this.summarySeq = undefined;
        return;
      default:
        return;
    }
  }

  private requireOpen(type: string): SessionEvent<'compaction/start'> {
    if (!this.start) throw new SessionRuleError('no-compaction-open', `${type}: there is no open compaction/start to belong to.`);
    return this.start;
  }
}
