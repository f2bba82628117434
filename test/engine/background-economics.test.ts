/**
 * Background compaction and the cost model together, both on as by default (docs/spec.md#13-background-compaction, config
 * `economics`): when compacting below the threshold pays, the summary is prepared in the
 * background (not compacted inside afterStep), announced with the cost model's numbers, and
 * committed without the agent waiting; the window and the span rules still hold.
 */
import { describe, expect, it } from 'vitest';
import type { AfterStepResult, EngineNotification } from '../../src/engine/facade';
import type { SummaryResult } from '../../src/services/summarizing';
import { deferredSummarizer, harness, openTurn, replaceFirstToolResult, stepsUntilPressure, type Harness } from '../helpers/engine';
import { openAIMessageProblems } from '../helpers/openai-validator';

// SMALL_CONFIG's window and tail, with `economics` and `background` left to their defaults, and forgetting
// priced at zero (the default prices it in full: then nothing below the threshold pays).
const DEFAULTS = { headroomTokens: 500, maxTokens: 400, thresholdRatio: 0.8, retainRatio: 0.2, forgetting: 0 } as const;
const SUMMARY: SummaryResult = { text: 'The user asked to fix the build; files were listed.', requests: 1 };
type Started = Extract<EngineNotification, { type: 'compaction.started' }>;
type Committed = Extract<EngineNotification, { type: 'compaction.committed' }>;

/** Resolves once `done()` holds (a background run lands on its own, between steps). */
async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((r) => setTimeout(r, 1));
}

/** Small steps until something other than `below` happens; every result is kept. */
async function smallSteps(h: Harness, results: AfterStepResult[], limit = 300): Promise<number> {
  const { result, index } = await stepsUntilPressure(h, { limit, text: (n) => `ok ${n}`, seen: results });
  if (!result) throw new Error('nothing happened in the background');
  return index + 1;
}

describe('background compaction with the cost model (both defaults on)', () => {
  it('prepares a compaction that pays in the background, below the prepare point, and commits it without a wait', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: DEFAULTS });
    openTurn(h);
    const results: AfterStepResult[] = [];
    let i = await smallSteps(h, results);
    const first = results.at(-1)!;
    expect(first.status).toBe('preparing');
    // The cost model started it, not the prepare point (nor the threshold).
    expect(first.before!.prepareAt).toBeDefined();
    expect(first.before!.totalTokens).toBeLessThan(first.before!.prepareAt!);
    const started = h.events.find((e): e is Started => e.type === 'compaction.started')!;
    expect(started).toMatchObject({ background: true, economics: { decision: 'compact-early', pays: true } });
    expect(started.economics!.savings).toBeGreaterThan(started.economics!.cost);
    expect(started.economics!.reason).toMatch(/^pays: /);
    expect(h.session.events().find((e) => e.type === 'compaction/start')!.data).toMatchObject({ background: true, trigger: 'pressure' });

    // The agent goes on while the summary is written.
    const call = await sum.call(0);
    results.push(await h.step(i++, `ok ${i}`));
    expect(results.at(-1)!.status).toBe('preparing');
    call.resolve(SUMMARY);
    await until(() => h.events.some((e) => e.type === 'compaction.committed'));
    const next = await h.step(i++, `ok ${i}`);
    results.push(next);
    expect(next.status).toBe('committed');
    expect(next.compactions).toHaveLength(1);
    const committed = h.events.find((e): e is Committed => e.type === 'compaction.committed')!;
    expect(committed.background).toBe(true);
    // The floor tail, as an early compaction in the foreground keeps: almost everything goes.
    expect(committed.tokensAfter).toBeLessThan(0.3 * committed.tokensBefore);
    expect(results.every((r) => r.waitedMs === 0 && r.status !== 'waited')).toBe(true);
    expect(sum.calls).toHaveLength(1);
    h.engine.stop();
  });

  it('never commits a summary whose span changed', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: DEFAULTS });
    openTurn(h);
    const results: AfterStepResult[] = [];
    await smallSteps(h, results);
    expect(h.events.find((e): e is Started => e.type === 'compaction.started')!.economics?.decision).toBe('compact-early');
    const call = await sum.call(0);
    // Another writer replaces a tool result inside the span (the engine's own pruner never would).
    replaceFirstToolResult(h);
    call.resolve(SUMMARY);
    await until(() => h.events.some((e) => e.type === 'compaction.failed'));
    expect(h.session.events().some((e) => e.type === 'compaction/summary')).toBe(false);
    expect(
      h.session
        .events()
        .filter((e) => e.type === 'compaction/end')
        .at(-1)!.data,
    ).toMatchObject({ error: { code: 'changed' } });
    expect(h.events.find((e) => e.type === 'compaction.failed')).toMatchObject({ background: true, error: { code: 'changed' } });
    expect(h.session.lock.held).toBe(false);
    h.engine.stop();
  });

  it('a long session with a slow summarizer: no request over the window, every call keeps its result', async () => {
    // Each summary takes a few ms of real time: runs span several agent steps, as with a real model.
    let calls = 0;
    const slow = {
      name: 'slow',
      summarize: (): Promise<SummaryResult> => {
        calls++;
        return new Promise((r) => setTimeout(() => r(SUMMARY), 15));
      },
    };
    const h = harness({ summarizer: slow, config: DEFAULTS });
    openTurn(h);
    const window = 6000;
    let peak = 0;
    const statuses = new Set<string>();
    for (let i = 0; i < 160; i++) {
      if (i > 0 && i % 40 === 0) {
        h.writer.endTurn();
        openTurn(h, `Next, module ${i}.`);
      }
      h.writer.startStep();
      h.writer.request({ provider: 'test', model: 'small', systemPrompt: 'You are a coding agent. Keep answers short.', tools: [], maxTokens: 500 });
      // The request about to be sent: the surface as measured now.
      peak = Math.max(peak, h.engine.measure().totalTokens);
      h.writer.assistant({ text: `step ${i}`, toolCalls: [{ id: `c${i}`, name: 'bash', arguments: JSON.stringify({ command: `ls dir${i}` }) }] });
      h.writer.toolResult(`c${i}`, i % 7 === 3 ? `file${i}.ts\n`.repeat(120) : `ok ${i}\n`.repeat(1 + (i % 5) * 10), { toolName: 'bash' });
      const r = await h.engine.afterStep();
      statuses.add(r.status);
      h.writer.endStep();
      await new Promise((res) => setTimeout(res, 2));
    }
    h.writer.endTurn();
    expect(calls).toBeGreaterThan(1);
    expect(statuses.has('preparing')).toBe(true);
    expect(peak).toBeGreaterThan(window / 2);
    expect(peak).toBeLessThanOrEqual(window);
    expect(openAIMessageProblems(h.session.deriveMessages())).toEqual([]);
    const types = h.types();
    expect(types.filter((t) => t === 'compaction/start').length - types.filter((t) => t === 'compaction/end').length).toBeLessThanOrEqual(1);
    expect(h.events.some((e) => e.type === 'compaction.started' && e.background && e.economics?.decision === 'compact-early')).toBe(true);
    h.engine.stop();
  });
});
