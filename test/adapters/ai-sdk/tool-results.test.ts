/**
 * xcompact/ai-sdk and tool calls left without a result: "no broken request ever sent". A prompt
 * that leaves a call unanswered (a message after it, or the prompt's end) is refused with
 * `missing-tool-results` naming the calls, before anything is written (the stored log is byte
 * for byte as it was) and before anything reaches the provider. Real parts: the AI SDK's
 * `@ai-sdk/openai-compatible` over HTTP to the local server, a JSONL store on disk.
 *
 * The AI SDK's own `generateText` refuses these prompts too (MissingToolResultsError), so they
 * reach the adapter through the model itself (`doGenerate`), as a middleware placed before the
 * adapter or a host driving the model directly would send them.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModelV3Prompt } from '@ai-sdk/provider';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AiSdkAdapterError, createAiSdkCompaction, type AiSdkCompaction } from '../../../src/adapters/ai-sdk/index';
import { Session } from '../../../src/session/session';
import { JsonlStore } from '../../../src/session/stores/jsonl';
import { startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../../src/testing/index';
import { openAIMessageProblems } from '../../helpers/openai-validator';
import { adapterError } from '../../helpers/ai-sdk-script';

let server: LocalOpenAIServer;
let dir: string;
beforeAll(async () => {
  server = await startOpenAIServer({ defaultModel: 'm' });
  dir = mkdtempSync(join(tmpdir(), 'xcompact-ai-sdk-tool-results-'));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
async function stored(): Promise<{ a: AiSdkCompaction; file: string }> {
  const id = `s${++n}`;
  const session = await Session.open(new JsonlStore(dir), id);
  const provider = createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'test', includeUsage: true });
  return { a: createAiSdkCompaction({ model: provider.chatModel('m'), session, contextWindow: 32_000, maxOutputTokens: 512 }), file: join(dir, `${id}.jsonl`) };
}

const refusal = (p: PromiseLike<unknown>): Promise<AiSdkAdapterError> => adapterError(p, 'missing-tool-results');

const start: LanguageModelV3Prompt = [
  { role: 'system', content: 'sys' },
  { role: 'user', content: [{ type: 'text', text: 'look at both rooms' }] },
];
const calls = {
  role: 'assistant',
  content: [
    { type: 'tool-call', toolCallId: 'c1', toolName: 'look', input: { room: 1 } },
    { type: 'tool-call', toolCallId: 'c2', toolName: 'look', input: { room: 2 } },
  ],
} as const satisfies LanguageModelV3Prompt[number];
const result = (id: string) => ({ type: 'tool-result', toolCallId: id, toolName: 'look', output: { type: 'text', value: `room ${id}: tidy` } }) as const;

describe('xcompact/ai-sdk: every tool call keeps its result', () => {
  it('a user message after unanswered calls: refused, naming them; the stored log is byte-identical; nothing sent', async () => {
    const { a, file } = await stored();
    server.enqueue({
      kind: 'reply',
      toolCalls: [
        { id: 'c1', name: 'look', arguments: '{"room":1}' },
        { id: 'c2', name: 'look', arguments: '{"room":2}' },
      ],
    });
    await a.model.doGenerate({ prompt: start });
    await a.session.flush();
    const bytes = readFileSync(file);
    const events = JSON.stringify(a.session.events());
    const sent = server.requests.length;

    const err = await refusal(a.model.doGenerate({ prompt: [...start, calls, { role: 'user', content: [{ type: 'text', text: 'never mind' }] }] }));
    expect(err.toolCallIds).toEqual(['c1', 'c2']);
    expect(err.message).toMatch(/"c1", "c2".*before the next user message/);
    await a.session.flush();
    expect(JSON.stringify(a.session.events())).toBe(events);
    expect(readFileSync(file).equals(bytes)).toBe(true);
    expect(server.requests.length).toBe(sent);

    // Answered, the same conversation goes on: the session was left able to continue.
    server.enqueue({ kind: 'reply', content: 'Both tidy.' });
    const ok = await a.model.doGenerate({ prompt: [...start, calls, { role: 'tool', content: [result('c1'), result('c2')] }] });
    expect(ok.content).toEqual([expect.objectContaining({ type: 'text', text: 'Both tidy.' })]);
    expect(openAIMessageProblems((server.requests[sent]!.json as ChatRequestBody).messages ?? [])).toEqual([]);
    await a.close();
    await a.session.close();
  });
});

describe('xcompact/ai-sdk: a prompt that ends with calls unanswered', () => {
  it('a tool message answering only some calls: refused, naming the rest; no request with an unanswered call reaches the server', async () => {
    const { a, file } = await stored();
    server.enqueue({
      kind: 'reply',
      toolCalls: [
        { id: 'c1', name: 'look', arguments: '{"room":1}' },
        { id: 'c2', name: 'look', arguments: '{"room":2}' },
      ],
    });
    const first = server.requests.length;
    await a.model.doGenerate({ prompt: start });
    await a.session.flush();
    const bytes = readFileSync(file);
    const events = JSON.stringify(a.session.events());

    const err = await refusal(a.model.doGenerate({ prompt: [...start, calls, { role: 'tool', content: [result('c1')] }] }));
    expect(err.toolCallIds).toEqual(['c2']);
    expect(err.message).toMatch(/"c2" has no result at the end of the prompt/);
    // Neither is the reply echoed with no results at all sent on.
    const none = await refusal(a.model.doGenerate({ prompt: [...start, calls] }));
    expect(none.toolCallIds).toEqual(['c1', 'c2']);
    await a.session.flush();
    expect(JSON.stringify(a.session.events())).toBe(events);
    expect(readFileSync(file).equals(bytes)).toBe(true);

    server.enqueue({ kind: 'reply', content: 'Both tidy.' });
    await a.model.doGenerate({ prompt: [...start, calls, { role: 'tool', content: [result('c1'), result('c2')] }] });
    // Every request the server saw: each call it carries has its result.
    const bodies = server.requests.slice(first).map((r) => r.json as ChatRequestBody);
    expect(bodies).toHaveLength(2);
    for (const body of bodies) expect(openAIMessageProblems(body.messages ?? [])).toEqual([]);
    expect(JSON.stringify(bodies[1]!.messages)).toContain('room c2: tidy');
    await a.close();
    await a.session.close();
  });
});

describe('xcompact/ai-sdk: a tool result for a call that is not waiting', () => {
  for (const [label, extra] of [
    ['an id no call has', 'c9'],
    ['a second result for an answered call', 'c1'],
  ] as const) {
    it(`${label}: refused, naming it, before anything is written; the stored log is byte-identical; nothing sent`, async () => {
      const { a, file } = await stored();
      server.enqueue({
        kind: 'reply',
        toolCalls: [
          { id: 'c1', name: 'look', arguments: '{"room":1}' },
          { id: 'c2', name: 'look', arguments: '{"room":2}' },
        ],
      });
      await a.model.doGenerate({ prompt: start });
      await a.session.flush();
      const bytes = readFileSync(file);
      const events = JSON.stringify(a.session.events());
      const sent = server.requests.length;

      // The results of the waiting calls come first: none of them may be written either.
      const err = await Promise.resolve(
        a.model.doGenerate({ prompt: [...start, calls, { role: 'tool', content: [result('c1'), result('c2'), result(extra)] }] }),
      ).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AiSdkAdapterError);
      expect((err as AiSdkAdapterError).code).toBe('unexpected-tool-result');
      expect((err as AiSdkAdapterError).toolCallIds).toEqual([extra]);
      expect((err as Error).message).toContain(`"${extra}"`);
      await a.session.flush();
      expect(JSON.stringify(a.session.events())).toBe(events);
      expect(readFileSync(file).equals(bytes)).toBe(true);
      expect(server.requests.length).toBe(sent);

      // Without the stray result the conversation goes on.
      server.enqueue({ kind: 'reply', content: 'Both tidy.' });
      await a.model.doGenerate({ prompt: [...start, calls, { role: 'tool', content: [result('c1'), result('c2')] }] });
      expect(openAIMessageProblems((server.requests[sent]!.json as ChatRequestBody).messages ?? [])).toEqual([]);
      await a.close();
      await a.session.close();
    });
  }
});
