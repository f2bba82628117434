/**
 * The turn and step structure of the log, and the latest events a caller asks for often.
 * Turns nest steps; numbers increase; a turn ends with no step open, and never across an open
 * compaction bracket (the brackets say when). Every check and fold is O(1).
 */
import { SessionRuleError } from './errors';
import type { Brackets } from './brackets';
import type { EventData, EventType, SessionEvent } from './events';

export class Structure {
  openTurn: number | null = null;
  lastTurn = -1;
  openStep: { turn: number; step: number } | null = null;
  lastStep = -1;
  /** Seqs of the latest request/header, the latest appended reply, and the latest reply with usage. */
  headerSeq: number | undefined;
  replySeq: number | undefined;
  usageSeq: number | undefined;

  constructor(private readonly brackets: Brackets) {}

  check(type: EventType, data: unknown): void {
    switch (type) {
      case 'turn/start': {
        const d = data as EventData<'turn/start'>;
        if (this.openTurn !== null) throw new SessionRuleError('turn-already-open', `turn/start ${d.turn}: turn ${this.openTurn} is still open; end it first.`);
        if (d.turn <= this.lastTurn) throw new SessionRuleError('turn-number', `turn/start ${d.turn}: turn numbers must increase (last was ${this.lastTurn}).`);
        this.brackets.checkTurnBoundary('turn/start', d.turn);
        return;
      }
      case 'turn/end': {
        const d = data as EventData<'turn/end'>;
        if (this.openTurn !== d.turn) throw new SessionRuleError('turn-not-open', `turn/end ${d.turn}: the open turn is ${this.openTurn ?? 'none'}.`);
        if (this.openStep) throw new SessionRuleError('step-still-open', `turn/end ${d.turn}: step ${this.openStep.step} is still open; end it first.`);
        this.brackets.checkTurnBoundary('turn/end', d.turn);
        return;
      }
      case 'step/start': {
        const d = data as EventData<'step/start'>;
        if (this.openTurn !== d.turn)
          throw new SessionRuleError('step-outside-turn', `step/start ${d.turn}.${d.step}: the open turn is ${this.openTurn ?? 'none'}.`);
        if (this.openStep) throw new SessionRuleError('step-already-open', `step/start ${d.turn}.${d.step}: step ${this.openStep.step} is still open.`);
        if (d.step <= this.lastStep)
          throw new SessionRuleError('step-number', `step/start ${d.turn}.${d.step}: step numbers must increase within a turn (last was ${this.lastStep}).`);
        return;
      }
      case 'step/end': {
        const d = data as EventData<'step/end'>;
        const open = this.openStep;
        if (!open || open.turn !== d.turn || open.step !== d.step) {
          throw new SessionRuleError('step-not-open', `step/end ${d.turn}.${d.step}: the open step is ${open ? `${open.turn}.${open.step}` : 'none'}.`);
        }
        return;
      }
      default:
        return;
    }
  }

  fold(e: SessionEvent): void {
    switch (e.type) {
      case 'turn/start':
        this.openTurn = e.data.turn;
        this.lastTurn = e.data.turn;
        this.lastStep = -1;
        return;
      case 'turn/end':
        this.openTurn = null;
        return;
      case 'step/start':
        this.openStep = { turn: e.data.turn, step: e.data.step };
        this.lastStep = e.data.step;
        return;
      case 'step/end':
        this.openStep = null;
        return;
      case 'request/header':
        this.headerSeq = e.seq;
        return;
      case 'assistant/message':
        // A replace (an argument prune) rewrites an old reply; it is no new reply.
        if (e.surfaceOp !== 'append') return;
        this.replySeq = e.seq;
        if (e.data.usage) this.usageSeq = e.seq;
        return;
      default:
        return;
    }
  }
}
