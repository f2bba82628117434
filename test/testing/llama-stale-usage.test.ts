/**
 * docs/local-models.md#counts-the-tokenizer-is-not-ours, reproduced with the local server: a background summary commits while the
 * agent's own request is in flight. That request's usage counts the longer, pre-commit
 * conversation (its request/header came before the commit), so it must not anchor the
 * compacted surface: the meter's figure before each request stays close to what the provider
 * then counts, and no tiny follow-up compaction is started by an over-high figure.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCompactionEngine, Session, SessionWriter, type CompactionRecord } from '../../src/index';
import { startOpenAIServer, type LocalOpenAIServer } from '../../src/testing/openai-server';
import { randomText } from '../helpers/random-text';

const WORDS = 'the quick brown fox jumps over lazy dogs while agents read files and write summaries of long build logs'.split(' ');
function prose(words: number, seed: number): string {
  let x = seed;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out.push(WORDS[x % WORDS.length]!);
  }
  return out.join(' ');
}

let server: LocalOpenAIServer;
beforeAll(async () => {
  server = await startOpenAIServer();
  // Summaries (streamed) answer at once; the agent's own requests after a while, so a
  // background summary started at one step commits while the next request is open.
  server.setHandler(async (req) =>
    req.body.stream ? { kind: 'reply', content: `Summary ${randomText(40, 'abcdefgh ')}` } : { kind: 'reply', content: 'ok', delayMs: 250 },
  );
});
afterAll(() => server.close());

describe('usage of a request answered after a background commit (docs/local-models.md#counts-the-tokenizer-is-not-ours)', () => {
  it('never anchors the compacted surface to the pre-commit prompt', async () => {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
    const model = 'qwen-tiny';
    const engine = createCompactionEngine({
      session,
      client,
      models: { [`local/${model}`]: { contextWindow: 8192, maxOutputTokens: 512 } },
      config: { maxTokens: 512, economics: false },
    });
    const compactions: CompactionRecord[] = [];
    engine.on((e) => {
      if (e.type === 'compaction.committed') compactions.push(e);
    });
    const system = 'You are a helpful agent.';
    w.system(system);
    const errors: { turn: number; measured: number; provider: number }[] = [];
    try {
      for (let turn = 0; turn < 24; turn++) {
        w.startTurn();
        w.user(prose(400, turn + 1));
        w.startStep();
        const measured = engine.measure().totalTokens;
        w.request({ provider: 'local', model, systemPrompt: system, tools: [], maxTokens: 512 });
        const completion = await client.chat.completions.create({ model, messages: [...session.deriveMessages()], max_tokens: 512 });
        const provider = completion.usage!.prompt_tokens;
        errors.push({ turn, measured, provider });
        w.assistantFromCompletion(completion.choices[0]!.message, {
          usage: completion.usage ?? null,
          provider: 'local',
          model,
          finishReason: completion.choices[0]!.finish_reason,
        });
        await engine.afterStep();
        w.endStep();
        w.endTurn('completed');
      }
    } finally {
      engine.stop();
    }
    // Background commits landed while a request was open (the case under test).
    expect(compactions.length).toBeGreaterThan(0);
    // Before each request, the meter is within 15% of what the provider counts for it (after
    // the first report: before it, our tokenizer's figure is not calibrated to this server).
    const worst = errors.slice(2).map((e) => ({ ...e, off: (e.measured - e.provider) / e.provider }));
    if (process.env.DEBUG_STALE)
      console.log(
        worst.map((e) => `${e.turn}:${e.measured}/${e.provider}`).join(' '),
        compactions.map((c) => c.spanTokens),
      );
    const bad = worst.filter((e) => Math.abs(e.off) > 0.15);
    expect(bad).toEqual([]);
    // Once calibrated (a few clean steps), within 5% on every request, the ones after a commit included.
    expect(worst.filter((e) => e.turn >= 6 && Math.abs(e.off) > 0.05)).toEqual([]);
    // No follow-up compaction of a span far smaller than the first: over-high figures start none.
    const first = compactions[0]!.spanTokens;
    expect(compactions.filter((c) => c.spanTokens < first / 4)).toEqual([]);
  });
});
