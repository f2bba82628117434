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
  /**
   * What the checkpoint of a span may cost at most, so a span it could not shrink is not chosen
   * while a wider one (a shorter retained tail) can be: see {@link CheckpointBound}.
   */
  checkpoint?: CheckpointBound;
}

/**
 * The checkpoint a span becomes carries the user's words of the span (its own messages and the
 * ones the checkpoints inside it carry) up to `userWords`, and a summary of the rest up to `cap`,
 * in a frame of `frameTokens`. A span whose checkpoint may cost that much could free less than
 * `minProgressRatio` of it and fail the shrink check after the summarizer's call (docs/spec.md#10-where-the-usual-way-falls-short-and-what-xcompact-does-instead: "small
 * spans always fail the shrink check"): typically a head merge of earlier checkpoints with little
 * new beside them, under a retained tail close to the threshold. Budgets in provider tokens.
 */
export interface CheckpointBound {
  userWords: number;
  cap: number;
  frameTokens: number;
  minProgressRatio: number;
}

export function headPosition(session: Session): number {
  const s = session.surface;
  return s.length > 0 && session.event(s.seqAt(0)).type === 'system/message' ? 1 : 0;
}

/**
 * Position of the cut that retains at least `retainTokens` and the newest unit, balanced.
 * Budgets are in the provider's tokens ("retain 16% of the window"), so node prices are
 * multiplied by the meter's calibration (docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have).
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
  // Prefix sums of node prices, all and of the user's messages (checkpoints included): a span's
  // tokens in O(1) for every cut tried below.
  const sums: Sums = { all: [0], user: [0] };
  for (let p = 0; p < s.length; p++) {
    const price = prices.priceAt(p);
    sums.all.push(sums.all[p]! + price);
    sums.user.push(sums.user[p]! + (session.event(s.seqAt(p)).type === 'user/message' ? price : 0));
  }
  const newestUnit = retainedCut(session, prices, 0, head);
  const search = (o: SelectOptions): RangeSelection | null => {
    const chosen = spanBefore(session, prices, o, head, cut, sums);
    if (chosen) return chosen;
    // Toward the tail, up to the newest unit (retainedCut with nothing to retain).
    for (let c = cut + 1; c <= newestUnit; c++) {
      if (!s.balancedAt(c)) continue;
      const r = spanBefore(session, prices, o, head, c, sums);
      if (r) return r;
    }
    return null;
  };
  if (!options.checkpoint) return search(options);
  // A span that surely shrinks, else (none does) the span as before: its summary may be short enough.
  const { checkpoint: _bound, ...plain } = options;
  return search(options) ?? search(plain);
}

interface Sums {
  all: number[];
  user: number[];
}

/** The most the span [from, cut)'s checkpoint may cost, in node prices (see CheckpointBound). */
function checkpointCeiling(bound: CheckpointBound, ratio: number, sums: Sums, from: number, cut: number): number {
  const tokens = sums.all[cut]! - sums.all[from]!;
  const words = Math.min(bound.userWords / ratio, sums.user[cut]! - sums.user[from]!);
  return bound.frameTokens + words + Math.min(bound.cap / ratio, tokens - words);
}

/** The span condensed when the retained tail starts at `cut`, or null when none is worth a checkpoint. */
function spanBefore(session: Session, prices: NodePrices, options: SelectOptions, head: number, cut: number, sums: Sums): RangeSelection | null {
  const s = session.surface;
  if (cut <= head) return null;
  const minSpan = options.minSpanTokens ?? 0;
  const spanTokens = (from: number) => sums.all[cut]! - sums.all[from]!;
  const bound = options.checkpoint;
  const ratio = prices.providerRatio ?? 1;
  const worth = (from: number) => {
    const tokens = spanTokens(from);
    if (tokens < minSpan) return false;
    return !bound || tokens - checkpointCeiling(bound, ratio, sums, from, cut) >= Math.ceil(bound.minProgressRatio * tokens);
  };
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
    if (small && k < cut && worth(k)) start = k;
  }
  // A lone checkpoint holds nothing new to condense.
  if (cut - start === 1 && isCheckpoint(session.event(s.seqAt(start)))) return null;
  if (!worth(start)) return null;
  const tokens = spanTokens(start);

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
