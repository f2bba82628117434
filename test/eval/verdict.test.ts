/** The one-line verdict per window: the cheapest valid policy whose needed recall is within 2 points of the best valid one. */
import { describe, expect, it } from 'vitest';
import { verdictOf } from '../../src/cli/eval-rows';
import type { WindowEval } from '../../src/eval';

const run = (policy: string, cost: number, recall: number, overWindow = 0) =>
  ({
    policy,
    window: 1000,
    records: [],
    compactions: 0,
    prunes: 0,
    unpairedRequests: 0,
    ledger: { cost, cacheMissTokens: 0, peak: 900, overWindow },
    memory: { neededRecall: recall, recallAfterCompaction: undefined, intentRecall: 1 },
  }) as unknown as WindowEval['runs'][number];

describe('verdictOf', () => {
  it('picks the cheapest within 2 points of the best recall, and leaves over-window policies out', () => {
    const w: WindowEval = { window: 1000, runs: [run('a', 3, 0.95), run('b', 2, 0.935), run('c', 1, 0.9), run('d', 0.5, 0.99, 2)] };
    const v = verdictOf(w);
    expect(v.policy).toBe('b');
    expect(v.line).toMatch(/^verdict: b — the cheapest \(\$2\.00\) of the 2 policies .* \(95\.0%\); 1 policy sent requests over the window \(invalid\)$/);
  });

  it('says so when every policy went over the window', () => {
    const v = verdictOf({ window: 1000, runs: [run('a', 1, 1, 1), run('b', 2, 1, 3)] });
    expect(v.policy).toBeUndefined();
    expect(v.line).toMatch(/no policy kept every request under the window/);
  });
});
