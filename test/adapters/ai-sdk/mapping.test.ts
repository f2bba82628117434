/**
 * xcompact/ai-sdk and messages it cannot map: a typed error naming the part, nothing
 * written to the session, nothing sent; tool errors are recorded (never dropped); a prompt
 * that does not continue the recorded conversation is refused.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModelV3Prompt } from '@ai-sdk/provider';
import { APICallError, generateText, stepCountIs, streamText, tool, type ModelMessage } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AiSdkAdapterError, createAiSdkCompaction, type AiSdkCompaction } from '../../../src/adapters/ai-sdk/index';
import type { SessionEvent, SurfaceEvent } from '../../../src/session/events';
import { Session } from '../../../src/session/session';
import { SessionWriter } from '../../../src/session/writer';
import { promptOf } from '../../../src/adapters/ai-sdk/convert';
import { JsonlStore } from '../../../src/session/stores/jsonl';
import { XcompactError } from '../../../src/errors';
import { OVERFLOW_BODIES, startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../../src/testing/index';
import { openAIMessageProblems } from '../../helpers/openai-validator';
import { adapterError } from '../../helpers/ai-sdk-script';

let server: LocalOpenAIServer;
beforeAll(async () => {
  server = await startOpenAIServer({ defaultModel: 'm' });
});
afterAll(() => server.close());

function adapter(): AiSdkCompaction {
  const provider = createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'test', includeUsage: true });
  return createAiSdkCompaction({ model: provider.chatModel('m'), session: Session.inMemory(), contextWindow: 32_000, maxOutputTokens: 512 });
}

const expectAdapterError = (p: PromiseLike<unknown>, code: string, names: RegExp) => adapterError(p, code, names);

describe('xcompact/ai-sdk: messages it cannot map', () => {
  it('a PDF in a user message: unmappable-part naming the media type; nothing recorded, nothing sent', async () => {
    const a = adapter();
    const before = server.requests.length;
    const messages: ModelMessage[] = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Summarise this.' },
          { type: 'file', data: Buffer.from('%PDF-1.4'), mediaType: 'application/pdf' },
        ],
      },
    ];
    await expectAdapterError(generateText({ model: a.model, system: 'sys', messages, maxRetries: 0 }), 'unmappable-part', /application\/pdf/);
    expect(a.session.length).toBe(0);
    expect(server.requests.length).toBe(before);
  });

  it('a tool-approval response in a tool message: named, and the recorded conversation is left as it was', async () => {
    const a = adapter();
    server.enqueue({ kind: 'reply', toolCalls: [{ id: 'c1', name: 'look', arguments: '{}' }] });
    const prompt: LanguageModelV3Prompt = [
      { role: 'system', content: 'sys' },
      { role: 'user', content: [{ type: 'text', text: 'go' }] },
    ];
    await a.model.doGenerate({ prompt });
    const recorded = a.session.length;
    const sent = server.requests.length;
    const next: LanguageModelV3Prompt = [
      ...prompt,
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'look', input: {} }] },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 'c1', toolName: 'look', output: { type: 'text', value: 'seen' } },
          { type: 'tool-approval-response', approvalId: 'a1', approved: true },
        ],
      },
    ];
    await expectAdapterError(a.model.doGenerate({ prompt: next }), 'unmappable-part', /"tool-approval-response"/);
    expect(a.session.length).toBe(recorded);
    expect(server.requests.length).toBe(sent);
  });

  it('a tool result holding a non-image file: named, never dropped', async () => {
    const a = adapter();
    server.enqueue({ kind: 'reply', toolCalls: [{ id: 'c2', name: 'fetch', arguments: '{}' }] });
    const prompt: LanguageModelV3Prompt = [{ role: 'user', content: [{ type: 'text', text: 'go' }] }];
    await a.model.doGenerate({ prompt });
    const recorded = a.session.length;
    const next: LanguageModelV3Prompt = [
      ...prompt,
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c2', toolName: 'fetch', input: {} }] },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'c2',
            toolName: 'fetch',
            output: { type: 'content', value: [{ type: 'file-data', data: 'JVBERi0=', mediaType: 'application/pdf' }] },
          },
        ],
      },
    ];
    await expectAdapterError(a.model.doGenerate({ prompt: next }), 'unmappable-part', /"file-data".*tool "fetch"/);
    expect(a.session.length).toBe(recorded);
  });

  // Parts the session has no place for: refused by name before anything is recorded or sent.
  it.each([
    {
      label: 'providerOptions on the system prompt',
      prompt: [
        { role: 'system', content: 'sys', providerOptions: { anthropic: { cacheControl: { type: 'ephemeral' } } } },
        { role: 'user', content: [{ type: 'text', text: 'go' }] },
      ],
      names: /the system prompt/,
    },
    {
      label: 'an image given as a provider file reference',
      prompt: [{ role: 'user', content: [{ type: 'file', mediaType: 'image/png', data: { type: 'reference', reference: { openai: 'file-abc' } } }] }],
      names: /a provider file reference/,
    },
  ])('$label: unmappable-part, nothing recorded, nothing sent', async ({ prompt, names }) => {
    const a = adapter();
    const sent = server.requests.length;
    await expectAdapterError(a.model.doGenerate({ prompt: prompt as unknown as LanguageModelV3Prompt }), 'unmappable-part', names);
    expect(a.session.length).toBe(0);
    expect(server.requests.length).toBe(sent);
  });

  it('providerOptions on a tool output: unmappable-part naming the tool; the recorded conversation is left as it was', async () => {
    const a = adapter();
    server.enqueue({ kind: 'reply', toolCalls: [{ id: 'c3', name: 'look', arguments: '{}' }] });
    const prompt: LanguageModelV3Prompt = [{ role: 'user', content: [{ type: 'text', text: 'go' }] }];
    await a.model.doGenerate({ prompt });
    const recorded = a.session.length;
    const sent = server.requests.length;
    const output = { type: 'text', value: 'seen', providerOptions: { anthropic: { cacheControl: { type: 'ephemeral' } } } };
    const next = [
      ...prompt,
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c3', toolName: 'look', input: {} }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c3', toolName: 'look', output }] },
    ];
    await expectAdapterError(a.model.doGenerate({ prompt: next as unknown as LanguageModelV3Prompt }), 'unmappable-part', /the output of tool "look"/);
    expect(a.session.length).toBe(recorded);
    expect(server.requests.length).toBe(sent);
  });

  it('a provider-executed tool in the model reply: named; the step is closed as error, the log stays consistent', async () => {
    const model = new MockLanguageModelV3({
      provider: 'mock.chat',
      modelId: 'mock',
      doGenerate: async () => ({
        content: [
          { type: 'tool-call', toolCallId: 'p1', toolName: 'web_search', input: '{}', providerExecuted: true },
          { type: 'tool-result', toolCallId: 'p1', toolName: 'web_search', result: { hits: 3 } },
        ],
        finishReason: { unified: 'stop', raw: 'stop' },
        usage: {
          inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
          outputTokens: { total: 5, text: 5, reasoning: undefined },
        },
        warnings: [],
      }),
    });
    const a = createAiSdkCompaction({ model, session: Session.inMemory(), contextWindow: 32_000 });
    await expectAdapterError(generateText({ model: a.model, prompt: 'search', maxRetries: 0 }), 'unmappable-part', /provider-executed tool "web_search"/);
    expect(a.session.openStep).toBeNull();
    expect(
      a.session
        .events()
        .filter((e) => e.type === 'step/end')
        .map((e) => (e.data as { reason?: string }).reason),
    ).toEqual(['error']);
    await a.close();
    expect(
      a.session
        .events()
        .filter((e) => e.type === 'turn/end')
        .map((e) => (e.data as { reason?: string }).reason),
    ).toEqual(['error']);
    expect(a.session.events().some((e) => e.type === 'assistant/message')).toBe(false);
  });

  it('a prompt that does not continue the recorded conversation: history-diverged', async () => {
    const a = adapter();
    await generateText({ model: a.model, messages: [{ role: 'user', content: 'first conversation' }], maxRetries: 0 });
    const recorded = a.session.length;
    await expectAdapterError(
      generateText({
        model: a.model,
        messages: [
          { role: 'assistant', content: 'other' },
          { role: 'user', content: 'x' },
        ],
        maxRetries: 0,
      }),
      'history-diverged',
      /not continue/,
    );
    expect(a.session.length).toBe(recorded);
  });
});

describe('xcompact/ai-sdk: tool errors are results too', () => {
  it('a tool that throws is recorded as an error result and sent back with its call', async () => {
    const a = adapter();
    server.enqueue({ kind: 'reply', toolCalls: [{ id: 'e1', name: 'flaky', arguments: '{"n":1}' }] }, { kind: 'reply', content: 'It failed.' });
    const sent = server.requests.length;
    const r = await generateText({
      model: a.model,
      prompt: 'try it',
      tools: {
        flaky: tool({
          inputSchema: z.object({ n: z.number() }),
          execute: async (): Promise<string> => {
            throw new Error('disk on fire');
          },
        }),
      },
      stopWhen: stepCountIs(3),
      maxRetries: 0,
    });
    expect(r.text).toBe('It failed.');
    const result = a.session.events().find((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result')!;
    expect(result.data).toMatchObject({ callId: 'e1', toolName: 'flaky', isError: true });
    expect(JSON.stringify(result.data.content)).toContain('disk on fire');
    const second = server.requests[sent + 1]!.json as ChatRequestBody;
    expect(openAIMessageProblems(second.messages ?? [])).toEqual([]);
    expect(JSON.stringify(second.messages)).toContain('disk on fire');
  });
});

describe('xcompact/ai-sdk: provider errors that are not an overflow', () => {
  it('a 500 is thrown unchanged, nothing is compacted, and a retry continues the same turn', async () => {
    const a = adapter();
    const events: string[] = [];
    a.engine.on((e) => events.push(e.type));
    server.enqueue({ kind: 'status', status: 500, body: { error: { message: 'upstream exploded', type: 'server_error' } } });
    const messages: ModelMessage[] = [{ role: 'user', content: 'hello there' }];
    const err = await generateText({ model: a.model, messages, maxRetries: 0 }).catch((e: unknown) => e);
    expect(APICallError.isInstance(err)).toBe(true);
    expect((err as APICallError).statusCode).toBe(500);
    expect(events.filter((e) => e.startsWith('compaction'))).toEqual([]);
    expect(a.session.openStep).toBeNull();
    expect(a.session.openTurn).toBe(0);
    server.enqueue({ kind: 'reply', content: 'hi' });
    const ok = await generateText({ model: a.model, messages, maxRetries: 0 });
    expect(ok.text).toBe('hi');
    const reasons = (type: string) =>
      a.session
        .events()
        .filter((e) => e.type === type)
        .map((e) => (e.data as { reason?: string }).reason);
    expect(reasons('step/end')).toEqual(['error', undefined]);
    expect(reasons('turn/end')).toEqual(['completed']);
    expect(a.session.events().filter((e) => e.type === 'user/message')).toHaveLength(1);
  });

  it('a stopped engine cannot check a request: nothing is sent, engine-stopped, the step closed', async () => {
    const a = adapter();
    a.engine.stop();
    const sent = server.requests.length;
    const err = await generateText({ model: a.model, messages: [{ role: 'user', content: 'hello' }], maxRetries: 0 }).catch((e: unknown) => e);
    expect((err as XcompactError).code).toBe('engine-stopped');
    expect(server.requests.length).toBe(sent);
    // The unsent request's step is closed, as for any request that failed for good.
    expect(a.session.openStep).toBeNull();
    expect(
      a.session
        .events()
        .filter((e) => e.type === 'step/end')
        .map((e) => (e.data as { reason?: string }).reason),
    ).toEqual(['error']);
  });

  it('a stream that fails midway records no partial reply and closes its step', async () => {
    const a = adapter();
    server.enqueue({ kind: 'streamError', afterChunks: 1, content: 'partial ', error: { message: 'generation failed', type: 'server_error' } });
    const messages: ModelMessage[] = [{ role: 'user', content: 'stream something' }];
    const r = streamText({ model: a.model, messages, maxRetries: 0, onError: () => undefined });
    await Promise.resolve(r.text).catch(() => undefined);
    await Promise.resolve(r.finishReason).catch(() => undefined);
    expect(a.session.events().some((e) => e.type === 'assistant/message')).toBe(false);
    expect(a.session.openStep).toBeNull();
    server.enqueue({ kind: 'reply', content: 'done now' });
    const again = streamText({ model: a.model, messages, maxRetries: 0 });
    expect(await again.text).toBe('done now');
    const replies = a.session.events().filter((e) => e.type === 'assistant/message');
    expect(replies).toHaveLength(1);
  });
});

describe('xcompact/ai-sdk: a stored session continued by a new process', () => {
  it('the recorded messages are not recorded again; a history missing one of them is refused', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'xcompact-ai-sdk-resume-'));
    try {
      const provider = createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'test', includeUsage: true });
      const tools = { look: tool({ inputSchema: z.object({}), execute: async () => 'a tidy room' }) };
      const open = async () => {
        const session = await Session.open(new JsonlStore(dir), 'resume');
        return createAiSdkCompaction({ model: provider.chatModel('m'), session, contextWindow: 32_000 });
      };
      const first = await open();
      server.enqueue({ kind: 'reply', toolCalls: [{ id: 'r1', name: 'look', arguments: '{}' }] }, { kind: 'reply', content: 'Tidy.' });
      const history: ModelMessage[] = [{ role: 'user', content: 'look around' }];
      const r1 = await generateText({ model: first.model, system: 'sys', messages: history, tools, stopWhen: stepCountIs(3), maxRetries: 0 });
      history.push(...r1.response.messages);
      await first.close();
      await first.session.close();

      const second = await open();
      const recorded = second.session.length;
      const withoutReply = [...history.slice(0, -1), { role: 'user' as const, content: 'and now?' }];
      await expectAdapterError(
        generateText({ model: second.model, system: 'sys', messages: withoutReply, tools, maxRetries: 0 }),
        'history-diverged',
        /message 3/,
      );
      expect(second.session.length).toBe(recorded);

      server.enqueue({ kind: 'reply', content: 'Still tidy.' });
      const sent = server.requests.length;
      const r2 = await generateText({
        model: second.model,
        system: 'sys',
        messages: [...history, { role: 'user', content: 'and now?' }],
        tools,
        maxRetries: 0,
      });
      expect(r2.text).toBe('Still tidy.');
      const log = second.session.events();
      expect(log.filter((e) => e.type === 'user/message')).toHaveLength(2);
      expect(log.filter((e) => e.type === 'assistant/message')).toHaveLength(3);
      expect(log.filter((e) => e.type === 'tool/result')).toHaveLength(1);
      const body = server.requests[sent]!.json as ChatRequestBody;
      expect(openAIMessageProblems(body.messages ?? [])).toEqual([]);
      expect(body.messages!.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'user']);
      await second.close();
      await second.session.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('xcompact/ai-sdk: an image the model cannot fetch', () => {
  // The session accepts any image URL (an imported transcript may hold a relative path); the
  // prompt built from it must refuse such an image with a typed error, not a TypeError.
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  w.startTurn();
  w.user([
    { type: 'text', text: 'Compare these.' },
    { type: 'image', url: 'screenshots/a.png' },
  ]);
  w.startStep();
  w.request({ provider: 'local', model: 'm', tools: [] });
  w.assistant({ toolCalls: [{ id: 'c1', name: 'shot', arguments: '{}' }] });
  w.toolResult(
    'c1',
    [
      { type: 'text', text: 'the screen:' },
      { type: 'image', url: 'shots/b.png' },
    ],
    { toolName: 'shot' },
  );
  const surface = () => [...session.surface.seqs()].map((s) => session.event(s) as SurfaceEvent);

  it.each(['v3', 'v4'] as const)('spec %s: unmappable-part naming the URL', (spec) => {
    const err = (() => {
      try {
        promptOf(surface(), spec);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(AiSdkAdapterError);
    expect((err as AiSdkAdapterError).code).toBe('unmappable-part');
    expect((err as Error).message).toMatch(/"screenshots\/a\.png"/);
  });

  it('a tool result image alone is refused too (both specs)', () => {
    const only = surface().filter((e) => e.type !== 'user/message');
    for (const spec of ['v3', 'v4'] as const) expect(() => promptOf(only, spec)).toThrow(/"shots\/b\.png"/);
  });
});
