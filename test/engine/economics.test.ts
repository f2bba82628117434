/**
 * The cost model in the engine (config `economics`): memory is a constraint — with forgetting
 * priced in full (the default) nothing below the threshold pays and compaction waits for it;
 * with forgetting priced lower the chart compacts (or prunes) before the threshold once that
 * pays, keeping the floor tail. Above the threshold relief is never declined: a prune that
 * alone suffices ends `relieved-by-pruning` with no model call; one that does not is followed
 * by a summary of the pruned surface. Each says why, with its numbers, in compaction.started /
 * pruned. With background compaction (the default) a compaction that pays is prepared in the
 * background instead: test/engine/background-economics.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { EngineNotification } from '../../src/engine/facade';
import { harness, openTurn, recordingSummarizer, SMALL_CONFIG, stepsUntilPressure } from '../helpers/engine';

type Started = Extract<EngineNotification, { type: 'compaction.started' }>;
type Pruned = Extract<EngineNotification, { type: 'pruned' }>;

const ON = { ...SMALL_CONFIG, economics: true };
/** The old cost model: forgetting priced at zero, so compacting early pays once reads do. */
const FORGETFUL = { ...ON, forgetting: 0 };

/** Small steps until something other than `below` happens (or `limit` steps). */
async function smallSteps(h: ReturnType<typeof harness>, limit = 300) {
  const { result: r, index: i } = await stepsUntilPressure(h, { limit, text: (n) => `ok ${n}` });
  return { r, i };
}

describe('the cost model in the engine', () => {
  it('compacts below the threshold once that pays, keeps the floor tail, and announces its numbers', async () => {
    // Foreground: compacted inside afterStep (background-economics.test.ts has it prepared in the background).
    const h = harness({ summarizer: recordingSummarizer(), config: { ...FORGETFUL, background: false } });
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

  it('with forgetting priced in full (the default) the same session waits for the threshold: memory is not traded for reads', async () => {
    const h = harness({ summarizer: recordingSummarizer(), config: { ...ON, background: false } });
    openTurn(h);
    const { r } = await smallSteps(h);
    expect(r?.status).toBe('compacted');
    expect(r!.before!.totalTokens).toBeGreaterThanOrEqual(r!.before!.threshold);
    // Relief at the threshold: a summary, since a prune would free nothing (no result is oversized).
    expect(h.events.find((e): e is Started => e.type === 'compaction.started')!.economics).toMatchObject({ decision: 'summarize' });
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
        config: FORGETFUL,
        models: { 'test/small': { contextWindow: 6000, maxOutputTokens: 500, prices: { input: 1, cacheRead: 0.1, cacheWrite: 1.25, output } } },
      });
      openTurn(h);
      await smallSteps(h);
      h.engine.stop();
      return h.events.find((e): e is Started => e.type === 'compaction.started')?.economics?.breakEvenTokens ?? Infinity;
    };
    expect(await at(1)).toBeLessThan(await at(8));
  });

  it('relief is never declined: a prune that alone brings the request under the threshold ends relieved-by-pruning, no model call', async () => {
    // The reproduction (docs/cost-model.md): a 4,000-token window, two closed turns, then a step whose tool
    // result is 14,000 characters; every result prunable; the heuristic tokenizer.
    const summarizer = recordingSummarizer();
    const h = harness({
      summarizer,
      models: { 'test/small': { contextWindow: 4000, maxOutputTokens: 500 } },
      config: { ...ON, tokenizer: 'heuristic', prune: { protectRecentTokens: 0, minReclaimTokens: 0 } },
    });
    for (let t = 0; t < 2; t++) {
      openTurn(h, `Turn ${t}: list the files.`);
      await h.step(t);
      h.writer.endTurn();
    }
    openTurn(h, 'Now read the big log.');
    const before = h.session.length;
    const r = await h.step(9, 'z'.repeat(14_000));
    expect(r.status).toBe('relieved-by-pruning');
    expect(r.before!.totalTokens).toBeGreaterThanOrEqual(r.before!.threshold);
    expect(r.after!.totalTokens).toBeLessThan(r.after!.threshold);
    expect(summarizer.calls).toEqual([]);
    expect(h.types(before)).toContain('compaction/prune');
    expect(h.types(before)).not.toContain('compaction/start');
    const pruned = h.events.find((e): e is Pruned => e.type === 'pruned');
    expect(pruned?.economics).toMatchObject({ decision: 'prune' });
    expect(pruned!.economics!.reason).toMatch(/^a prune alone relieves/);
    h.engine.stop();
  });

  it('a prune that is not enough is followed by a summary of the pruned surface', async () => {
    const summarizer = recordingSummarizer();
    const h = harness({
      summarizer,
      models: { 'test/small': { contextWindow: 4000, maxOutputTokens: 500 } },
      config: {
        ...ON,
        background: false,
        tokenizer: 'heuristic',
        prune: { thresholdChars: 8192, headChars: 4096, tailChars: 1024, protectRecentTokens: 0, minReclaimTokens: 0 },
      },
    });
    openTurn(h, 'List every folder.');
    // An oversized result (9,000 characters: prunable, head 4,096 + tail 1,024 kept), then one
    // just under the prune threshold (8,000: not prunable) that takes the request far over the
    // threshold: pruning the first frees less than the overshoot.
    expect((await h.step(0, 'q'.repeat(9_000))).status).toBe('below');
    const threshold = h.engine.measure().threshold!;
    const r = await h.step(1, 'r'.repeat(8_000));
    expect(r.before!.totalTokens - 1_000).toBeGreaterThanOrEqual(threshold);
    expect(r.status).toBe('compacted');
    expect(r.pruned?.count).toBe(1);
    const started = h.events.find((e): e is Started => e.type === 'compaction.started')!;
    expect(started.economics).toMatchObject({ decision: 'prune-then-summarize' });
    // The summarizer saw the pruned result (head, marker, tail), not the 9,000 characters.
    const sent = JSON.stringify(summarizer.calls[0]!.messages);
    expect(sent).toContain('characters pruned by xcompact');
    expect(sent).not.toContain('q'.repeat(5_000));
    h.engine.stop();
  });

  it('with forgetting priced lower, prunes before the threshold when that pays, and says so in the pruned notification', async () => {
    const h = harness({
      summarizer: recordingSummarizer(),
      config: { ...FORGETFUL, prune: { thresholdChars: 2000, headChars: 800, tailChars: 400, protectRecentTokens: 0, minReclaimTokens: 1 } },
    });
    openTurn(h);
    // A long session first (many requests to come), then an oversized result as the newest step:
    // little to rewrite after it, and the request stays under the threshold.
    const { r } = await smallSteps(h, 40);
    expect(r).toBeUndefined();
    const result = await h.step(100, 'y '.repeat(1100));
    const pruned = h.events.find((e): e is Pruned => e.type === 'pruned');
    expect(pruned?.economics).toMatchObject({ decision: 'prune-early', pays: true });
    expect(result.status).toBe('relieved-by-pruning');
    expect(result.before!.totalTokens).toBeLessThan(result.before!.threshold);
    h.engine.stop();
  });
});
