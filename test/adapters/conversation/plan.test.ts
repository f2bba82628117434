/**
 * Plan, then commit (src/adapters/conversation/conversation.ts): bad input on any face — a result
 * for no call, a call id made twice, a role the session cannot hold, arguments that are not JSON,
 * `input: 42`, `content: null`, a lone surrogate, a 10 MB message, `previous_response_id` — is
 * refused with a typed error before anything is written: the session file keeps its bytes, the
 * log reopens identical, nothing is sent, and the caller's next valid call continues the
 * conversation as if the refused one never came.
 */
import Anthropic from '@anthropic-ai/sdk';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { LanguageModelV3, LanguageModelV3Prompt } from '@ai-sdk/provider';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAiSdkCompaction } from '../../../src/adapters/ai-sdk/index';
import { BudgetError, ConversationError, JsonlStore, Session, withCompaction } from '../../../src/index';
import { startOpenAIServer, type LocalOpenAIServer } from '../../../src/testing/index';

let server: LocalOpenAIServer;
let dir: string;
beforeAll(async () => {
  server = await startOpenAIServer({ scenarios: () => ({ kind: 'reply', content: 'Noted.' }) });
  dir = mkdtempSync(join(tmpdir(), 'xcompact-plan-'));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const MODELS = { 'local-model': { contextWindow: 32_000 } };
const TEN_MB = 'x'.repeat(10 * 1024 * 1024);
let opened = 0;

/** A session in a real JSONL file, with one valid exchange recorded by `first`. */
async function world() {
  const store = new JsonlStore(dir);
  const id = `plan-${++opened}`;
  const session = await Session.open(store, id);
  const bytes = () => readFileSync(store.pathOf(id));
  return { store, id, session, bytes };
}

type Refusal = [label: string, call: () => Promise<unknown>, check: (err: unknown) => void];
const code = (c: string) => (err: unknown) => {
  expect(err instanceof ConversationError || err instanceof BudgetError, String(err)).toBe(true);
  expect((err as { code: string }).code).toBe(c);
  expect((err as Error).message).toMatch(/nothing was recorded or sent/i);
};

/** Each refusal leaves the file's bytes, the log and the server as they were; then a valid call goes on. */
async function expectRefusals(w: Awaited<ReturnType<typeof world>>, refusals: Refusal[], valid: () => Promise<unknown>) {
  await w.session.flush();
  const before = w.bytes();
  const events = w.session.events().map((e) => JSON.stringify(e));
  const sent = server.requests.length;
  for (const [label, call, check] of refusals) {
    const err = await call().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err, label).toBeDefined();
    check(err);
    await w.session.flush();
    expect(w.bytes().equals(before), `${label}: the file is unchanged`).toBe(true);
    expect(
      w.session.events().map((e) => JSON.stringify(e)),
      label,
    ).toEqual(events);
    expect(server.requests.length, `${label}: nothing sent`).toBe(sent);
  }
  await valid();
  expect(server.requests.length).toBe(sent + 1);
}

/** Closed, the session reopens from its file exactly as it was live. */
async function expectReopens(w: Awaited<ReturnType<typeof world>>, close: () => Promise<void>) {
  await close();
  const live = w.session.events().map((e) => JSON.stringify(e));
  const again = await Session.open(new JsonlStore(dir), w.id);
  expect(again.events().map((e) => JSON.stringify(e))).toEqual(live);
  expect(again.needsRecovery).toBe(false);
  await again.close();
}

describe('a refused call writes nothing, on every face', () => {
  it('Chat Completions', async () => {
    const w = await world();
    const ai = withCompaction(new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }), { session: w.session, models: MODELS });
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Hello.' }];
    messages.push((await ai.chat.completions.create({ model: 'local-model', messages })).choices[0]!.message);
    const create = (extra: unknown[]) =>
      ai.chat.completions.create({ model: 'local-model', messages: [...messages, ...(extra as OpenAI.ChatCompletionMessageParam[])] });
    const call = (id: string, args = '{}') => ({ id, type: 'function', function: { name: 'read', arguments: args } });
    await expectRefusals(
      w,
      [
        ['a result for no call', () => create([{ role: 'tool', tool_call_id: 'nope', content: 'x' }]), code('unexpected-tool-result')],
        [
          'a call id made twice',
          () =>
            create([
              { role: 'user', content: 'Read twice.' },
              { role: 'assistant', content: null, tool_calls: [call('c1'), call('c1')] },
              { role: 'tool', tool_call_id: 'c1', content: 'a' },
            ]),
          code('duplicate-tool-call'),
        ],
        ['a role the session cannot hold', () => create([{ role: 'function', name: 'f', content: 'x' }]), code('unmappable-part')],
        [
          'arguments that are not JSON',
          () =>
            create([
              { role: 'user', content: 'Read.' },
              { role: 'assistant', content: null, tool_calls: [call('c2', '{"path":')] },
              { role: 'tool', tool_call_id: 'c2', content: 'a' },
            ]),
          code('invalid-request'),
        ],
        ['content: null', () => create([{ role: 'user', content: null }]), code('unmappable-part')],
        ['a lone surrogate', () => create([{ role: 'user', content: 'bad \ud800 text' }]), code('invalid-request')],
        ['a 10 MB message', () => create([{ role: 'user', content: TEN_MB }]), code('request-over-window')],
        ['messages: 42', () => ai.chat.completions.create({ model: 'local-model', messages: 42 as never }), code('invalid-request')],
        ['a mid-conversation system message', () => create([{ role: 'system', content: 'New rules.' }]), code('unmappable-part')],
      ],
      () => ai.chat.completions.create({ model: 'local-model', messages: [...messages, { role: 'user', content: 'Still there?' }] }),
    );
    await expectReopens(w, () => ai.compaction.close({ session: true }));
  });

  it('Responses', async () => {
    const w = await world();
    const ai = withCompaction(new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }), { session: w.session, models: MODELS });
    const input: OpenAI.Responses.ResponseInputItem[] = [{ role: 'user', content: 'Hello.' }];
    input.push(...((await ai.responses.create({ model: 'local-model', input, store: false })).output as OpenAI.Responses.ResponseInputItem[]));
    const create = (extra: unknown[], more: Record<string, unknown> = {}) =>
      ai.responses.create({ model: 'local-model', input: [...input, ...(extra as OpenAI.Responses.ResponseInputItem[])], store: false, ...more });
    await expectRefusals(
      w,
      [
        ['previous_response_id', () => create([{ role: 'user', content: 'More.' }], { previous_response_id: 'resp_1' }), code('server-state')],
        ['input: 42', () => ai.responses.create({ model: 'local-model', input: 42 as never }), code('invalid-request')],
        ['a result for no call', () => create([{ type: 'function_call_output', call_id: 'nope', output: 'x' }]), code('unexpected-tool-result')],
        ['a lone surrogate', () => create([{ role: 'user', content: '\udc00' }]), code('invalid-request')],
        ['a 10 MB message', () => create([{ role: 'user', content: TEN_MB }]), code('request-over-window')],
        ['a mid-conversation developer message', () => create([{ role: 'developer', content: 'New rules.' }]), code('unmappable-part')],
      ],
      () => create([{ role: 'user', content: 'Still there?' }]),
    );
    await expectReopens(w, () => ai.compaction.close({ session: true }));
  });

  it('Anthropic Messages', async () => {
    const w = await world();
    const ai = withCompaction(new Anthropic({ baseURL: server.url, apiKey: 'test', maxRetries: 0 }), { session: w.session, models: MODELS });
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Hello.' }];
    messages.push({ role: 'assistant', content: (await ai.messages.create({ model: 'local-model', max_tokens: 100, messages })).content });
    const create = (extra: unknown[]) =>
      ai.messages.create({ model: 'local-model', max_tokens: 100, messages: [...messages, ...(extra as Anthropic.MessageParam[])] });
    await expectRefusals(
      w,
      [
        ['content: null', () => create([{ role: 'user', content: null }]), code('invalid-request')],
        [
          'a result for no call',
          () => create([{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'nope', content: 'x' }] }]),
          code('unexpected-tool-result'),
        ],
        ['a role the session cannot hold', () => create([{ role: 'system', content: 'x' }]), code('unmappable-part')],
        ['a lone surrogate', () => create([{ role: 'user', content: 'a\ud83d' }]), code('invalid-request')],
        ['a 10 MB message', () => create([{ role: 'user', content: TEN_MB }]), code('request-over-window')],
      ],
      () => create([{ role: 'user', content: 'Still there?' }]),
    );
    await expectReopens(w, () => ai.compaction.close({ session: true }));
  });

  it('AI SDK (prompts the SDK itself would refuse, sent to the wrapped model directly)', async () => {
    const w = await world();
    const provider = createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'test', includeUsage: true });
    const compaction = createAiSdkCompaction({ model: provider.chatModel('local-model'), session: w.session, contextWindow: 32_000 });
    const model = compaction.model as unknown as LanguageModelV3;
    const history: LanguageModelV3Prompt = [{ role: 'user', content: [{ type: 'text', text: 'Hello.' }] }];
    const first = await model.doGenerate({ prompt: history });
    history.push({ role: 'assistant', content: first.content.filter((p) => p.type === 'text') });
    const generate = async (extra: unknown[]) => model.doGenerate({ prompt: [...history, ...(extra as LanguageModelV3Prompt)] });
    await expectRefusals(
      w,
      [
        [
          'a result for no call',
          () => generate([{ role: 'tool', content: [{ type: 'tool-result', toolCallId: 'nope', toolName: 'read', output: { type: 'text', value: 'x' } }] }]),
          code('unexpected-tool-result'),
        ],
        [
          'a mid-conversation system message',
          () => generate([{ role: 'system', content: 'New rules.' }]),
          (err) => expect((err as { code: string }).code).toBe('unmappable-part'),
        ],
        ['a lone surrogate', () => generate([{ role: 'user', content: [{ type: 'text', text: '\ud800' }] }]), code('invalid-request')],
        ['a 10 MB message', () => generate([{ role: 'user', content: [{ type: 'text', text: TEN_MB }] }]), code('request-over-window')],
      ],
      async () => generate([{ role: 'user', content: [{ type: 'text', text: 'Still there?' }] }]),
    );
    await expectReopens(w, () => compaction.close({ session: true }));
  });
});
