/**
 * The prefetch before a step is measured: the texts the meter is about to price (events appended
 * since the last prefetch, newest first) and those it priced with a stand-in count
 * (provisional.ts), asked of an asynchronous tokenizer (the `server` tokenizer) in one batch, so
 * the synchronous meter finds the counts cached. A tokenizer without `prefetch` costs nothing.
 */
import { toChatMessage } from '../../session/derive';
import { isSurfaceType, type SessionEvent, type SurfaceEvent } from '../../session/events';
import type { Session } from '../../session/session';
import { textsOfMessage } from './pricing';
import type { ProvisionalPrices } from './provisional';
import type { Tokenizer } from './tokenizer';
import type { PrefetchReport } from './tokenizers/server';

/** A tokenizer whose counts can be fetched ahead of a measurement. */
export interface PrefetchingTokenizer extends Tokenizer {
  prefetch(texts: Iterable<string>, signal?: AbortSignal): Promise<PrefetchReport>;
}

export function isPrefetching(t: Tokenizer): t is PrefetchingTokenizer {
  return typeof (t as Partial<PrefetchingTokenizer>).prefetch === 'function';
}

export class CountPrefetch {
  /** Events before this were handed to a prefetch (or needed none). */
  private cursor = 0;

  constructor(
    private readonly session: Session,
    private readonly provisional: ProvisionalPrices,
    private readonly tokenizerFor: (header: SessionEvent<'request/header'> | undefined) => Tokenizer,
  ) {}

  /** Fetches the counts the next measurement needs; undefined when the tokenizer needs none. */
  async run(signal?: AbortSignal): Promise<PrefetchReport | undefined> {
    const end = this.session.length;
    const t = this.tokenizerFor(this.session.latestHeader);
    if (!isPrefetching(t)) {
      this.cursor = end;
      return undefined;
    }
    const from = this.cursor;
    this.cursor = end;
    return t.prefetch(this.pendingTexts(from, end), signal);
  }

  /**
   * Newest first, read lazily: a batch cut short (its size, its deadline) leaves the oldest
   * texts to the fallback, and a tokenizer that needs none reads nothing.
   */
  private *pendingTexts(from: number, end: number): Generator<string> {
    const surface = this.session.surface;
    let tools = false;
    for (let seq = end - 1; seq >= from; seq--) {
      const e = this.session.event(seq);
      if (e.type === 'request/header') {
        const h = e;
        if (!tools && h.data.tools.length > 0) yield JSON.stringify(h.data.tools);
        tools = true;
      } else if (isSurfaceType(e.type) && surface.positionOf(seq) !== undefined) yield* textsOf(e as SurfaceEvent);
    }
    const header = this.session.latestHeader;
    if (!tools && this.provisional.tools && header && header.data.tools.length > 0) yield JSON.stringify(header.data.tools);
    for (const seq of this.provisional.list().sort((a, b) => b - a)) {
      if (seq < end && surface.positionOf(seq) !== undefined) yield* textsOf(this.session.event(seq) as SurfaceEvent);
    }
  }
}

function textsOf(e: SurfaceEvent): string[] {
  return textsOfMessage(toChatMessage(e));
}
