/**
 * A retained tail that leaves a small span above it (docs/spec.md#10-where-the-usual-way-falls-short-and-what-xcompact-does-instead: "small spans always fail the
 * shrink check"): the checkpoint carries the user's words and a summary of up to the cap, so a
 * span not much larger than that cannot shrink. Selection predicts it and widens the span toward
 * the tail (a shorter retained tail) instead of calling the summarizer only to fail the check,
 * which, three times over, opened the breaker and let the conversation grow past the window.
 */
import { describe, expect, it } from 'vitest';
import { createCompactionEngine, Session, SessionWriter } from '../../src/index';

const MODEL = { provider: 'p', model: 'm' };
const SYSTEM = 'You are a careful coding agent.';
const WINDOW = 8_192;

async function run(config: Record<string, unknown>, turns = 80, lines = 24) {
  const session = Session.inMemory();
  const engine = createCompactionEngine({
    session,
    models: { 'p/m': { contextWindow: WINDOW, maxOutputTokens: 512 } },
    config: { economics: false, ...config },
  });
  const failed: string[] = [];
  let committed = 0;
  engine.on((e) => {
    if (e.type === 'compaction.failed') failed.push(e.error.code);
    if (e.type === 'compaction.committed') committed++;
  });
  const w = new SessionWriter(session);
  w.system(SYSTEM);
  let peak = 0;
  const statuses = new Set<string>();
  for (let i = 0; i < turns; i++) {
    w.startTurn();
    w.user(`Request ${i}: rename helper ${i} in src/helper-${i}.ts to keep${i}, and keep the tests green`);
    w.startStep();
    w.request({ ...MODEL, systemPrompt: SYSTEM, tools: [] });
    const id = `call-${i}`;
    w.assistant({ toolCalls: [{ id, name: 'read', arguments: JSON.stringify({ path: `src/helper-${i}.ts` }) }] });
    w.toolResult(id, Array.from({ length: lines }, (_, k) => `export const value${i}_${k} = ${i * 100 + k};`).join('\n'), { toolName: 'read' });
    statuses.add((await engine.afterStep()).status);
    w.endStep();
    peak = Math.max(peak, engine.measure().totalTokens);
    w.startStep();
    w.request({ ...MODEL, systemPrompt: SYSTEM, tools: [] });
    w.assistant({ text: `Renamed helper ${i}.` });
    statuses.add((await engine.afterStep()).status);
    w.endStep();
    peak = Math.max(peak, engine.measure().totalTokens);
    w.endTurn('completed');
  }
  const threshold = engine.measure().threshold!;
  engine.stop();
  return { failed, committed, peak, threshold, statuses };
}

describe('a retained tail that leaves a small span', () => {
  for (const background of [false, true]) {
    it(`compacts without failing the shrink check and never pauses (background ${background})`, async () => {
      // A retained tail of 5,000 under a threshold of 6,553, each read ~1,000 tokens: before, the
      // summary of what was left above the tail (mostly earlier checkpoints) freed too little,
      // twice, then the breaker paused compaction and the request grew to 30,904 tokens.
      const r = await run({ retainTokens: 5_000, background }, 80, 100);
      expect(r.committed).toBeGreaterThanOrEqual(20);
      expect(r.failed).toEqual([]);
      expect(r.statuses.has('paused')).toBe(false);
      expect(r.statuses.has('failed')).toBe(false);
      expect(r.peak).toBeLessThan(r.threshold);
    });
  }
});
