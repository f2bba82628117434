/**
 * docs/drop-in.md: every request the drop-in sends passes the pressure check first — the first
 * after a reopen (no step of the new process had ended), and a new user message's — and a
 * request that cannot fit the window is not sent: a typed error, its step closed.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BudgetError, Session, withCompaction, type EngineNotification } from '../../../src/index';
import { startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../../src/testing/index';

let server: LocalOpenAIServer;
const isSummary = (body: ChatRequestBody): boolean => {
  const last = body.messages?.at(-1);
  return last?.role === 'user' && typeof last.content === 'string' && last.content.startsWith('You are now acting as a compaction engine');
};
beforeAll(async () => {
  server = await startOpenAIServer({
    scenarios: ({ body }) =>
      isSummary(body) ? { kind: 'reply', content: '## Primary Request and Intent\n- notes\n\n## Current Work\n- notes' } : { kind: 'reply', content: 'Noted.' },
  });
});
afterAll(() => server.close());

const note = (i: number) => `Note ${i}: ` + `the build log says step ${i} passed after a retry of the flaky network test. `.repeat(12);
const client = () => new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });

describe('the drop-in checks every request before it is sent (docs/drop-in.md)', () => {
  it('the first request after a reopen, already above the threshold, is compacted before it leaves', async () => {
    const session = Session.inMemory();
    const roomy = withCompaction(client(), { session, models: { 'local-model': { contextWindow: 32_000 } } });
    const messages = roomy.compaction.messages();
    for (let i = 0; i < 12; i++) {
      messages.push({ role: 'user', content: note(i) });
      messages.push((await roomy.chat.completions.create({ model: 'local-model', messages, max_tokens: 64 })).choices[0]!.message);
    }
    await roomy.compaction.close();
    const size = roomy.compaction.engine.measure().totalTokens;

    // The same conversation, continued by a new wrapper on a window it no longer fits under the threshold of.
    const window = Math.round(size * 1.1);
    const tight = withCompaction(client(), { session, models: { 'local-model': { contextWindow: window } } });
    const seen: EngineNotification[] = [];
    tight.compaction.engine.on((e) => seen.push(e));
    const again = tight.compaction.messages();
    again.push({ role: 'user', content: 'And the last step?' });
    const firstAgent = server.requests.length;
    const reply = await tight.chat.completions.create({ model: 'local-model', messages: again, max_tokens: 64 });
    expect(reply.choices[0]!.message.content).toBe('Noted.');
    const committed = seen.filter((e) => e.type === 'compaction.committed');
    expect(committed.map((e) => e.type === 'compaction.committed' && e.trigger)).toEqual(['pressure']);
    // The agent's request went out once, after the summary: the summary came first.
    const chats = server.requests.slice(firstAgent).filter((r) => r.path === '/v1/chat/completions');
    const kinds = chats.map((r) => (isSummary(r.json as ChatRequestBody) ? 'summary' : 'agent'));
    expect(kinds.filter((k) => k === 'agent')).toHaveLength(1);
    expect(kinds.at(-1)).toBe('agent');
    expect(kinds[0]).toBe('summary');
    const m = tight.compaction.engine.measure();
    expect(m.totalTokens).toBeLessThan(m.threshold!);
    await tight.compaction.close();
  });

  it('a request that cannot fit the window is not sent: BudgetError request-over-window, refused before anything is recorded', async () => {
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: { 'local-model': { contextWindow: 2_000 } } });
    const sent = server.requests.length;
    const err = await ai.chat.completions
      .create({ model: 'local-model', messages: [{ role: 'user', content: note(1).repeat(20) }], max_tokens: 64 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BudgetError);
    expect((err as BudgetError).code).toBe('request-over-window');
    expect((err as Error).message).toMatch(/Nothing was recorded or sent/);
    expect(server.requests.slice(sent).filter((r) => !isSummary(r.json as ChatRequestBody))).toHaveLength(0);
    // Planned, then refused: not a single event written, and the next call starts the conversation afresh.
    expect(session.length).toBe(0);
    const reply = await ai.chat.completions.create({ model: 'local-model', messages: [{ role: 'user', content: 'Short, then.' }], max_tokens: 64 });
    expect(reply.choices[0]!.message.content).toBe('Noted.');
    expect(session.events().filter((e) => e.type === 'user/message')).toHaveLength(1);
    await ai.compaction.close();
  });
});
