/**
 * The session layer takes provider replies by structure, not by SDK type: the `openai` SDK's
 * own objects must still be accepted as they are (checked by the type checker, `npm run
 * typecheck`, and at run time), while src/session imports nothing from the SDK in the writer.
 */
import { readFileSync } from 'node:fs';
import type { ChatCompletion, ChatCompletionMessage, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { CompletionUsage as OpenAICompletionUsage } from 'openai/resources/completions';
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  Session,
  SessionRuleError,
  SessionWriter,
  usageFromOpenAI,
  type CompletionMessage,
  type CompletionUsage,
  type RequestEnvelope,
} from '../../src/session/index';

describe('writer types', () => {
  it('an openai ChatCompletionMessage, CompletionUsage and ChatCompletionTool[] are assignable', () => {
    expectTypeOf<ChatCompletionMessage>().toExtend<CompletionMessage>();
    expectTypeOf<OpenAICompletionUsage>().toExtend<CompletionUsage>();
    expectTypeOf<ChatCompletionTool[]>().toExtend<NonNullable<RequestEnvelope['tools']>>();
    expectTypeOf<SessionWriter['assistantFromCompletion']>().parameter(0).toEqualTypeOf<CompletionMessage>();
  });

  it('records an SDK-typed completion as it is', () => {
    const completion: ChatCompletion = {
      id: 'cmpl-1',
      object: 'chat.completion',
      created: 0,
      model: 'gpt-test',
      choices: [
        {
          index: 0,
          finish_reason: 'tool_calls',
          logprobs: null,
          message: {
            role: 'assistant',
            content: 'reading',
            refusal: null,
            tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read', arguments: '{"path":"a"}' } }],
          },
        },
      ],
      usage: { prompt_tokens: 50, completion_tokens: 7, total_tokens: 57, prompt_tokens_details: { cached_tokens: 10 } },
    };
    const tools: ChatCompletionTool[] = [{ type: 'function', function: { name: 'read', parameters: { type: 'object' } } }];
    const s = Session.inMemory();
    const w = new SessionWriter(s);
    w.request({ provider: 'openai', model: completion.model, tools });
    w.user('go');
    const choice = completion.choices[0]!;
    const e = w.assistantFromCompletion(choice.message, { usage: completion.usage ?? null, model: completion.model, finishReason: choice.finish_reason });
    expect(e.data).toEqual({
      content: [
        { type: 'text', text: 'reading' },
        { type: 'tool-call', id: 'call_1', name: 'read', arguments: '{"path":"a"}' },
      ],
      model: 'gpt-test',
      usage: { promptTokens: 50, completionTokens: 7, cachedTokens: 10 },
      finishReason: 'tool_calls',
    });
    expect(usageFromOpenAI(completion.usage!)).toEqual(e.data.usage);
  });

  it('a custom (non-function) tool call of the SDK is refused, and nothing is written', () => {
    const message: ChatCompletionMessage = {
      role: 'assistant',
      content: null,
      refusal: null,
      tool_calls: [{ id: 'call_c', type: 'custom', custom: { name: 'grammar', input: 'x' } }],
    };
    const s = Session.inMemory();
    s.append({ type: 'user/message', data: { content: [{ type: 'text', text: 'go' }] }, surfaceOp: 'append' });
    expect(() => new SessionWriter(s).assistantFromCompletion(message)).toThrow(SessionRuleError);
    expect(s.length).toBe(1);
  });

  it('the writer imports no provider SDK', () => {
    const source = readFileSync(new URL('../../src/session/writer.ts', import.meta.url), 'utf8');
    expect(source).not.toMatch(/from ['"]openai/);
  });
});
