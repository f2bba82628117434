/**
 * xcompact/ai-sdk keeps what a provider needs back in a tool loop: reasoning parts and the
 * provider options on parts (an Anthropic thinking signature, a redacted thinking block, a
 * Gemini thought signature on a call). The compacted prompt of the next step must carry them
 * exactly as the AI SDK itself sends them back without xcompact, so the loop's step 2 is
 * compared with the same loop run on the bare model. Options the session has no place for
 * (on a whole message, on a tool result) are refused by name, never dropped.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModelV3, LanguageModelV3CallOptions, LanguageModelV3Content, LanguageModelV3Message, LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { generateText, simulateReadableStream, stepCountIs, streamText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AiSdkAdapterError, createAiSdkCompaction } from '../../../src/adapters/ai-sdk/index';
import { withPrunedArguments } from '../../../src/session/argument-prune';
import type { SessionEvent } from '../../../src/session/events';
import { Session } from '../../../src/session/session';
import { JsonlStore } from '../../../src/session/stores/jsonl';
import { SessionWriter } from '../../../src/session/writer';
import { startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../../src/testing/index';

const usage = {
  inputTokens: { total: 40, noCache: 40, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 8, text: 8, reasoning: undefined },
};
const signature = { anthropic: { signature: 'sig-1' } };
const redacted = { anthropic: { redactedData: 'opaque-redacted' } };
const thought = { google: { thoughtSignature: 'ts-1' } };

/** Step 1: two reasoning parts (one redacted) and a call, each with its provider metadata; step 2: the answer. */
const step1: LanguageModelV3Content[] = [
  { type: 'reasoning', text: 'The room must be looked at first.', providerMetadata: signature },
  { type: 'reasoning', text: '', providerMetadata: redacted },
  { type: 'text', text: 'Looking.' },
  { type: 'tool-call', toolCallId: 't1', toolName: 'look', input: '{"room":"kitchen"}', providerMetadata: thought },
];

function generating(): MockLanguageModelV3 {
  let n = 0;
  return new MockLanguageModelV3({
    provider: 'mock.chat',
    modelId: 'mock',
    doGenerate: async () => ({
      content: n++ === 0 ? step1 : [{ type: 'text', text: 'Tidy.' }],
      finishReason: { unified: n === 1 ? 'tool-calls' : 'stop', raw: n === 1 ? 'tool_calls' : 'stop' },
      usage,
      warnings: [],
    }),
  });
}

/** The same step 1 as a stream: the thinking signature arrives on reasoning-end, as Anthropic's does. */
function streaming(): MockLanguageModelV3 {
  let n = 0;
  const first: LanguageModelV3StreamPart[] = [
    { type: 'stream-start', warnings: [] },
    { type: 'reasoning-start', id: 'r1' },
    { type: 'reasoning-delta', id: 'r1', delta: 'The room must be ' },
    { type: 'reasoning-delta', id: 'r1', delta: 'looked at first.' },
    { type: 'reasoning-end', id: 'r1', providerMetadata: signature },
    { type: 'reasoning-start', id: 'r2', providerMetadata: redacted },
    { type: 'reasoning-end', id: 'r2' },
    { type: 'text-start', id: 'x1' },
    { type: 'text-delta', id: 'x1', delta: 'Looking.' },
    { type: 'text-end', id: 'x1' },
    { type: 'tool-call', toolCallId: 't1', toolName: 'look', input: '{"room":"kitchen"}', providerMetadata: thought },
    { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage },
  ];
  const second: LanguageModelV3StreamPart[] = [
    { type: 'stream-start', warnings: [] },
    { type: 'text-start', id: 'x2' },
    { type: 'text-delta', id: 'x2', delta: 'Tidy.' },
    { type: 'text-end', id: 'x2' },
    { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
  ];
  return new MockLanguageModelV3({
    provider: 'mock.chat',
    modelId: 'mock',
    doStream: async () => ({ stream: simulateReadableStream({ chunks: n++ === 0 ? first : second }) }),
  });
}

const tools = { look: tool({ inputSchema: z.object({ room: z.string() }), execute: async ({ room }) => `the ${room} is tidy` }) };

async function loop(model: LanguageModelV3, mode: 'generate' | 'stream'): Promise<void> {
  const common = { model, system: 'sys', prompt: 'look at the kitchen', tools, stopWhen: stepCountIs(3), maxRetries: 0 } as const;
  if (mode === 'generate') await generateText(common);
  else await streamText({ ...common, onError: () => undefined }).consumeStream();
}

const assistantOf = (call: LanguageModelV3CallOptions | undefined): LanguageModelV3Message | undefined => call?.prompt.find((m) => m.role === 'assistant');

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'xcompact-ai-sdk-options-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('xcompact/ai-sdk: reasoning and provider options go back to the provider', () => {
  for (const mode of ['generate', 'stream'] as const) {
    it(`${mode}: step 2 carries the reasoning parts and signatures exactly as the bare AI SDK sends them; the stored log keeps them`, async () => {
      const bare = mode === 'generate' ? generating() : streaming();
      await loop(bare, mode);
      const calls = (m: MockLanguageModelV3) => (mode === 'generate' ? m.doGenerateCalls : m.doStreamCalls);
      const expected = calls(bare)[1]!.prompt;
      expect((assistantOf(calls(bare)[1])!.content as Array<{ type: string }>).filter((p) => p.type === 'reasoning')).toHaveLength(2);

      const inner = mode === 'generate' ? generating() : streaming();
      const session = await Session.open(new JsonlStore(dir), `loop-${mode}`);
      const a = createAiSdkCompaction({ model: inner, session, contextWindow: 32_000 });
      await loop(a.model, mode);
      expect(calls(inner)).toHaveLength(2);
      // The whole step-2 prompt: the reasoning and call with their signatures, and the result
      // carrying the call's signature (the AI SDK copies it there).
      expect(calls(inner)[1]!.prompt).toEqual(expected);

      // Recorded in order with their options; a reopened store reads the same back.
      const reply = a.session.events().find((e): e is SessionEvent<'assistant/message'> => e.type === 'assistant/message')!;
      expect(reply.data.content).toEqual([
        { type: 'reasoning', text: 'The room must be looked at first.', providerOptions: signature },
        { type: 'reasoning', text: '', providerOptions: redacted },
        { type: 'text', text: 'Looking.' },
        { type: 'tool-call', id: 't1', name: 'look', arguments: '{"room":"kitchen"}', providerOptions: thought },
      ]);
      await a.close();
      await a.session.close();
      const reopened = await Session.open(new JsonlStore(dir), `loop-${mode}`);
      expect(JSON.stringify(reopened.events())).toBe(JSON.stringify(session.events()));
      await reopened.close();
    });
  }

  it('options on user parts are kept and sent back; options on a whole message are refused by name, nothing recorded', async () => {
    const cache = { anthropic: { cacheControl: { type: 'ephemeral' } } };
    const inner = generating();
    const a = createAiSdkCompaction({ model: inner, session: Session.inMemory(), contextWindow: 32_000 });
    const user: LanguageModelV3Message = { role: 'user', content: [{ type: 'text', text: 'look at the kitchen', providerOptions: cache }] };
    await a.model.doGenerate({ prompt: [user] });
    expect(inner.doGenerateCalls[0]!.prompt).toEqual([user]);

    const recorded = a.session.length;
    const whole: LanguageModelV3Message = { role: 'user', content: [{ type: 'text', text: 'next' }], providerOptions: cache };
    const err = await Promise.resolve(
      a.model.doGenerate({
        prompt: [
          user,
          { role: 'assistant', content: step1.map(toPromptPart) },
          { role: 'tool', content: [{ type: 'tool-result', toolCallId: 't1', toolName: 'look', output: { type: 'text', value: 'tidy' } }] },
          whole,
        ],
      }),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AiSdkAdapterError);
    expect((err as AiSdkAdapterError).code).toBe('unmappable-part');
    expect((err as Error).message).toMatch(/providerOptions \(anthropic\) in a user message/);
    expect(a.session.length).toBe(recorded);
    expect(inner.doGenerateCalls).toHaveLength(1);
  });
});

/** A reply part as the prompt part the AI SDK makes of it (providerMetadata → providerOptions). */
function toPromptPart(c: LanguageModelV3Content) {
  if (c.type === 'tool-call')
    return {
      type: 'tool-call' as const,
      toolCallId: c.toolCallId,
      toolName: c.toolName,
      input: JSON.parse(c.input) as unknown,
      providerOptions: c.providerMetadata,
    };
  const t = c as { type: 'text' | 'reasoning'; text: string; providerMetadata?: Record<string, Record<string, never>> };
  return { type: t.type, text: t.text, providerOptions: t.providerMetadata };
}

describe('xcompact/ai-sdk: reasoning over HTTP (@ai-sdk/openai-compatible, the local server)', () => {
  let server: LocalOpenAIServer;
  beforeAll(async () => {
    server = await startOpenAIServer({ defaultModel: 'm' });
  });
  afterAll(() => server.close());

  it('a DeepSeek-style reasoning_content in a tool loop goes back on the next request, as the bare SDK sends it', async () => {
    const provider = createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'test', includeUsage: true });
    const run = async (model: LanguageModelV3): Promise<ChatRequestBody> => {
      server.enqueue(
        { kind: 'reply', reasoning: 'Check the kitchen first.', toolCalls: [{ id: 'h1', name: 'look', arguments: '{"room":"kitchen"}' }] },
        { kind: 'reply', content: 'Tidy.' },
      );
      const from = server.requests.length;
      await generateText({ model, system: 'sys', prompt: 'look at the kitchen', tools, stopWhen: stepCountIs(3), maxRetries: 0 });
      expect(server.requests.length).toBe(from + 2);
      return server.requests[from + 1]!.json as ChatRequestBody;
    };
    const bare = await run(provider.chatModel('m'));
    const assistant = (b: ChatRequestBody) => b.messages!.find((m) => m.role === 'assistant');
    expect(assistant(bare)).toMatchObject({ reasoning_content: 'Check the kitchen first.' });
    const a = createAiSdkCompaction({ model: provider.chatModel('m'), session: Session.inMemory(), contextWindow: 32_000 });
    const wrapped = await run(a.model);
    expect(assistant(wrapped)).toEqual(assistant(bare));
    await a.close();
  });
});

describe('the session keeps provider options through prunes', () => {
  it('an argument prune or a tool-result prune that drops them is refused; one that keeps them is accepted', () => {
    const s = Session.inMemory();
    const w = new SessionWriter(s);
    w.startTurn();
    w.startStep();
    w.user('go');
    const call = s.append({
      type: 'assistant/message',
      data: {
        content: [
          { type: 'reasoning', text: 'think', providerOptions: signature },
          { type: 'tool-call', id: 'p1', name: 'write', arguments: JSON.stringify({ body: 'x'.repeat(200) }), providerOptions: thought },
        ],
      },
      surfaceOp: 'append',
    });
    const result = s.append({
      type: 'tool/result',
      data: { callId: 'p1', toolName: 'write', content: [{ type: 'text', text: 'y'.repeat(200) }], providerOptions: thought },
      surfaceOp: 'append',
    });

    const pruned = withPrunedArguments(call, { p1: JSON.stringify({ body: 'x' }) });
    expect(s.check(pruned)).toBeUndefined();
    for (const k of [0, 1]) {
      const dropped = withPrunedArguments(call, { p1: JSON.stringify({ body: 'x' }) });
      delete (dropped.data.content[k] as { providerOptions?: unknown }).providerOptions;
      expect(s.check(dropped)?.rule).toBe('argument-prune-replacement');
    }
    const replace = (data: SessionEvent<'tool/result'>['data']) => ({
      type: 'tool/result' as const,
      data,
      surfaceOp: { op: 'replace' as const, start: result.seq, end: result.seq },
      sourceEventSeqs: [result.seq],
    });
    const { providerOptions: _kept, ...without } = result.data;
    expect(s.check(replace({ ...result.data, content: [{ type: 'text', text: 'y' }] }))).toBeUndefined();
    expect(s.check(replace({ ...without, content: [{ type: 'text', text: 'y' }] }))?.rule).toBe('tool-result-replacement');
  });
});
