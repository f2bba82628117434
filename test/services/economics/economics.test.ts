/**
 * The cost model (src/services/economics/cost.ts): when a compaction or a prune pays for itself.
 */
import { describe, expect, it } from 'vitest';
import { compactionEconomics, NEUTRAL_PRICES, pruneEconomics, requestsToCome, type CompactionEstimate } from '../../../src/services/economics';

const ANTHROPIC_LIKE = { input: 3, cacheRead: 0.3, cacheWrite: 3.75, output: 15 };

const estimate = (tokensNow: number): CompactionEstimate => ({
  tokensNow,
  tokensAfter: 8_000,
  keptPrefixTokens: 1_000,
  summaryInputCached: tokensNow - 1_000,
  summaryInputUncached: 700,
  summaryTokens: 3_000,
});

describe('compactionEconomics', () => {
  it('breaks even at A + √(2·C·g / r), and pays from there when the requests to come repay it', () => {
    const pace = { requests: 200, growthPerRequest: 300 };
    const v = compactionEconomics(estimate(30_000), pace, ANTHROPIC_LIKE);
    const cost = (29_000 * 0.3 + 700 * 3 + 3_000 * 15 + 7_000 * (3.75 - 0.3)) / 1e6;
    expect(v.cost).toBeCloseTo(cost, 12);
    expect(v.breakEvenTokens).toBe(Math.ceil(8_000 + Math.sqrt((2 * cost * 300) / (0.3 / 1e6))));
    expect(v.requestsToCome).toBe(200);
    expect(v.savings).toBeCloseTo((200 * 22_000 * 0.3) / 1e6, 12);
    expect(v.pays).toBe(true);
    expect(v.reason).toMatch(/^pays: /);
  });

  it('waits below the break-even size, and never pays when too few requests are to come', () => {
    const early = compactionEconomics(estimate(12_000), { requests: 200, growthPerRequest: 300 }, ANTHROPIC_LIKE);
    expect(early.pays).toBe(false);
    expect(early.reason).toMatch(/^not yet: request 12000 < break-even \d+$/);

    const late = compactionEconomics(estimate(30_000), { requests: 2, growthPerRequest: 300 }, ANTHROPIC_LIKE);
    expect(late.pays).toBe(false);
    expect(late.reason).toMatch(/^does not pay: /);
  });

  it('compacts sooner when it is cheaper, later when the session grows faster', () => {
    const base = compactionEconomics(estimate(30_000), { requests: 100, growthPerRequest: 300 }, NEUTRAL_PRICES).breakEvenTokens;
    const faster = compactionEconomics(estimate(30_000), { requests: 100, growthPerRequest: 1_200 }, NEUTRAL_PRICES).breakEvenTokens;
    const cheapOutput = compactionEconomics(estimate(30_000), { requests: 100, growthPerRequest: 300 }, { ...NEUTRAL_PRICES, output: 0.4 }).breakEvenTokens;
    expect(faster - 8_000).toBeCloseTo(2 * (base - 8_000), -1); // √4 = 2
    expect(cheapOutput).toBeLessThan(base);
    expect(compactionEconomics(estimate(30_000), { requests: 100, growthPerRequest: 0 }, NEUTRAL_PRICES).breakEvenTokens).toBe(8_000);
  });
});

describe('pruneEconomics', () => {
  it('pays when the tokens freed, read by every request to come, outweigh rewriting the suffix', () => {
    const pace = { requests: 50, growthPerRequest: 300 };
    const pays = pruneEconomics({ tokensFreed: 10_000, rewrittenTokens: 20_000 }, pace, ANTHROPIC_LIKE);
    expect(pays.cost).toBeCloseTo((20_000 * 3.45) / 1e6, 12);
    expect(pays.savings).toBeCloseTo((50 * 10_000 * 0.3) / 1e6, 12);
    expect(pays.pays).toBe(true);
    const not = pruneEconomics({ tokensFreed: 1_000, rewrittenTokens: 60_000 }, pace, ANTHROPIC_LIKE);
    expect(not.pays).toBe(false);
    expect(not.reason).toMatch(/^does not pay: 1000 tokens freed/);
    expect(pruneEconomics({ tokensFreed: 0, rewrittenTokens: 0 }, pace, ANTHROPIC_LIKE).pays).toBe(false);
  });
});

// Bad prices are a config error: test/services/config/config.test.ts ('prices: ...').
describe('pace', () => {
  it('expects as many requests again as the session has had', () => {
    expect(requestsToCome({ requests: 37, growthPerRequest: 1 })).toBe(37);
    expect(requestsToCome({ requests: -3, growthPerRequest: 1 })).toBe(0);
  });
});
