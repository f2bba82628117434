/**
 * Range selection: which surface span a compaction condenses. Pure: reads the session's
 * surface and the meter's node prices, writes nothing.
 *
 * The retained tail is walked from the newest node until it holds `retainTokens`; the cut
 * then moves toward the head until it is tool-pairing balanced, so a call and its results
 * (a parallel batch included) stay together. At least the newest unit is always retained.
 *
 * When that cut leaves nothing worth condensing (a large parallel batch straddles it, so the
 * balanced cut lands at the head), the alternative is not compacting at all and, at the
 * threshold, sending an over-window request. Then the cut moves the other way: toward the tail,
 * to the first balanced position after it (a smaller retained tail, the batch condensed with what
 * precedes it), and on until a span is worth a checkpoint. Nothing is selected only when what
 * precedes the newest unit cannot pay for a checkpoint: one unit alone over the budget.
 *
 * Where the span starts is the prompt-cache decision. The reference always starts at the
 * head, merging the previous checkpoint into the new one, which rewrites the first message
 * after the system prompt and loses the whole cached prefix on every pass. With `stack`,
 * earlier checkpoints at the head stay as they are and the span starts after them, so the
 * prefix [system, checkpoints…] stays cached; they are merged from the head once they hold
 * more than `stack.maxTokens` or number `stack.maxCheckpoints`, or when the caller asks
 * for a head merge (no `stack`: convergence retries, overflow recovery, manual compaction).
 */
import { isCheckpoint } from '../../session/events';
import type { Session } from '../../session/session';
import type { NodePrices } from '../metering';

export interface RangeSelection {
  /** Seq of the first shadowed node. */
  start: number;
  /** Seq of the last shadowed node (in surface order, not seq order). */
  end: number;
  startPos: number;
  endPos: number;
  /** Seqs of every node in the span, in surface order. */
  shadowed: number[];
  /** Sum of the span's node prices (our tokenizer's, comparable with a checkpoint's price). */
  tokens: number;
  /** First position after the system prompt; nodes [contextPos, startPos) are kept checkpoints. */
  contextPos: number;
}

export interface SelectOptions {
  retainTokens: number;
  /**
   * A span cheaper than this cannot pay for its own checkpoint (preamble, tags, a summary):
   * a stacked span that small falls back to a head merge, and a head span that small is not
   * selected at all, so no summarizer call is made only to fail the shrink check.
   */
  minSpanTokens?: number;
  /** Keep leading checkpoints in place while they are small; omit to merge from the head. */
  stack?: { maxCheckpoints: number; maxTokens: number };
}

export function headPosition(session: Session): number {
  const s = session.surface;
  return s.length > 0 && session.event(s.seqAt(0)).type === 'system/message' ? 1 : 0;
}

/**
 * Position of the cut that retains at least `retainTokens` and the newest unit, balanced.
 * Budgets are in the provider's tokens ("retain 16% of the window"), so node prices are
 * multiplied by the meter's calibration (SPEC §12).
 */
export function retainedCut(session: Session, prices: NodePrices, retainTokens: number, head: number): number {
  const s = session.surface;
  const ratio = prices.providerRatio ?? 1;
  let cut = s.length;
  let kept = 0;
  while (cut > head && kept < retainTokens) {
    cut--;
    kept += prices.priceAt(cut) * ratio;
  }
  if (cut === s.length && cut > head) cut--; // the newest unit always stays
  while (cut > head && !s.balancedAt(cut)) cut--;
  return cut;
}

export function selectRange(session: Session, prices: NodePrices, options: SelectOptions): RangeSelection | null {
  const s = session.surface;
  const head = headPosition(session);
  const cut = retainedCut(session, prices, options.retainTokens, head);
  // Prefix sums of node prices: a span's tokens in O(1) for every cut tried below.
  const sums = [0];
  for (let p = 0; p < s.length; p++) sums.push(sums[p]! + prices.priceAt(p));
  const at = (c: number) => spanBefore(session, prices, options, head, c, sums);
  const chosen = at(cut);
  if (chosen) return chosen;
  // Toward the tail, up to the newest unit (retainedCut with nothing to retain).
  const newestUnit = retainedCut(session, prices, 0, head);
  for (let c = cut + 1; c <= newestUnit; c++) {
    if (!s.balancedAt(c)) continue;
    const r = at(c);
    if (r) return r;
  }
  return null;
}

/** The span condensed when the retained tail starts at `cut`, or null when none is worth a checkpoint. */
function spanBefore(session: Session, prices: NodePrices, options: SelectOptions, head: number, cut: number, sums: number[]): RangeSelection | null {
  const s = session.surface;
  if (cut <= head) return null;
  const minSpan = options.minSpanTokens ?? 0;
  const spanTokens = (from: number) => sums[cut]! - sums[from]!;
  let start = head;
  if (options.stack) {
    let k = head;
    let stackTokens = 0;
    while (k < cut && isCheckpoint(session.event(s.seqAt(k)))) {
      stackTokens += prices.priceAt(k);
      k++;
    }
    // maxTokens is a budget in provider tokens, like retainTokens.
    const small = k - head < options.stack.maxCheckpoints && stackTokens * (prices.providerRatio ?? 1) <= options.stack.maxTokens;
    if (small && k < cut && spanTokens(k) >= minSpan) start = k;
  }
  // A lone checkpoint holds nothing new to condense.
  if (cut - start === 1 && isCheckpoint(session.event(s.seqAt(start)))) return null;
  const tokens = spanTokens(start);
  if (tokens < minSpan) return null;

  const shadowed = s.slice(start, cut);
  return {
    start: shadowed[0]!,
    end: shadowed[shadowed.length - 1]!,
    startPos: start,
    endPos: cut - 1,
    shadowed,
    tokens,
    contextPos: head,
  };
}
