/**
 * Provisional prices: nodes priced while their tokenizer had to stand in for some of its own
 * counts (the `server` tokenizer before its counts arrived, tokenizers/server.ts). The meter
 * keeps their seqs, says how many there are (a measurement's `fallbackNodes`), and prices them
 * again once the counts are in (TokenMeter.refreshPrices), so a price taken while the server was
 * slow or down is not kept for good.
 */
import type { SurfaceEvent } from '../../session/events';
import type { Session } from '../../session/session';
import { priceNode } from './pricing';
import type { Tokenizer } from './tokenizer';

/** The meter's figures a repricing must move with the nodes it reprices. */
export interface RefreshBase {
  /** The anchor's report seq and its base (MeterAnchorState). */
  anchor: { seq: number; surfaceAtAnchor: number } | undefined;
  /** The surface the latest header's request had (RequestSurface). */
  requested: { surfaceTotal: number } | undefined;
  headerSeq: number;
}

export class ProvisionalPrices {
  private readonly seqs = new Set<number>();
  /** The tool list's count was a stand-in's. */
  tools = false;
  /**
   * The latest replace that rebased the meter's anchor: nodes folded up to it (or up to the
   * anchor's own report, whichever is later) are in the figure the anchor carries.
   */
  rebasedAt = -1;

  get size(): number {
    return this.seqs.size + (this.tools ? 1 : 0);
  }

  /** `event`'s price with `t`; remembered as provisional when `t` stood in for any of its texts. */
  price(t: Tokenizer, seq: number, event: Pick<SurfaceEvent, 'type' | 'data'>, counts?: number[]): number {
    const before = t.fallbacks?.();
    const price = priceNode(t, event, counts);
    if (before !== undefined && t.fallbacks!() !== before) this.seqs.add(seq);
    else this.seqs.delete(seq);
    return price;
  }

  /** `text`'s count with `t`, tracking the tool list's. */
  countTools(t: Tokenizer, text: string): number {
    const before = t.fallbacks?.();
    const n = t.count(text);
    this.tools = before !== undefined && t.fallbacks!() !== before;
    return n;
  }

  forget(seq: number): void {
    this.seqs.delete(seq);
  }

  clear(): void {
    this.seqs.clear();
    this.tools = false;
  }

  /** All of `seqs` provisional when `t` stood in for anything since `before` (a whole-surface repricing). */
  markAll(t: Tokenizer, before: number | undefined, seqs: Iterable<number>): void {
    this.clear();
    if (before === undefined || t.fallbacks!() === before) return;
    for (const s of seqs) this.seqs.add(s);
  }

  /**
   * Prices every provisional node of `prices` again with `t` (those off the surface are forgotten),
   * updating `prices` and `counts`; returns the change in total. What the provider counted stays:
   * a node folded by the anchor's base (see rebasedAt) moves the anchor's base with it, one below
   * the latest header the surface its request had.
   */
  refresh(t: Tokenizer, session: Session, prices: Map<number, number>, counts: Map<number, number[]>, at: RefreshBase): { changed: number; delta: number } {
    const out = { changed: 0, delta: 0 };
    const baseSeq = at.anchor ? Math.max(at.anchor.seq, this.rebasedAt) : -1;
    for (const seq of [...this.seqs]) {
      const old = prices.get(seq);
      if (old === undefined) {
        this.seqs.delete(seq);
        continue;
      }
      const c: number[] = [];
      const delta = this.price(t, seq, session.event(seq) as SurfaceEvent, c) - old;
      counts.set(seq, c);
      if (delta === 0) continue;
      prices.set(seq, old + delta);
      out.changed++;
      out.delta += delta;
      if (at.anchor && seq <= baseSeq) at.anchor.surfaceAtAnchor += delta;
      if (at.requested && seq < at.headerSeq) at.requested.surfaceTotal += delta;
    }
    return out;
  }

  list(): number[] {
    return [...this.seqs];
  }
}
