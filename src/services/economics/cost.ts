/**
 * The cost model: whether a compaction or a prune pays for itself, from per-model prices and
 * the session's own pace. Pure arithmetic; the pressure chart decides with it.
 *
 * A provider's prompt cache serves the longest prefix a request shares with the previous one
 * at the cache-read price; what follows is written at the cache-write price. Rewriting history
 * (a checkpoint, a pruned result) turns everything after the rewrite into a cache write once,
 * and costs a summary request; in exchange every later request reads fewer tokens.
 *
 * Compaction: with per-request growth g, cache-read price r and compaction cost C, a session
 * that compacts whenever its request reaches A + D (A: the request right after a compaction)
 * pays per request r·(A + D/2) for reading and C·g/D for compacting; the sum is least at
 * D* = √(2·C·g / r) (the economic order quantity). So a compaction pays once the request is
 * D* above what it would be after, and only if the requests still to come repay it.
 */

import { NEUTRAL_PRICES, type ModelPrices } from '../config';
export { NEUTRAL_PRICES, type ModelPrices };

/** How the session has gone so far: the basis for guessing what is still to come. */
export interface SessionPace {
  /** Agent requests so far (assistant replies). */
  requests: number;
  /** Mean tokens the request grows by per agent request. */
  growthPerRequest: number;
}

/**
 * Requests still to come, guessed from the session so far: as many again as it has had
 * (a session that has lasted n requests is, without other knowledge, halfway through).
 */
export function requestsToCome(pace: SessionPace): number {
  return Math.max(0, Math.floor(pace.requests));
}

export interface CompactionEstimate {
  /** The request now. */
  tokensNow: number;
  /** The request right after the compaction (kept head + checkpoint + retained tail). */
  tokensAfter: number;
  /** Of `tokensAfter`, the prefix the rewrite leaves in place (still cached). */
  keptPrefixTokens: number;
  /** The summary request's input that is a prefix of the conversation (cached). */
  summaryInputCached: number;
  /** The summary request's input after that prefix (the instruction): plain input. */
  summaryInputUncached: number;
  /** Expected summary length. */
  summaryTokens: number;
  /** What the checkpoint would not carry of the span (default: everything the compaction saves). */
  forgottenTokens?: number;
}

export interface EconomicVerdict {
  pays: boolean;
  /** Expected savings over the requests to come, in the price table's currency. */
  savings: number;
  /** What it costs now (summary request, cache writes of the rewritten suffix). */
  cost: number;
  requestsToCome: number;
  /** Compaction: the request size from which it pays (A + D*); prune: tokens freed. */
  breakEvenTokens: number;
  reason: string;
}

const M = 1e6;

/**
 * Memory is part of the price. A summary forgets what its checkpoint does not carry; a prune
 * forgets the middles of bulky outputs (their heads and tails stay). The agent would have read
 * what it forgot on every request to come: `forgetting` is the share of that it would have
 * needed (config `forgetting`; 1, the default: all of it; 0 prices forgetting at zero, the old
 * model). With the default, relief below the threshold never pays (what it saves is what it
 * forgets): compaction and pruning wait for the threshold, where relief is due. The memory
 * measures of the bench (src/eval/memory.ts) found the middles of pruned outputs needed again
 * as often as the rest (a word of a file read early, written again 400 requests later), so a
 * prune's forgetting is priced like a summary's.
 */
function memoryCost(forgotten: number, n: number, prices: ModelPrices, share: number): number {
  return (Math.max(0, forgotten) * share * n * prices.cacheRead) / M;
}

export function compactionEconomics(e: CompactionEstimate, pace: SessionPace, prices: ModelPrices, forgetting = 0): EconomicVerdict {
  const rewritten = Math.max(0, e.tokensAfter - e.keptPrefixTokens);
  const cost =
    (e.summaryInputCached * prices.cacheRead +
      e.summaryInputUncached * prices.input +
      e.summaryTokens * prices.output +
      rewritten * Math.max(0, prices.cacheWrite - prices.cacheRead)) /
    M;
  const n = requestsToCome(pace);
  const saved = Math.max(0, e.tokensNow - e.tokensAfter);
  const savings = (n * saved * prices.cacheRead) / M;
  const memory = memoryCost(e.forgottenTokens ?? saved, n, prices, forgetting);
  const perToken = prices.cacheRead / M;
  const distance = perToken > 0 ? Math.sqrt((2 * cost * Math.max(0, pace.growthPerRequest)) / perToken) : Number.POSITIVE_INFINITY;
  const breakEvenTokens = Math.ceil(e.tokensAfter + distance);
  const due = e.tokensNow >= breakEvenTokens;
  const pays = due && savings > cost + memory;
  const forgot = memory > 0 ? ` + ${fmt(memory)} forgotten` : '';
  const reason = pays
    ? `pays: ${fmt(savings)} saved over ${n} requests to come against ${fmt(cost)}${forgot}, request ${e.tokensNow} ≥ break-even ${breakEvenTokens}`
    : !due
      ? `not yet: request ${e.tokensNow} < break-even ${breakEvenTokens}`
      : `does not pay: ${fmt(savings)} saved over ${n} requests to come against ${fmt(cost)}${forgot}`;
  return { pays, savings, cost: cost + memory, requestsToCome: n, breakEvenTokens, reason };
}

export interface PruneEstimate {
  tokensFreed: number;
  /** Tokens from the first rewritten node to the end of the request, after the prune: written again. */
  rewrittenTokens: number;
}

export function pruneEconomics(p: PruneEstimate, pace: SessionPace, prices: ModelPrices, forgetting = 0): EconomicVerdict {
  const n = requestsToCome(pace);
  const rewrite = (p.rewrittenTokens * Math.max(0, prices.cacheWrite - prices.cacheRead)) / M;
  const memory = memoryCost(p.tokensFreed, n, prices, forgetting);
  const cost = rewrite + memory;
  const savings = (n * p.tokensFreed * prices.cacheRead) / M;
  const pays = p.tokensFreed > 0 && savings > cost;
  const forgot = memory > 0 ? ` + ${fmt(memory)} forgotten` : '';
  const reason = `${pays ? 'pays' : 'does not pay'}: ${p.tokensFreed} tokens freed save ${fmt(savings)} over ${n} requests to come against ${fmt(rewrite)} to rewrite ${p.rewrittenTokens}${forgot}`;
  return { pays, savings, cost, requestsToCome: n, breakEvenTokens: p.tokensFreed, reason };
}

export type ReliefChoice = 'prune' | 'prune-then-summarize' | 'summarize';

/**
 * Above the threshold relief is never declined: of the actions that bring the request under
 * it, the cheapest. A prune that alone suffices is the cheapest: it makes no model call, its
 * rewrite starts no earlier than a checkpoint's (which starts at the head), and it forgets only
 * the middles of bulky outputs. When it does not suffice, prune first and summarize the pruned
 * surface (a smaller summary request, the same rewrite); when a prune frees nothing, summarize.
 */
export function reliefChoice(tokensNow: number, threshold: number, prune: EconomicVerdict | undefined): { choice: ReliefChoice; reason: string } {
  const freed = prune?.breakEvenTokens ?? 0;
  if (prune === undefined || freed <= 0) return { choice: 'summarize', reason: 'a prune would free nothing: summarize' };
  if (tokensNow - freed < threshold)
    return { choice: 'prune', reason: `a prune alone relieves: ${tokensNow} − ${freed} < threshold ${threshold}, no model call` };
  return {
    choice: 'prune-then-summarize',
    reason: `a prune is not enough (${tokensNow} − ${freed} ≥ threshold ${threshold}): prune, then summarize the pruned surface`,
  };
}

function fmt(x: number): string {
  return x.toPrecision(3);
}
