/**
 * AiSdkSummarizer over `@ai-sdk/openai-compatible` and the local server: the request replays
 * the system prompt and tools first, then the span (tool calls paired with their results),
 * then the instruction; bad replies become the SummarizerError codes the engine relies on.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AiSdkSummarizer } from '../../../src/adapters/ai-sdk/index';
import type { SurfaceEvent } from '../../../src/session/events';
import { Session } from '../../../src/session/session';
import { SessionWriter } from '../../../src/session/writer';
import { SummarizerError, type SummaryRequest } from '../../../src/services/summarizing';
import { startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../../src/testing/index';
import { openAIMessageProblems } from '../../helpers/openai-validator';

let server: LocalOpenAIServer;
let summarizer: AiSdkSummarizer;
beforeAll(async () => {
  server = await startOpenAIServer({ defaultModel: 'm' });
  const provider = createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'test', includeUsage: true });
  summarizer = new AiSdkSummarizer({ model: provider.chatModel('m') });
});
afterAll(() => server.close());

const TOOL = {
  type: 'function',
  function: { name: 'grep', description: 'Search.', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } },
};

function request(): SummaryRequest {
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  w.system('You are a coder.');
  w.startTurn();
  w.user('find the retry loop');
  w.startStep();
  w.request({ provider: 'local', model: 'm', tools: [TOOL] });
  w.assistant({ toolCalls: [{ id: 'g1', name: 'grep', arguments: '{"q":"retry"}' }] });
  w.toolResult('g1', 'src/http.ts:12: for (let attempt = 0; attempt < 3; attempt++)', { toolName: 'grep' });
  const events = [...session.surface.seqs()].map((s) => session.event(s) as SurfaceEvent);
  const messages = session.deriveMessages();
  return {
    system: messages[0],
    tools: [TOOL],
    context: [],
    messages: messages.slice(1),
    events: events.slice(1),
    target: { provider: 'local', model: 'm' },
    maxTokens: 256,
    countTokens: (t) => Math.ceil(t.length / 4),
  };
}

const fails = async (code: string) => {
  const err = await summarizer.summarize(request(), new AbortController().signal).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(SummarizerError);
  expect((err as SummarizerError).code).toBe(code);
};

describe('AiSdkSummarizer', () => {
  it('sends system, tools, the span and the instruction; returns the text with usage', async () => {
    server.enqueue({
      kind: 'reply',
      content: '  The retry loop is in src/http.ts.  ',
      usage: { prompt_tokens: 300, completion_tokens: 9, cached_tokens: 250 },
    });
    const at = server.requests.length;
    const result = await summarizer.summarize(request(), new AbortController().signal);
    expect(result).toMatchObject({
      text: 'The retry loop is in src/http.ts.',
      provider: 'local',
      requests: 1,
      usage: { promptTokens: 300, completionTokens: 9, cachedTokens: 250 },
    });
    const body = server.requests[at]!.json as ChatRequestBody;
    expect(body.messages!.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'user']);
    expect(body.messages![0]).toEqual({ role: 'system', content: 'You are a coder.' });
    expect(openAIMessageProblems(body.messages!)).toEqual([]);
    expect((body.tools as Array<{ function: { name: string } }>).map((t) => t.function.name)).toEqual(['grep']);
    expect(body['max_tokens']).toBe(256);
  });

  it('sends the messages it is given, not the events: a bounding wrapper cuts the texts and keeps the events whole', async () => {
    server.enqueue({ kind: 'reply', content: 'The retry loop is in src/http.ts.' });
    const at = server.requests.length;
    const r = request();
    const cut = r.messages.map((m) => (m.role === 'tool' ? { ...m, content: 'src/http.ts:12: […] 40 tokens cut […]' } : m));
    await summarizer.summarize({ ...r, messages: cut }, new AbortController().signal);
    const body = server.requests[at]!.json as ChatRequestBody;
    expect(body.messages!.find((m) => m.role === 'tool')!.content).toBe('src/http.ts:12: […] 40 tokens cut […]');
    expect(body.messages!.find((m) => m.role === 'assistant')!['tool_calls']).toEqual([
      { id: 'g1', type: 'function', function: { name: 'grep', arguments: '{"q":"retry"}' } },
    ]);
  });

  it('a reply cut at max tokens: summary-truncated', async () => {
    server.enqueue({ kind: 'reply', content: 'The retry loop is', finishReason: 'length' });
    await fails('summary-truncated');
  });

  it('only tool calls: summary-tool-calls (the tool is never run)', async () => {
    server.enqueue({ kind: 'reply', toolCalls: [{ id: 'x', name: 'grep', arguments: '{"q":"x"}' }] });
    await fails('summary-tool-calls');
  });

  it('whitespace only: summary-empty', async () => {
    server.enqueue({ kind: 'reply', content: '   ' });
    await fails('summary-empty');
  });

  it('an HTTP error: summary-request with the SDK error as cause', async () => {
    server.enqueue({ kind: 'status', status: 503, body: { error: { message: 'overloaded', type: 'server_error' } } });
    await fails('summary-request');
  });

  it('an aborted signal: summary-cancelled, nothing sent', async () => {
    const c = new AbortController();
    c.abort();
    const at = server.requests.length;
    const err = await summarizer.summarize(request(), c.signal).catch((e: unknown) => e);
    expect((err as SummarizerError).code).toBe('summary-cancelled');
    expect(server.requests.length).toBe(at);
  });
});
