/**
 * The transaction's writes: `compaction/start` (the lock), the commit's three appends, the
 * flush, and `compaction/end {error}`. Remembers which brackets it opened, so that closing an
 * abandoned one never touches another writer's lock.
 */
import type { CommitRecord, ErrorInfo, OpenedBracket, SummaryOutcome, Trigger } from '../core';
import { SessionRuleError } from '../../session/errors';
import { COMPACTION_CHECKPOINT_SOURCE } from '../../session/events';
import { frameCheckpoint } from '../summarizing';
import { redactDeep, redactSecrets } from '../redaction';
import { recallOn } from '../core';
import { checkpointHandle } from '../recall';
import type { ServiceDeps } from '../core';
import type { RangeSelection } from '../selection';

export interface CommitInput {
  range: RangeSelection;
  startSeq: number;
  summary: SummaryOutcome;
  turn: number | null;
  opened?: OpenedBracket;
}

/** An abandoned bracket that could not be closed: its lock stays (`append`) or its close is not durable (`flush`). */
export interface UnclosedBracket {
  startSeq: number;
  /** `append`: the session refused the compaction/end (the lock stays until `session.recover()`); `flush`: it was written, the store failed to persist it. */
  stage: 'append' | 'flush';
  /** The store's or the session's error, as thrown. */
  error: unknown;
}

export class BracketWriter {
  private readonly unclosedListeners = new Set<(u: UnclosedBracket) => void>();
  /** compaction/start seqs this writer appended, until a compaction/end closes them. */
  private readonly owned = new Set<number>();
  /**
   * Subscribed only while a bracket this writer opened is open: a machine that is created and
   * stopped (its actor stopped, nothing disposed) leaves no listener on a long-lived session.
   */
  private unsubscribe: (() => void) | undefined;

  constructor(private readonly deps: Pick<ServiceDeps, 'session' | 'meter' | 'now' | 'config'>) {}

  private watchUntilClosed(): void {
    this.unsubscribe ??= this.deps.session.subscribe((e) => {
      if (e.type === 'compaction/end' || e.type === 'session/end-seed') {
        this.owned.clear();
        this.dispose();
      }
    });
  }

  /** Appends compaction/start; a lock another writer took meanwhile is `busy`, not a commit failure. */
  open(input: { trigger: Trigger; turn: number | null; background?: boolean }): OpenedBracket {
    const { session, meter, now } = this.deps;
    const tokensBefore = meter.measure().totalTokens;
    let seq: number;
    try {
      const data = { turn: input.turn, trigger: input.trigger, ...(input.background ? { background: true as const } : {}) };
      seq = session.append({ type: 'compaction/start', data }).seq;
    } catch (err) {
      if (err instanceof SessionRuleError && err.rule === 'compaction-locked') throw Object.assign(err, { chartCode: 'busy' });
      throw err;
    }
    this.owned.add(seq);
    this.watchUntilClosed();
    return { startSeq: seq, tokensBefore, startedAt: now() };
  }

  /**
   * Three appends, no await between them: the commit is atomic with respect to the loop.
   * The checkpoint replace is the one that can be refused: it is checked before anything is written.
   */
  commit(input: CommitInput): CommitRecord {
    const { session, meter, now } = this.deps;
    const { range, summary } = input;
    // The request's size right before the commit: a summary prepared in the background (and held
    // until the threshold) is committed long after its bracket opened, the surface grown since.
    const tokensBefore = meter.measure().totalTokens;
    // With recall on, the checkpoint names its bracket's handle: the recall tool brings the span back by it.
    const handle = recallOn(this.deps) ? checkpointHandle(input.startSeq) : undefined;
    // The summary leaves the log on every later request: its secrets are redacted. Recorded: those
    // of the span (kept from the summarizer's request, and so from the summary) and any left in it.
    const clean = redactSecrets(summary.text, this.deps.config.redaction);
    const kept =
      clean.count +
      redactDeep(
        range.shadowed.map((s) => session.event(s).data),
        this.deps.config.redaction,
      ).count;
    const checkpointData = { content: [{ type: 'text' as const, text: frameCheckpoint(clean.text, handle) }], source: COMPACTION_CHECKPOINT_SOURCE };
    const refused = session.check({
      type: 'user/message',
      data: checkpointData,
      surfaceOp: { op: 'replace', start: range.start, end: range.end },
      sourceEventSeqs: [input.startSeq, ...range.shadowed],
    });
    if (refused) throw refused;
    const summaryEvent = session.append({
      type: 'compaction/summary',
      data: {
        summary: clean.text,
        range: { start: range.start, end: range.end },
        shadowedSeqs: range.shadowed,
        shadowedTokens: range.tokens,
        ...(summary.provider ? { provider: summary.provider } : {}),
        ...(summary.model ? { model: summary.model } : {}),
        ...(summary.usage ? { usage: summary.usage } : {}),
        ...(summary.truncation ? { truncation: { reason: summary.truncation.reason } } : {}),
        ...(kept > 0 ? { redacted: kept } : {}),
      },
    });
    const checkpoint = session.append({
      type: 'user/message',
      data: checkpointData,
      surfaceOp: { op: 'replace', start: range.start, end: range.end },
      sourceEventSeqs: [input.startSeq, summaryEvent.seq, ...range.shadowed],
    });
    const end = session.append({ type: 'compaction/end', data: { turn: input.turn } });
    const checkpointTokens = meter.priceOf(checkpoint.seq);
    const tokensAfter = meter.measure().totalTokens;
    return {
      startSeq: input.startSeq,
      summarySeq: summaryEvent.seq,
      checkpointSeq: checkpoint.seq,
      endSeq: end.seq,
      shadowedCount: range.shadowed.length,
      spanTokens: range.tokens,
      checkpointTokens,
      tokensBefore,
      tokensAfter,
      durationMs: input.opened ? now() - input.opened.startedAt : 0,
    };
  }

  async flush(): Promise<void> {
    try {
      await this.deps.session.flush();
    } catch (err) {
      throw Object.assign(err as object, { chartCode: 'persistence' });
    }
  }

  async closeWithError(input: { turn: number | null; error: ErrorInfo }): Promise<void> {
    this.deps.session.append({ type: 'compaction/end', data: { turn: input.turn, error: { code: input.error.code, message: input.error.message } } });
    await this.deps.session.flush();
  }

  /**
   * Closes a bracket left open by a transaction that could not close it itself (its chart
   * failed, or the engine stopped under it). Only one this writer opened: never another writer's.
   */
  closeAbandoned(error: ErrorInfo): boolean {
    const { session } = this.deps;
    const lock = session.lock;
    if (!lock.held || !this.owned.has(lock.startSeq)) return false;
    const startSeq = lock.startSeq;
    try {
      session.append({ type: 'compaction/end', data: { turn: lock.turn, error: { code: error.code, message: error.message } } });
    } catch (err) {
      // Refused (a store that failed): the orphan stays and later compactions report busy.
      this.report({ startSeq, stage: 'append', error: err });
      return false;
    }
    // Nobody awaits this close (an action runs it): a store failure is reported, not swallowed.
    session.flush().catch((err: unknown) => this.report({ startSeq, stage: 'flush', error: err }));
    return true;
  }

  /** Called when closing an abandoned bracket fails; returns an unsubscribe function. */
  onUnclosed(listener: (u: UnclosedBracket) => void): () => void {
    this.unclosedListeners.add(listener);
    return () => this.unclosedListeners.delete(listener);
  }

  private report(u: UnclosedBracket): void {
    for (const l of this.unclosedListeners) l(u);
  }

  dispose(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }
}
