/**
 * The cost model in the engine (config `economics`): the pressure chart compacts before the
 * threshold once that pays, keeping the floor tail; skips a prune whose rewrite does not pay;
 * and says why, with its numbers, in compaction.started / pruned. With background compaction
 * (the default) a compaction that pays is prepared in the background instead:
 * test/background-economics.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { EngineNotification } from '../src/engine';
import { harness, openTurn, recordingSummarizer, SMALL_CONFIG, stepsUntilPressure } from './helpers/engine';

type Started = Extract<EngineNotification, { type: 'compaction.started' }>;
type Pruned = Extract<EngineNotification, { type: 'pruned' }>;

const ON = { ...SMALL_CONFIG, economics: true };

/** Small steps until something other than `below` happens (or `limit` steps). */
async function smallSteps(h: ReturnType<typeof harness>, limit = 300) {
  const { result: r, index: i } = await stepsUntilPressure(h, { limit, text: (n) => `ok ${n}` });
  return { r, i };
}

describe('the cost model in the engine', () => {
  it('compacts below the threshold once that pays, keeps the floor tail, and announces its numbers', async () => {
    // Foreground: compacted inside afterStep (background-economics.test.ts has it prepared in the background).
    const h = harness({ summarizer: recordingSummarizer(), config: { ...ON, background: false } });
    openTurn(h);
    const { r } = await smallSteps(h);
    expect(r?.status).toBe('compacted');
    expect(r!.before!.totalTokens).toBeLessThan(r!.before!.threshold);
    const started = h.events.find((e): e is Started => e.type === 'compaction.started')!;
    expect(started.economics).toMatchObject({ decision: 'compact-early', pays: true });
    expect(started.economics!.savings).toBeGreaterThan(started.economics!.cost);
    expect(started.tokensBefore).toBeGreaterThanOrEqual(started.economics!.breakEvenTokens);
    expect(started.economics!.reason).toMatch(/^pays: /);
    // The floor tail (2% of W − O = 110 tokens here) instead of the budget's (20%): almost everything goes.
    const committed = h.events.find((e) => e.type === 'compaction.committed') as Extract<EngineNotification, { type: 'compaction.committed' }>;
    expect(committed.tokensAfter).toBeLessThan(0.3 * committed.tokensBefore);
    h.engine.stop();
  });

  it('with economics: false the same session waits for the threshold', async () => {
    // Foreground: the threshold itself, not the background's prepare point below it.
    const h = harness({ summarizer: recordingSummarizer(), config: { ...SMALL_CONFIG, background: false } });
    openTurn(h);
    const { r } = await smallSteps(h);
    expect(r?.status).toBe('compacted');
    expect(r!.before!.totalTokens).toBeGreaterThanOrEqual(r!.before!.threshold);
    expect(h.events.find((e): e is Started => e.type === 'compaction.started')!.economics).toBeUndefined();
    h.engine.stop();
  });

  it('compacts later when summaries cost more (the model’s prices, from config)', async () => {
    const at = async (output: number) => {
      const h = harness({
        summarizer: recordingSummarizer(),
        config: ON,
        models: { 'test/small': { contextWindow: 6000, maxOutputTokens: 500, prices: { input: 1, cacheRead: 0.1, cacheWrite: 1.25, output } } },
      });
      openTurn(h);
      await smallSteps(h);
      h.engine.stop();
      return h.events.find((e): e is Started => e.type === 'compaction.started')?.economics?.breakEvenTokens ?? Infinity;
    };
    expect(await at(1)).toBeLessThan(await at(8));
  });

  it('skips a prune whose rewrite costs more than it saves, and compacts instead', async () => {
    // Foreground: the prune-or-compact decision is the pressure chart's at the threshold (a background summary does not prune).
    const h = harness({
      summarizer: recordingSummarizer(),
      config: { ...ON, background: false, prune: { thresholdChars: 2000, headChars: 800, tailChars: 400, protectRecentTokens: 0, minReclaimTokens: 1 } },
    });
    openTurn(h);
    // Early in the session (few requests to come), one oversized result followed by a long suffix.
    await h.step(0, 'x '.repeat(3000));
    let r;
    for (let i = 1; i < 60; i++) {
      r = await h.step(i);
      if (r.status !== 'below') break;
    }
    expect(r!.status).toBe('compacted');
    expect(h.events.filter((e) => e.type === 'pruned')).toEqual([]);
    const started = h.events.find((e): e is Started => e.type === 'compaction.started')!;
    expect(started.economics).toMatchObject({ decision: 'skip-prune', pays: false });
    expect(started.economics!.reason).toMatch(/^does not pay: \d+ tokens freed/);
    h.engine.stop();
  });

  it('prunes when it pays, and says so in the pruned notification', async () => {
    const h = harness({ summarizer: recordingSummarizer(), config: { ...ON, prune: { thresholdChars: 2000, headChars: 800, tailChars: 400, protectRecentTokens: 0, minReclaimTokens: 1 } } });
    openTurn(h);
    // A long session first (many requests to come), then an oversized result as the newest step: little to rewrite after it.
    const { r } = await smallSteps(h, 40);
    expect(r).toBeUndefined();
    let result;
    for (let i = 100; i < 140; i++) {
      result = await h.step(i, i === 100 ? 'y '.repeat(6000) : `ok ${i}`);
      if (result.status !== 'below') break;
    }
    const pruned = h.events.find((e): e is Pruned => e.type === 'pruned');
    expect(pruned?.economics).toMatchObject({ decision: 'prune', pays: true });
    h.engine.stop();
  });
});
