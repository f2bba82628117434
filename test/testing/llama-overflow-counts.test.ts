/**
 * docs/local-models.md#the-server-tokenizer-the-model-servers-own-counts, reproduced with the local server as llama.cpp (-c 8192) with a tokenizer that
 * splits digits (Qwen's): o200k prices a digit-heavy message at a third of what the server counts.
 * The overflow error's own count (n_prompt_tokens) anchors the meter and calibrates at once, so
 * recovery sees that the newest message alone cannot fit and declines at once (`stuck`) instead
 * of summarizing the history and retrying a request that overflows again.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCompactionEngine, Session, SessionWriter } from '../../src/index';
import { estimatePromptTokens, startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../src/testing/openai-server';

/** The server's count: bytes / 4, except that every digit is a token of its own (a Qwen-style tokenizer). */
function qwenCount(body: ChatRequestBody): number {
  const digits = (JSON.stringify(body.messages ?? []).match(/\d/g) ?? []).length;
  return estimatePromptTokens(body) + Math.round(digits * 0.75);
}

let server: LocalOpenAIServer;
beforeAll(async () => {
  server = await startOpenAIServer({ contextWindow: 8192 });
  server.setHandler((req) => ({
    kind: 'reply',
    content: req.body.stream ? 'A summary of the talk so far.' : 'Noted.',
    usage: { prompt_tokens: qwenCount(req.body) },
  }));
});
afterAll(() => server.close());

describe('overflow counts for a local model (docs/local-models.md#the-server-tokenizer-the-model-servers-own-counts)', () => {
  it("a newest message that alone overflows is declined at once, on the error's own count", async () => {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
    const model = 'qwen-tiny';
    const engine = createCompactionEngine({
      session,
      client,
      models: { [`local/${model}`]: { contextWindow: 8192, maxOutputTokens: 512 } },
      config: { maxTokens: 512, economics: false, background: false },
    });
    const system = 'You are a helpful agent.';
    w.system(system);
    const send = () => client.chat.completions.create({ model, messages: [...session.deriveMessages()], max_tokens: 512 });
    try {
      for (let t = 0; t < 4; t++) {
        w.startTurn();
        w.user(`Tell me about topic ${t}. ${'Some words about the build and its tests. '.repeat(40)}`);
        w.startStep();
        w.request({ provider: 'local', model, systemPrompt: system, tools: [] });
        const c = await send();
        w.assistantFromCompletion(c.choices[0]!.message, { usage: c.usage ?? null, provider: 'local', model, finishReason: c.choices[0]!.finish_reason });
        await engine.afterStep();
        w.endStep();
        w.endTurn('completed');
      }
      // 9,000 digits: ~3,000 tokens for o200k, ~9,000 for the server: over its window alone.
      w.startTurn();
      w.user(Array.from({ length: 900 }, (_, i) => String(1_000_000_000 + i * 7919).slice(0, 10)).join(''));
      w.startStep();
      w.request({ provider: 'local', model, systemPrompt: system, tools: [] });
      const before = engine.measure().totalTokens;
      expect(before).toBeLessThan(8192 - 512); // we think it fits: that is the trap
      const err = await send().catch((e: unknown) => e);
      const requestsBefore = server.requests.length;
      const action = await engine.onRequestError(err);
      expect(action).toMatchObject({ kind: 'fail', reason: 'stuck' });
      expect(server.requests.length, 'no summary was requested').toBe(requestsBefore);
      expect(session.events().some((e) => e.type === 'compaction/start')).toBe(false);
      // The meter now counts the request as the provider did.
      expect(engine.measure().totalTokens).toBeGreaterThan(8192);
    } finally {
      engine.stop();
    }
  });
});
