/**
 * The shadowed-history index: every original message a checkpoint or a prune took off the
 * surface, with its words, its handles and where it was. Built by folding the log once (on
 * first use: a reopened session rebuilds it from the replayed log, which already holds every
 * shadowed seq), then kept current by a session listener that only acts on replacements.
 *
 * Memory follows the shadowed text, not the log: an entry references its event's own strings
 * (a one-block message is not copied), the word index holds one id per distinct word per
 * entry, and the rest is per turn or per checkpoint.
 */
import { isCheckpoint, type SessionEvent } from '../../session/events';
import type { Session } from '../../session/session';
import { entryOf, type RecallEntry } from './entries';
import { checkpointHandle, parseHandle, prunedHandle } from './handles';
import { WordIndex } from './words';

export interface CheckpointInfo {
  readonly handle: string;
  /** Seq of the checkpoint `user/message`. */
  readonly seq: number;
  readonly turn: number | null;
  /** Entry ids it shadowed directly (its own span, pruned rewrites included). */
  readonly entries: number[];
  /** Earlier checkpoints merged into it. */
  readonly merged: string[];
}

export interface RecallIndexStats {
  events: number;
  entries: number;
  checkpoints: number;
  /** Code units of text the entries hold. */
  textChars: number;
  vocabulary: number;
}

const indexes = new WeakMap<Session, RecallIndex>();

export class RecallIndex {
  private readonly list: RecallEntry[] = [];
  private readonly bySeq = new Map<number, number>();
  private readonly words = new WordIndex();
  private readonly checkpointList: CheckpointInfo[] = [];
  private readonly byHandle = new Map<string, CheckpointInfo>();
  /** Checkpoint event seq → its handle (to name a checkpoint merged into a later one). */
  private readonly handleOfCheckpoint = new Map<number, string>();
  /** Seqs of `turn/start` events and their turn numbers, ascending. */
  private readonly turnSeqs: number[] = [];
  private readonly turnNumbers: number[] = [];
  private textChars = 0;
  private folded = 0;

  /** The index of a session: one per session, built on first use and kept current from then on. */
  static of(session: Session): RecallIndex {
    let index = indexes.get(session);
    if (!index) {
      index = new RecallIndex(session);
      indexes.set(session, index);
    }
    return index;
  }

  private constructor(private readonly session: Session) {
    const events = session.events();
    for (const e of events) this.fold(e);
    session.subscribe((e) => this.fold(e));
  }

  get entries(): readonly RecallEntry[] {
    return this.list;
  }

  get checkpoints(): readonly CheckpointInfo[] {
    return this.checkpointList;
  }

  stats(): RecallIndexStats {
    return {
      events: this.folded,
      entries: this.list.length,
      checkpoints: this.checkpointList.length,
      textChars: this.textChars,
      vocabulary: this.words.vocabulary,
    };
  }

  entry(id: number): RecallEntry {
    return this.list[id]!;
  }

  /** Entry ids that may contain `query` (a superset), or undefined: check them all. */
  candidates(query: string): readonly number[] | undefined {
    return this.words.candidates(query);
  }

  checkpoint(handle: string): CheckpointInfo | undefined {
    return this.byHandle.get(handle.trim().toLowerCase());
  }

  /** The entry id a `pr-N` handle names: N is the rewritten node (itself a rewrite, or the original). */
  pruned(handle: string): number | undefined {
    const h = parseHandle(handle);
    if (h?.kind !== 'pruned' || h.seq >= this.session.length) return undefined;
    const id = this.bySeq.get(this.originalOf(h.seq));
    return id !== undefined && this.list[id]!.pruned !== undefined ? id : undefined;
  }

  /** Every entry a checkpoint holds, its merged checkpoints' included, in log order. */
  entriesOf(info: CheckpointInfo): number[] {
    const ids: number[] = [];
    const seen = new Set<string>();
    const walk = (c: CheckpointInfo) => {
      if (seen.has(c.handle)) return;
      seen.add(c.handle);
      ids.push(...c.entries);
      for (const m of c.merged) {
        const inner = this.byHandle.get(m);
        if (inner) walk(inner);
      }
    };
    walk(info);
    return ids.sort((a, b) => this.list[a]!.seq - this.list[b]!.seq);
  }

  /** The handles of every pruned entry, newest first (for a message naming what exists). */
  prunedHandles(limit: number): string[] {
    const out: string[] = [];
    for (let i = this.list.length - 1; i >= 0 && out.length < limit; i--) {
      const p = this.list[i]!.pruned;
      if (p !== undefined) out.push(p);
    }
    return out;
  }

  turnOf(seq: number): number | null {
    let lo = 0;
    let hi = this.turnSeqs.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.turnSeqs[mid]! <= seq) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found < 0 ? null : this.turnNumbers[found]!;
  }

  // -------------------------------------------------------------------------------------------

  private fold(e: SessionEvent): void {
    if (e.seq < this.folded) return; // replayed into a listener twice: never
    this.folded = e.seq + 1;
    if (e.type === 'turn/start') {
      this.turnSeqs.push(e.seq);
      this.turnNumbers.push(e.data.turn);
      return;
    }
    if (e.surfaceOp === undefined || e.surfaceOp === 'append') return;
    const shadowed = this.session.surface.shadowedBy(e.seq) ?? [];
    if (isCheckpoint(e) || !this.isRewrite(e, shadowed)) this.foldCheckpoint(e, shadowed);
    else this.add(this.originalOf(shadowed[0]!), { pruned: prunedHandle(shadowed[0]!) });
  }

  /** A prune's rewrite: one node replaced by one of the same type (content or arguments only). */
  private isRewrite(e: SessionEvent, shadowed: readonly number[]): boolean {
    return shadowed.length === 1 && this.session.event(shadowed[0]!).type === e.type && !isCheckpoint(this.session.event(shadowed[0]!));
  }

  private foldCheckpoint(e: SessionEvent, shadowed: readonly number[]): void {
    const start = e.sourceEventSeqs?.[0];
    const opened = start !== undefined && start < e.seq && this.session.event(start).type === 'compaction/start';
    const handle = checkpointHandle(opened ? start : e.seq);
    const info: CheckpointInfo = { handle, seq: e.seq, turn: this.turnOf(e.seq), entries: [], merged: [] };
    this.checkpointList.push(info);
    this.byHandle.set(handle, info);
    this.handleOfCheckpoint.set(e.seq, handle);
    for (const s of shadowed) {
      const inner = this.handleOfCheckpoint.get(s);
      if (inner !== undefined) {
        info.merged.push(inner);
        continue;
      }
      const id = this.add(this.originalOf(s), { checkpoint: handle });
      if (id !== undefined) info.entries.push(id);
    }
  }

  /** Follows rewrites back to the event first appended for a node. */
  private originalOf(seq: number): number {
    let s = seq;
    for (;;) {
      const e = this.session.event(s);
      const under = this.session.surface.shadowedBy(s);
      if (under === undefined || under.length !== 1 || isCheckpoint(e) || this.session.event(under[0]!).type !== e.type) return s;
      s = under[0]!;
    }
  }

  /** Indexes an original (once); a later checkpoint over its rewrite only names itself on it. */
  private add(seq: number, where: { pruned?: string; checkpoint?: string }): number | undefined {
    const known = this.bySeq.get(seq);
    if (known !== undefined) {
      const entry = this.list[known]!;
      if (where.checkpoint !== undefined && entry.checkpoint === undefined) entry.checkpoint = where.checkpoint;
      return known;
    }
    const base = entryOf(this.session.events(), this.session.event(seq), this.turnOf(seq));
    if (base === undefined) return undefined;
    const id = this.list.length;
    const entry: RecallEntry = { ...base, ...where };
    this.list.push(entry);
    this.bySeq.set(seq, id);
    this.words.add(id, entry.callArguments === undefined ? entry.text : `${entry.callArguments}\n${entry.text}`);
    this.textChars += entry.text.length;
    return id;
  }
}
