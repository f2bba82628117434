/**
 * Chunking a span that does not fit one summary request, even with its blocks cut: where it
 * may be cut (never between a tool call and its result), the units between those cuts, and
 * how many units fill a chunk. Pure planning; the loop that sends the chunks is in
 * `bounded-summarizer.ts`.
 */
import type { ChatMessage } from '../../session/derive';
import { MIN_BLOCK_TOKENS, priceMessages, truncateToFit, type CountTokens } from './bounded';


/**
 * Positions p (0 ≤ p ≤ messages.length) where the span may be cut before message p: every
 * tool call made in messages [0, p) has its result in [0, p). Matched by call id, so a
 * parallel batch and all its results stay together. 0 and the end are always included (a
 * span ending on an unanswered call can only end there).
 */
export function chunkCuts(messages: readonly ChatMessage[]): number[] {
  const pending = new Set<string>();
  const cuts = [0];
  messages.forEach((m, i) => {
    if (m.role === 'assistant') for (const c of m.tool_calls ?? []) pending.add(c.id);
    else if (m.role === 'tool') pending.delete(m.tool_call_id);
    if (pending.size === 0 || i === messages.length - 1) cuts.push(i + 1);
  });
  return [...new Set(cuts)];
}

/** The span grouped into units between consecutive cuts: the pieces a chunk is made of. */
export function unitsOf(messages: readonly ChatMessage[]): ChatMessage[][] {
  const cuts = chunkCuts(messages);
  const units: ChatMessage[][] = [];
  for (let k = 1; k < cuts.length; k++) units.push(messages.slice(cuts[k - 1], cuts[k]));
  return units;
}

/**
 * Units cut down to `capacity` tokens each where they are bigger (every block down to
 * {@link MIN_BLOCK_TOKENS} if need be), so no chunk has to hold a unit alone. A unit that
 * cannot get that small comes back as small as it got; `cuts` counts the blocks cut.
 */
export function fitUnits(units: readonly ChatMessage[][], capacity: number, count: CountTokens): { units: ChatMessage[][]; cuts: number } {
  let cuts = 0;
  const out = units.map((unit) => {
    if (priceMessages(unit, count) <= capacity) return unit;
    const fit = truncateToFit(unit, Math.max(0, capacity), { toolResult: MIN_BLOCK_TOKENS, other: MIN_BLOCK_TOKENS }, count);
    cuts += fit.cuts.length;
    return fit.messages;
  });
  return { units: out, cuts };
}

/**
 * How many units, from `from`, fit together in `capacity` tokens (greedy, in order). 0 when
 * even the first does not fit.
 */
export function takeUnits(unitPrices: readonly number[], from: number, capacity: number): number {
  let used = 0;
  let n = 0;
  for (let k = from; k < unitPrices.length; k++) {
    if (used + unitPrices[k]! > capacity) break;
    used += unitPrices[k]!;
    n++;
  }
  return n;
}

/**
 * A whole plan for fixed capacities: unit index ranges [start, end) per chunk, the first with
 * `firstCapacity`, the later ones with `laterCapacity` (which leaves room for the partial
 * summary each later request carries). A unit larger than the capacity of its chunk gets a
 * chunk of its own, marked `oversized` (the caller cuts it further or gives up).
 */
export function planChunks(
  unitPrices: readonly number[],
  firstCapacity: number,
  laterCapacity: number,
): Array<{ start: number; end: number; oversized: boolean }> {
  const plan: Array<{ start: number; end: number; oversized: boolean }> = [];
  let k = 0;
  while (k < unitPrices.length) {
    const capacity = plan.length === 0 ? firstCapacity : laterCapacity;
    const n = takeUnits(unitPrices, k, capacity);
    if (n === 0) {
      plan.push({ start: k, end: k + 1, oversized: true });
      k++;
    } else {
      plan.push({ start: k, end: k + n, oversized: false });
      k += n;
    }
  }
  return plan;
}
