/**
 * `withCompaction(new Anthropic())`: an ordinary Messages tool loop (its own `messages` array,
 * each reply's content pushed back, tool_result blocks after), the real @anthropic-ai/sdk over
 * HTTP to the local server's `/v1/messages`. What the server receives is the session's compacted
 * conversation as Messages blocks.
 */
import Anthropic from '@anthropic-ai/sdk';
import type { MessageParam, Message, RawMessageStreamEvent, ContentBlockParam } from '@anthropic-ai/sdk/resources/messages';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DropInError, Session, withCompaction } from '../../../src/index';
import { classifyRequestError } from '../../../src/services/overflow';
import { OVERFLOW_BODIES, startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer, type Scenario } from '../../../src/testing/index';

let server: LocalOpenAIServer;
beforeAll(async () => {
  server = await startOpenAIServer();
});
afterAll(async () => {
  await server.close();
});

const MODELS = { 'local-model': { contextWindow: 4_000, maxOutputTokens: 500 } };
const TOOLS = [{ name: 'read_file', description: 'Read a file', input_schema: { type: 'object' as const, properties: { path: { type: 'string' } } } }];
const isSummary = (body: ChatRequestBody): boolean => {
  const last = body.messages?.at(-1);
  return last?.role === 'user' && typeof last.content === 'string' && last.content.includes('You are now acting as a compaction engine');
};
const fileText = (path: string) => `// ${path}\n` + `export const value = ${JSON.stringify(path)}; // a line of code\n`.repeat(30);

let readers = 0;
function reader(files: number, thinking = false): (req: { body: ChatRequestBody }) => Scenario {
  let done = 0;
  const prefix = readers++ === 0 ? '' : `${readers}_`;
  return ({ body }) => {
    if (isSummary(body)) return { kind: 'reply', content: '## Primary Request and Intent\n- read the files\n\n## Current Work\n- reading' };
    if (done < files) {
      done++;
      return {
        kind: 'reply',
        ...(thinking ? { reasoning: `think ${done}` } : {}),
        toolCalls: [{ id: `toolu_${prefix}${done}`, name: 'read_file', arguments: JSON.stringify({ path: `f${done - 1}.ts` }) }],
      };
    }
    return { kind: 'reply', content: `I read ${files} files.` };
  };
}

const client = () => new Anthropic({ baseURL: server.url, apiKey: 'test', maxRetries: 0 });
type Sent = {
  system?: unknown;
  messages: Array<{
    role: string;
    content: Array<{ type: string; cache_control?: unknown; signature?: string; id?: string; tool_use_id?: string; text?: string }>;
  }>;
};
const messagesRequests = (from: number) => server.requests.slice(from).filter((r) => r.path === '/v1/messages');

async function loop(
  ai: Anthropic,
  messages: MessageParam[],
  stream: boolean,
  system: Anthropic.MessageCreateParams['system'] = 'You read code.',
): Promise<string> {
  for (;;) {
    let reply: Pick<Message, 'content'>;
    if (stream) {
      const events = await ai.messages.create({ model: 'local-model', max_tokens: 200, system, messages, tools: TOOLS, stream: true });
      const content: Array<Record<string, unknown>> = [];
      const json: string[] = [];
      for await (const e of events as AsyncIterable<RawMessageStreamEvent>) {
        if (e.type === 'content_block_start') content[e.index] = { ...e.content_block };
        if (e.type === 'content_block_delta') {
          const b = content[e.index]!;
          if (e.delta.type === 'text_delta') b['text'] = String(b['text'] ?? '') + e.delta.text;
          if (e.delta.type === 'thinking_delta') b['thinking'] = String(b['thinking'] ?? '') + e.delta.thinking;
          if (e.delta.type === 'signature_delta') b['signature'] = e.delta.signature;
          if (e.delta.type === 'input_json_delta') json[e.index] = (json[e.index] ?? '') + e.delta.partial_json;
        }
      }
      content.forEach((b, i) => {
        if (b['type'] === 'tool_use') b['input'] = JSON.parse(json[i] ?? '{}');
      });
      reply = { content: content as unknown as Message['content'] };
    } else {
      reply = await ai.messages.create({ model: 'local-model', max_tokens: 200, system, messages, tools: TOOLS });
    }
    messages.push({ role: 'assistant', content: reply.content as ContentBlockParam[] });
    const calls = reply.content.filter((b) => b.type === 'tool_use');
    if (calls.length === 0) return reply.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    messages.push({
      role: 'user',
      content: calls.map((c) => ({ type: 'tool_result' as const, tool_use_id: c.id, content: fileText((c.input as { path: string }).path) })),
    });
  }
}

describe('withCompaction(new Anthropic()): messages.create', () => {
  for (const stream of [false, true]) {
    it(`records a tool loop, compacts it and sends the compacted blocks (${stream ? 'streamed' : 'not streamed'})`, async () => {
      server.setHandler(reader(12, true));
      const from = server.requests.length;
      const session = Session.inMemory();
      const ai = withCompaction(client(), { session, models: MODELS });
      const messages: MessageParam[] = [{ role: 'user', content: 'Read the files.' }];
      expect(await loop(ai, messages, stream)).toBe('I read 12 files.');
      expect(session.events().filter((e) => e.type === 'compaction/summary').length).toBeGreaterThan(0);
      const sent = messagesRequests(from);
      const last = sent.at(-1)!.json as Sent;
      expect(last.system).toBe('You read code.');
      expect(last.messages.length).toBeLessThan(messages.length);
      expect(JSON.stringify(last.messages[0])).toContain('## Primary Request and Intent');
      // Roles alternate, user first; every tool_use is answered in the next message, results first.
      expect(last.messages[0]!.role).toBe('user');
      last.messages.forEach((m, i) => {
        if (i > 0) expect(m.role).not.toBe(last.messages[i - 1]!.role);
        const uses = m.content.filter((b) => b.type === 'tool_use').map((b) => b.id);
        if (uses.length === 0) return;
        const next = last.messages[i + 1]!;
        expect(next.content.slice(0, uses.length).map((b) => b.tool_use_id)).toEqual(uses);
      });
      // Signed thinking goes back verbatim with its turn.
      const thinking = last.messages.flatMap((m) => m.content.filter((b) => b.type === 'thinking'));
      expect(thinking.length).toBeGreaterThan(0);
      for (const t of thinking) expect(t.signature).toMatch(/^sig:/);
      // No breakpoint was asked for, none was added.
      expect(JSON.stringify(last)).not.toContain('cache_control');
      // The caller's array is the conversation the session continues.
      expect(ai.compaction.messages().length).toBe(messages.length);
      await ai.compaction.close();
    });
  }

  it("keeps the caller's cache_control breakpoints and places one after the checkpoint", async () => {
    server.setHandler(reader(12));
    const from = server.requests.length;
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    const system = [{ type: 'text' as const, text: 'You read code.', cache_control: { type: 'ephemeral' as const } }];
    const messages: MessageParam[] = [{ role: 'user', content: [{ type: 'text', text: 'Read the files.' }] }];
    // The usual pattern: a breakpoint on the newest user message each call.
    for (;;) {
      const lastUser = messages.at(-1)!;
      const blocks = lastUser.content as Array<{ cache_control?: unknown }>;
      blocks.at(-1)!.cache_control = { type: 'ephemeral' };
      const reply = await ai.messages.create({ model: 'local-model', max_tokens: 200, system, messages, tools: TOOLS });
      delete blocks.at(-1)!.cache_control;
      messages.push({ role: 'assistant', content: reply.content as ContentBlockParam[] });
      const calls = reply.content.filter((b) => b.type === 'tool_use');
      if (calls.length === 0) break;
      messages.push({ role: 'user', content: calls.map((c) => ({ type: 'tool_result' as const, tool_use_id: c.id, content: fileText('x') })) });
    }
    expect(session.events().filter((e) => e.type === 'compaction/summary').length).toBeGreaterThan(0);
    const last = messagesRequests(from).at(-1)!.json as Sent;
    expect(last.system).toEqual(system);
    const marked = last.messages.flatMap((m) => m.content.filter((b) => b.cache_control !== undefined));
    expect(marked.length).toBeLessThanOrEqual(3); // 4 with the system's
    // The checkpoint's block carries one, and so does the newest message's last block.
    expect(last.messages[0]!.content[0]!.cache_control).toEqual({ type: 'ephemeral' });
    expect(last.messages.at(-1)!.content.at(-1)!.cache_control).toEqual({ type: 'ephemeral' });
    await ai.compaction.close();
  });

  it("recovers Anthropic's overflow inside the call; the error is classified with its counts", async () => {
    server.setHandler(reader(5));
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    const messages: MessageParam[] = [{ role: 'user', content: 'Read the files.' }];
    let steps = 0;
    const errors: unknown[] = [];
    ai.compaction.engine.on((e) => {
      if (e.type === 'compaction.committed' && e.trigger === 'overflow') errors.push(e);
    });
    for (;;) {
      if (++steps === 4) server.enqueue({ kind: 'status', ...OVERFLOW_BODIES.anthropic });
      const reply = await ai.messages.create({ model: 'local-model', max_tokens: 200, messages, tools: TOOLS });
      messages.push({ role: 'assistant', content: reply.content as ContentBlockParam[] });
      const calls = reply.content.filter((b) => b.type === 'tool_use');
      if (calls.length === 0) break;
      messages.push({ role: 'user', content: calls.map((c) => ({ type: 'tool_result' as const, tool_use_id: c.id, content: fileText('x') })) });
    }
    expect(session.events().filter((e) => e.type === 'compaction/start' && e.data.trigger === 'overflow')).toHaveLength(1);
    expect(errors).toHaveLength(1);
    // The SDK's own error, as the wrapper hands it to the classifier.
    server.enqueue({ kind: 'status', ...OVERFLOW_BODIES.anthropic });
    const raw = await client()
      .messages.create({ model: 'local-model', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(raw).toBeInstanceOf(Anthropic.APIError);
    const { errorView } = await import('../../../src/adapters/anthropic/client');
    expect(classifyRequestError(errorView(raw))).toMatchObject({ kind: 'context-overflow', provider: 'anthropic', limitTokens: 200000, promptTokens: 208310 });
    await ai.compaction.close();
  });

  it('refuses a tool_use left without its tool_result, recording nothing', async () => {
    server.setHandler(reader(1));
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    const messages: MessageParam[] = [{ role: 'user', content: 'Read.' }];
    const r = await ai.messages.create({ model: 'local-model', max_tokens: 100, messages, tools: TOOLS });
    messages.push({ role: 'assistant', content: r.content as ContentBlockParam[] }, { role: 'user', content: 'and?' });
    const before = session.length;
    const err = await ai.messages.create({ model: 'local-model', max_tokens: 100, messages, tools: TOOLS }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DropInError);
    expect((err as DropInError).code).toBe('missing-tool-results');
    expect((err as DropInError).toolCallIds).toEqual(r.content.filter((b) => b.type === 'tool_use').map((b) => b.id));
    expect(session.length).toBe(before);
    const doc = await ai.messages
      .create({
        model: 'local-model',
        max_tokens: 100,
        messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'x' } }] }],
      })
      .catch((e: unknown) => e);
    expect((doc as DropInError).code).toBe('unmappable-part');
    expect(session.length).toBe(before);
  });

  it('a session begun on chat completions finishes on messages', async () => {
    const OpenAI = (await import('openai')).default;
    const session = Session.inMemory();
    // One turn on chat completions: a tool call, its result, the answer.
    server.setHandler(reader(1));
    const chat = withCompaction(new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }), { session, models: MODELS });
    const history: Array<import('openai/resources/chat/completions').ChatCompletionMessageParam> = [
      { role: 'system', content: 'S' },
      { role: 'user', content: 'Read.' },
    ];
    const r1 = await chat.chat.completions.create({
      model: 'local-model',
      messages: history,
      tools: [{ type: 'function', function: { name: 'read_file', parameters: {} } }],
    });
    history.push(r1.choices[0]!.message, { role: 'tool', tool_call_id: r1.choices[0]!.message.tool_calls![0]!.id, content: 'the file' });
    const r2 = await chat.chat.completions.create({ model: 'local-model', messages: history });
    expect(r2.choices[0]!.message.content).toBe('I read 1 files.');
    await chat.compaction.close();
    // The next turn on Anthropic Messages, from the same session.
    server.setHandler(reader(2));
    const ai = withCompaction(client(), { session, models: MODELS });
    const messages = ai.compaction.messages() as MessageParam[];
    expect(ai.compaction.system()).toBe('S');
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    messages.push({ role: 'user', content: 'Now read two more.' });
    const from = server.requests.length;
    expect(await loop(ai, messages, false, 'S')).toBe('I read 2 files.');
    const first = server.requests[from]!.json as Sent;
    expect(first.messages.map((m) => m.content.map((b) => b.type).join(','))).toEqual(['text', 'tool_use', 'tool_result', 'text', 'text']);
    expect(session.events().filter((e) => e.type === 'tool/result')).toHaveLength(3);
    expect(
      session
        .events()
        .filter((e) => e.type === 'turn/end')
        .map((e) => (e.data as { reason?: string }).reason),
    ).toEqual(['completed', 'completed']);
    await ai.compaction.close();
  });
});
