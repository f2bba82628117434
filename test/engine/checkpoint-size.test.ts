/**
 * Checkpoints sized to the window (docs/reliability.md): in a 4k window a compaction at the threshold must
 * free at least half of the threshold, whatever the user wrote. Worst case on purpose: long user
 * messages (their words are what a checkpoint keeps first), and a summarizer that writes all of
 * its cap (the ledger appended as the OpenAI summarizer does).
 */
import { describe, expect, it } from 'vitest';
import { createCompactionEngine } from '../../src/engine/facade';
import { getTokenizer } from '../../src/services/metering';
import { withCheckpointLedger, type Summarizer } from '../../src/services/summarizing';
import { Session } from '../../src/session/session';
import { SessionWriter } from '../../src/session/writer';

const WINDOW = 4096;
const MAX_TOKENS = 256;

/** Writes exactly as many tokens as the request's cap allows (o200k words). */
function fullCapSummarizer(): Summarizer {
  const tokenizer = getTokenizer('o200k_base');
  return {
    name: 'full-cap',
    async summarize(req) {
      let words = Math.max(1, req.maxTokens);
      let text = Array.from({ length: words }, (_, i) => `fact${i}`).join(' ');
      while (tokenizer.count(text) > req.maxTokens && words > 1) {
        words = Math.floor(words * 0.9);
        text = Array.from({ length: words }, (_, i) => `fact${i}`).join(' ');
      }
      return { text, requests: 1 };
    },
  };
}

const instruction = (t: number) =>
  `Turn ${t}: please refactor the parser module so that every token kind has its own handler, keep the public API exactly as it is, ` +
  `add tests for the edge cases we discussed (empty input, unterminated strings, nested comments, unicode identifiers), ` +
  `and do not touch the generated files under src/gen. `.repeat(3);

describe('checkpoints sized to the window (docs/reliability.md)', () => {
  it('in a 4k window every compaction frees at least half of the threshold, long user messages and a full summary cap included', async () => {
    const session = Session.inMemory();
    const writer = new SessionWriter(session);
    const engine = createCompactionEngine({
      session,
      models: { 'test/w4k': { contextWindow: WINDOW, maxOutputTokens: MAX_TOKENS } },
      config: { background: false, economics: false },
      summarizer: withCheckpointLedger(fullCapSummarizer()),
    });
    const freed: number[] = [];
    const sizes: number[] = [];
    let threshold = 0;
    for (let t = 0; t < 30; t++) {
      writer.startTurn();
      if (t === 0) writer.request({ provider: 'test', model: 'w4k', systemPrompt: 'You are a coding agent.', tools: [], maxTokens: MAX_TOKENS });
      writer.user(instruction(t));
      for (let i = 0; i < 4; i++) {
        writer.startStep();
        writer.request({ provider: 'test', model: 'w4k', systemPrompt: 'You are a coding agent.', tools: [], maxTokens: MAX_TOKENS });
        writer.assistant({
          text: `step ${t}.${i}`,
          toolCalls: [{ id: `c${t}_${i}`, name: 'read_file', arguments: JSON.stringify({ path: `src/parser/part${t}_${i}.ts` }) }],
        });
        writer.toolResult(`c${t}_${i}`, `export const part = ${t * 10 + i};\n`.repeat(12), { toolName: 'read_file' });
        const r = await engine.afterStep();
        writer.endStep();
        if (r.before) threshold = r.before.threshold;
        for (const c of r.compactions) {
          freed.push(c.tokensBefore - c.tokensAfter);
          sizes.push(c.checkpointTokens);
        }
        expect(r.after === undefined || r.after.totalTokens < r.after.threshold).toBe(true);
      }
      writer.endTurn();
    }
    console.log(
      `[checkpoint-size] threshold ${threshold}; compactions ${freed.length}; freed per compaction ${freed.join(', ')}; checkpoint tokens ${sizes.join(', ')}`,
    );
    expect(freed.length).toBeGreaterThan(2);
    for (const f of freed) expect(f).toBeGreaterThanOrEqual(threshold / 2);
    engine.stop();
  });
});
