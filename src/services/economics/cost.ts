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

export function compactionEconomics(e: CompactionEstimate, pace: SessionPace, prices: ModelPrices): EconomicVerdict {
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
  const perToken = prices.cacheRead / M;
  const distance = perToken > 0 ? Math.sqrt((2 * cost * Math.max(0, pace.growthPerRequest)) / perToken) : Number.POSITIVE_INFINITY;
  const breakEvenTokens = Math.ceil(e.tokensAfter + distance);
  const due = e.tokensNow >= breakEvenTokens;
  const pays = due && savings > cost;
  const reason = pays
    ? `pays: ${fmt(savings)} saved over ${n} requests to come against ${fmt(cost)}, request ${e.tokensNow} ≥ break-even ${breakEvenTokens}`
    : !due
      ? `not yet: request ${e.tokensNow} < break-even ${breakEvenTokens}`
      : `does not pay: ${fmt(savings)} saved over ${n} requests to come against ${fmt(cost)}`;
  return { pays, savings, cost, requestsToCome: n, breakEvenTokens, reason };
}

export interface PruneEstimate {
  tokensFreed: number;
  /** Tokens from the first rewritten node to the end of the request, after the prune: written again. */
  rewrittenTokens: number;
}

export function pruneEconomics(p: PruneEstimate, pace: SessionPace, prices: ModelPrices): EconomicVerdict {
  const n = requestsToCome(pace);
  const cost = (p.rewrittenTokens * Math.max(0, prices.cacheWrite - prices.cacheRead)) / M;
  const savings = (n * p.tokensFreed * prices.cacheRead) / M;
  const pays = p.tokensFreed > 0 && savings > cost;
  const reason = pays
    ? `pays: ${p.tokensFreed} tokens freed save ${fmt(savings)} over ${n} requests to come against ${fmt(cost)} to rewrite ${p.rewrittenTokens}`
    : `does not pay: ${p.tokensFreed} tokens freed save ${fmt(savings)} over ${n} requests to come against ${fmt(cost)} to rewrite ${p.rewrittenTokens}`;
  return { pays, savings, cost, requestsToCome: n, breakEvenTokens: p.tokensFreed, reason };
}

function fmt(x: number): string {
  return x.toPrecision(3);
}
