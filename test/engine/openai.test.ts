/**
 * The engine with its default summarizer over real HTTP: what the provider receives.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Session } from '../../src/session/session';
import { SessionWriter } from '../../src/session/writer';
import { createCompactionEngine } from '../../src/engine/facade';
import { startOpenAIServer, type LocalOpenAIServer } from '../../src/testing/openai-server';

let server: LocalOpenAIServer;
let client: OpenAI;
beforeAll(async () => {
  server = await startOpenAIServer();
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
});
afterAll(async () => server.close());

async function compactOnce(provider: string, model: string): Promise<Record<string, unknown>> {
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  const engine = createCompactionEngine({ session, client, models: { [`${provider}/${model}`]: { contextWindow: 50_000, maxOutputTokens: 2000 } } });
  w.system('You are a coding agent.');
  w.startTurn();
  w.request({ provider, model, tools: [] });
  w.user('Please read the files.');
  for (let i = 0; i < 3; i++) {
    w.startStep();
    w.request({ provider, model, tools: [] });
    w.assistant({ text: `reading ${i}`, toolCalls: [{ id: `c${i}`, name: 'read', arguments: `{"path":"f${i}.ts"}` }] });
    w.toolResult(`c${i}`, `content of f${i}.ts `.repeat(50));
    w.endStep();
  }
  w.endTurn();
  const before = server.requests.length;
  server.enqueue({ kind: 'reply', content: '## Primary Request and Intent\n- read the files' });
  const record = await engine.compactNow();
  engine.stop();
  expect(record).not.toBeNull();
  expect(server.requests.length).toBe(before + 1);
  return server.requests[before]!.json as Record<string, unknown>;
}

describe('the default summarizer, driven by the engine', () => {
  it('sends max_tokens to an ordinary model, capped at its output limit', async () => {
    const body = await compactOnce('deepseek', 'deepseek-chat');
    // The cap, less what the appended checkpoint ledger (the files read) takes of it.
    expect(body.max_tokens).toBeLessThan(2000);
    expect(body.max_tokens).toBeGreaterThan(1500);
    expect(body).not.toHaveProperty('max_completion_tokens');
  });

  it('sends max_completion_tokens to OpenAI reasoning models (they reject max_tokens)', async () => {
    const body = await compactOnce('openai', 'o3');
    expect(body.max_completion_tokens).toBeLessThan(2000);
    expect(body.max_completion_tokens).toBeGreaterThan(1500);
    expect(body).not.toHaveProperty('max_tokens');
  });
});
