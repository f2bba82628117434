/**
 * docs/local-models.md#replies-cut-inside-a-tool-call (docs/local-models.md#replies-cut-inside-a-tool-call had it wrong): llama-server answers a reply the context cuts
 * inside a tool call 200, finish reason `length`, with the call's arguments cut (`"{"`); the 500
 * "Failed to parse tool call arguments as JSON" is its answer to every LATER request whose
 * history holds that call. So the 500 is a broken history (not a truncated reply to retry with
 * more max_tokens), and a request xcompact derives never carries the broken call: it is recorded
 * as it came and sent with `{}` arguments, paired with the agent's own error result.
 */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { Session } from '../../src/session/session';
import { isCutToolCall } from '../../src/session/derive';
import { classifyRequestError } from '../../src/services/overflow';
import { withCompaction } from '../../src/adapters/drop-in';
import { OTHER_ERROR_BODIES, startOpenAIServer } from '../../src/testing/openai-server';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';

const tools: ChatCompletionTool[] = [
  { type: 'function', function: { name: 'read_file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
];

describe("llama.cpp's 500 for a history that holds a cut tool call", () => {
  it('is classified as a broken history, not a truncated reply or a server fault', async () => {
    const server = await startOpenAIServer({ scenarios: [{ kind: 'status', ...OTHER_ERROR_BODIES.llamaBrokenToolHistory }] });
    try {
      const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
      const err = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
      expect(classifyRequestError(err)).toMatchObject({ kind: 'broken-history', status: 500 });
    } finally {
      await server.close();
    }
  });

  it('the simulated llama server cuts a reply inside its tool call (200, length) and refuses a history that holds it (500)', async () => {
    const server = await startOpenAIServer({
      contextWindow: 4096,
      scenarios: [{ kind: 'reply', toolCalls: [{ id: 'c1', name: 'read_file', arguments: '{"path":"src/parser.ts"}' }] }],
    });
    try {
      const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
      const reply = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'read it' }], tools, max_tokens: 4 });
      const choice = reply.choices[0]!;
      expect(choice.finish_reason).toBe('length');
      const call = choice.message.tool_calls![0]!;
      expect(call.type === 'function' && isCutToolCall(call.function.arguments)).toBe(true);
      const err = await client.chat.completions
        .create({
          model: 'm',
          tools,
          messages: [{ role: 'user', content: 'read it' }, choice.message, { role: 'tool', tool_call_id: call.id, content: 'error: bad arguments' }],
        })
        .catch((e: unknown) => e);
      expect(classifyRequestError(err)).toMatchObject({ kind: 'broken-history', status: 500 });
    } finally {
      await server.close();
    }
  });

  it('the drop-in records the cut call as it came and never sends it: the next request is valid, the session goes on', async () => {
    const server = await startOpenAIServer({
      contextWindow: 4096,
      scenarios: [
        { kind: 'reply', toolCalls: [{ id: 'c1', name: 'read_file', arguments: '{"path":"src/parser.ts"}' }] },
        { kind: 'reply', content: 'done' },
      ],
    });
    try {
      const session = Session.inMemory();
      const client = withCompaction(new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }), {
        session,
        models: { m: { contextWindow: 4096 } },
      });
      const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'read it' }];
      const first = await client.chat.completions.create({ model: 'm', messages, tools, max_tokens: 4 });
      const message = first.choices[0]!.message;
      messages.push(message);
      const call = message.tool_calls![0]!;
      const args = call.type === 'function' ? call.function.arguments : '';
      expect(isCutToolCall(args)).toBe(true);
      messages.push({ role: 'tool', tool_call_id: call.id, content: `error: the arguments are not JSON: ${args}` });
      const second = await client.chat.completions.create({ model: 'm', messages, tools, max_tokens: 64 });
      expect(second.choices[0]!.message.content).toBe('done');
      // The log keeps what the model sent; the wire got a valid call, paired with its error result.
      const recorded = [...session.surface.seqs()].map((q) => session.event(q)).find((e) => e.type === 'assistant/message');
      expect(recorded?.type === 'assistant/message' && recorded.data.content.find((b) => b.type === 'tool-call')).toMatchObject({ arguments: args });
      const sent = (
        server.requests[1]!.json as { messages: Array<{ role: string; tool_calls?: Array<{ function: { arguments: string } }>; content?: string }> }
      ).messages;
      expect(sent.find((m) => m.role === 'assistant')!.tool_calls![0]!.function.arguments).toBe('{}');
      expect(sent.find((m) => m.role === 'tool')!.content).toContain('not JSON');
      // Resumed, the caller's messages are the recorded ones: they continue the conversation.
      expect(client.compaction.messages().find((m) => m.role === 'assistant' && 'tool_calls' in m && m.tool_calls)).toMatchObject({
        tool_calls: [{ function: { arguments: args } }],
      });
      await client.compaction.close();
    } finally {
      await server.close();
    }
  });
});
