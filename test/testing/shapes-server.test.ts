/**
 * The local server's Responses and Anthropic Messages routes, through the real SDKs: the same
 * scenarios answer them, a window rejects an over-long prompt in each shape's own overflow body
 * (Anthropic's wording with its counts, llama.cpp's on /v1/responses), count_tokens answers the
 * estimate, and a request of either shape is read as the chat body it stands for.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatBodyOf, estimatePromptTokens, startOpenAIServer, type LocalOpenAIServer } from '../../src/testing/index';
import { classifyRequestError } from '../../src/services/overflow';
import { errorView } from '../../src/adapters/anthropic/client';

let server: LocalOpenAIServer;
beforeAll(async () => {
  server = await startOpenAIServer({ contextWindow: 200 });
});
afterAll(async () => {
  await server.close();
});

describe('test server: /v1/responses and /v1/messages', () => {
  it('answers each shape from the scenario queue, tool calls and usage included', async () => {
    server.enqueue(
      { kind: 'reply', toolCalls: [{ id: 'c1', name: 'read_file', arguments: '{"path":"a"}' }] },
      { kind: 'reply', content: 'hi', usage: { prompt_tokens: 9, completion_tokens: 1 } },
    );
    const r = await new OpenAI({ baseURL: server.baseURL, apiKey: 't', maxRetries: 0 }).responses.create({ model: 'm', input: 'read a' });
    expect(r.output.map((o) => o.type)).toEqual(['function_call']);
    expect(r.usage?.input_tokens).toBeGreaterThan(0);
    const m = await new Anthropic({ baseURL: server.url, apiKey: 't', maxRetries: 0 }).messages.create({
      model: 'm',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'x' }],
    });
    expect(m.content).toEqual([{ type: 'text', text: 'hi' }]);
    expect(m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0)).toBe(9);
  });

  it("rejects a prompt over the window in each shape's own words, classified with the counts", async () => {
    const long = 'word '.repeat(400);
    const a = await new Anthropic({ baseURL: server.url, apiKey: 't', maxRetries: 0 }).messages
      .create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: long }] })
      .catch((e: unknown) => e);
    const expected = estimatePromptTokens(chatBodyOf('messages', { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: long }] }));
    expect(classifyRequestError(errorView(a))).toMatchObject({ kind: 'context-overflow', provider: 'anthropic', promptTokens: expected, limitTokens: 200 });
    const o = await new OpenAI({ baseURL: server.baseURL, apiKey: 't', maxRetries: 0 }).responses.create({ model: 'm', input: long }).catch((e: unknown) => e);
    expect(classifyRequestError(o)).toMatchObject({ kind: 'context-overflow', provider: 'llama.cpp', limitTokens: 200 });
  });

  it('count_tokens answers the prompt estimate', async () => {
    const body = { model: 'm', system: 'S', messages: [{ role: 'user', content: 'hello there' }] };
    const n = await new Anthropic({ baseURL: server.url, apiKey: 't', maxRetries: 0 }).messages.countTokens(body as never);
    expect(n.input_tokens).toBe(estimatePromptTokens(chatBodyOf('messages', body)));
  });

  it('reads each shape as the chat body it stands for', () => {
    expect(
      chatBodyOf('responses', {
        model: 'm',
        instructions: 'S',
        input: [
          { role: 'user', content: 'u' },
          { type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' },
          { type: 'function_call_output', call_id: 'c', output: 'r' },
        ],
      }).messages,
    ).toEqual([
      { role: 'system', content: 'S' },
      { role: 'user', content: 'u' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c', content: 'r' },
    ]);
    expect(
      chatBodyOf('messages', {
        model: 'm',
        messages: [
          { role: 'assistant', content: [{ type: 'tool_use', id: 'c', name: 'f', input: { a: 1 } }] },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'c', content: 'r' },
              { type: 'text', text: 'next' },
            ],
          },
        ],
      }).messages,
    ).toEqual([
      { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
      { role: 'tool', tool_call_id: 'c', content: 'r' },
      { role: 'user', content: 'next' },
    ]);
  });
});
