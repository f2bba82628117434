/** The local server's llama.cpp modes used by the one-slot tests and bench (docs/local-models.md#one-server-slot-background-summaries-while-the-tools-run): one slot, its prompt cache, /tokenize. */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { startOpenAIServer } from '../../src/testing/openai-server';

describe('local server: llama.cpp slots and /tokenize', () => {
  it('with one slot, a second request waits for the first and evaluates only what its prompt adds', async () => {
    const server = await startOpenAIServer({ slots: 1, scenarios: () => ({ kind: 'reply', content: 'ok', delayMs: 150 }) });
    try {
      const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
      const first = [{ role: 'user' as const, content: 'x'.repeat(400) }];
      await client.chat.completions.create({ model: 'm', messages: first });
      const grown = [...first, { role: 'assistant' as const, content: 'ok' }, { role: 'user' as const, content: 'more' }];
      await Promise.all([
        client.chat.completions.create({ model: 'm', messages: grown }),
        client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'other' }] }),
      ]);
      const [a, b, c] = server.requests;
      expect(a!.evaluatedTokens).toBeGreaterThan(100);
      expect(b!.evaluatedTokens).toBeLessThan(20); // the cached prefix is not evaluated again
      expect(c!.queuedMs).toBeGreaterThanOrEqual(120); // waited for b's slot
      expect(c!.evaluatedTokens).toBeGreaterThan(0);
    } finally {
      await server.close();
    }
  });

  it('serves /tokenize only when asked to', async () => {
    const on = await startOpenAIServer({ tokenize: true });
    const off = await startOpenAIServer();
    try {
      const r = await fetch(`${on.url}/tokenize`, { method: 'POST', body: JSON.stringify({ content: 'abcdefgh!' }) });
      expect(await r.json()).toMatchObject({ count: 3 });
      const v = await fetch(`${on.url}/tokenize`, { method: 'POST', body: JSON.stringify({ model: 'm', prompt: 'abcd' }) });
      expect(await v.json()).toMatchObject({ count: 1 });
      expect((await fetch(`${off.url}/tokenize`, { method: 'POST', body: '{}' })).status).toBe(404);
    } finally {
      await on.close();
      await off.close();
    }
  });
});
