/**
 * The drop-in (`withCompaction`): an ordinary openai loop, its own `messages` array, the real
 * SDK over HTTP to the local server. What the caller sees must be what it saw without xcompact;
 * what the server receives is the session's compacted conversation.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BudgetError, DropInError, JsonlStore, Session, withCompaction } from '../../../src/index';
import { OVERFLOW_BODIES, startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer, type Scenario } from '../../../src/testing/index';

let server: LocalOpenAIServer;
let dir: string;
beforeAll(async () => {
  server = await startOpenAIServer();
  dir = mkdtempSync(join(tmpdir(), 'xcompact-drop-in-'));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});
afterEach(() => server.setHandler(undefined as never));

const MODELS = { 'local-model': { contextWindow: 4_000, maxOutputTokens: 500 } };
const TOOLS: ChatCompletionTool[] = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
];
const SYSTEM = 'You are a careful code reader.';

const isSummary = (body: ChatRequestBody): boolean => {
  const last = body.messages?.at(-1);
  return last?.role === 'user' && typeof last.content === 'string' && last.content.startsWith('You are now acting as a compaction engine');
};

/** A model that reads `files` files, one tool call per step, then answers; summaries answered as summaries. */
function reader(files: number): (req: { body: ChatRequestBody }) => Scenario {
  let done = 0;
  return ({ body }) => {
    if (isSummary(body)) return { kind: 'reply', content: '## Primary Request and Intent\n- read the files\n\n## Current Work\n- reading' };
    if (done < files) {
      done++;
      return { kind: 'reply', toolCalls: [{ id: `call_${done}`, name: 'read_file', arguments: JSON.stringify({ path: `f${done - 1}.ts` }) }] };
    }
    return { kind: 'reply', content: `I read ${files} files.` };
  };
}

const fileText = (path: string) => `// ${path}\n` + `export const value = ${JSON.stringify(path)}; // a line of code\n`.repeat(30);

function client(): OpenAI {
  return new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
}

/** The caller's loop, as it is without xcompact: its own messages, tool results pushed after each reply. */
async function loop(ai: OpenAI, messages: ChatCompletionMessageParam[], opts: { stream?: boolean } = {}): Promise<{ answer: string; steps: number }> {
  for (let steps = 1; ; steps++) {
    let message: { content: string | null; tool_calls?: Array<{ id: string; type: string; function?: { name: string; arguments: string } }> };
    if (opts.stream) {
      const stream = await ai.chat.completions.create({ model: 'local-model', messages, tools: TOOLS, stream: true });
      let content = '';
      const calls: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }> = [];
      for await (const chunk of stream) {
        const delta = chunk.choices[0]!.delta; // every chunk has a choice: the usage chunk is not shown
        content += delta.content ?? '';
        for (const c of delta.tool_calls ?? []) {
          const call = (calls[c.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
          if (c.id) call.id = c.id;
          call.function.name += c.function?.name ?? '';
          call.function.arguments += c.function?.arguments ?? '';
        }
      }
      message = { content, ...(calls.length ? { tool_calls: calls } : {}) };
      messages.push({ role: 'assistant', content: content || null, ...(calls.length ? { tool_calls: calls } : {}) });
    } else {
      const reply = await ai.chat.completions.create({ model: 'local-model', messages, tools: TOOLS });
      message = reply.choices[0]!.message;
      messages.push(reply.choices[0]!.message);
    }
    if (!message.tool_calls?.length) return { answer: message.content ?? '', steps };
    for (const call of message.tool_calls) {
      if (call.type !== 'function' || !call.function) continue;
      const { path } = JSON.parse(call.function.arguments) as { path: string };
      messages.push({ role: 'tool', tool_call_id: call.id, content: fileText(path) });
    }
  }
}

const conversationRequests = (from: number) => server.requests.slice(from).filter((r) => r.json && !isSummary(r.json as ChatRequestBody));

describe('withCompaction: the caller keeps its loop and its messages', () => {
  it('records the conversation, compacts inside a long tool loop, and the caller sees plain replies', async () => {
    server.setHandler(reader(14));
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    const notes: string[] = [];
    ai.compaction.engine.on((e) => notes.push(e.type));
    const messages: ChatCompletionMessageParam[] = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'Read every file, then say how many.' },
    ];
    const from = server.requests.length;
    const { answer, steps } = await loop(ai, messages);
    expect(answer).toBe('I read 14 files.');
    expect(steps).toBe(15);
    // The caller's array is its own, uncompacted: 1 system + 1 user + 14 × (call + result) + answer.
    expect(messages).toHaveLength(2 + 28 + 1);
    expect(notes).toContain('compaction.committed');
    // What the server got last is the compacted conversation: a checkpoint, and fewer messages than the caller holds.
    const sent = conversationRequests(from);
    const last = sent.at(-1)!.json as ChatRequestBody;
    expect(last.messages!.length).toBeLessThan(messages.length - 1);
    expect(JSON.stringify(last.messages)).toContain('<compacted-summary>');
    expect(last.messages![0]).toEqual({ role: 'system', content: SYSTEM });
    // Summary requests reached the same server (and were not recorded as conversation).
    expect(server.requests.slice(from).some((r) => isSummary(r.json as ChatRequestBody))).toBe(true);
    // The session holds every message as recorded (the caller's view) and the turn is closed.
    expect(ai.compaction.messages()).toEqual(messages.map((m) => normalised(m)));
    expect(session.openTurn).toBeNull();
    const replies = session.events().filter((e) => e.type === 'assistant/message' && e.surfaceOp === 'append');
    expect(replies).toHaveLength(15);
    expect(replies.every((e) => e.type === 'assistant/message' && e.data.usage !== undefined)).toBe(true);
    await ai.compaction.close();
  });

  it('streams exactly as before (no usage chunk the caller did not ask for), and records the reply with its usage', async () => {
    server.setHandler(reader(3));
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    const messages: ChatCompletionMessageParam[] = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'Read three files.' },
    ];
    const from = server.requests.length;
    const { answer, steps } = await loop(ai, messages, { stream: true });
    expect(answer).toBe('I read 3 files.');
    expect(steps).toBe(4);
    // xcompact asked for usage on the caller's behalf.
    for (const r of conversationRequests(from)) expect((r.json as { stream_options?: unknown }).stream_options).toEqual({ include_usage: true });
    const replies = session.events().filter((e) => e.type === 'assistant/message');
    expect(replies).toHaveLength(4);
    expect(replies.every((e) => e.type === 'assistant/message' && (e.data.usage?.promptTokens ?? 0) > 0)).toBe(true);
    expect(session.events().filter((e) => e.type === 'tool/result')).toHaveLength(3);
    // The next turn continues from the caller's messages as it built them from the chunks.
    messages.push({ role: 'user', content: 'Thanks.' });
    server.enqueue({ kind: 'reply', content: 'You are welcome.' });
    const stream = await ai.chat.completions.create({ model: 'local-model', messages, stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    // Asked for: shown.
    expect(chunks.at(-1)!.choices).toEqual([]);
    expect(chunks.at(-1)!.usage!.prompt_tokens).toBeGreaterThan(0);
    expect(session.openTurn).toBeNull();
    await ai.compaction.close();
  });

  it('recovers a vLLM-style overflow (a flat error body openai 6 reads as "no body") with the defaults, inside the call', async () => {
    server.setHandler(reader(4));
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    const messages: ChatCompletionMessageParam[] = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'Read four files.' },
    ];
    // Three steps recorded, then the provider rejects the fourth request as too long.
    for (let i = 0; i < 3; i++) {
      const r = await ai.chat.completions.create({ model: 'local-model', messages, tools: TOOLS });
      messages.push(r.choices[0]!.message);
      for (const c of r.choices[0]!.message.tool_calls ?? []) messages.push({ role: 'tool', tool_call_id: c.id, content: fileText(`f${i}.ts`) });
    }
    server.enqueue({ kind: 'status', ...OVERFLOW_BODIES.vllm });
    const from = server.requests.length;
    const reply = await ai.chat.completions.create({ model: 'local-model', messages, tools: TOOLS });
    expect(reply.choices[0]!.message.tool_calls).toHaveLength(1);
    const sent = conversationRequests(from);
    // The rejected request, then the retry with a checkpoint in place of the head.
    expect(sent).toHaveLength(2);
    expect(JSON.stringify((sent[1]!.json as ChatRequestBody).messages)).toContain('<compacted-summary>');
    expect((sent[1]!.json as ChatRequestBody).messages!.length).toBeLessThan((sent[0]!.json as ChatRequestBody).messages!.length);
    await ai.compaction.close();
  });

  it('throws the provider error when the overflow cannot be recovered (bounded: no endless retries)', async () => {
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    // Nothing to compact yet (one user message): the engine declines, the original error comes back.
    server.enqueue({ kind: 'status', ...OVERFLOW_BODIES.vllm });
    const from = server.requests.length;
    const err = await ai.chat.completions.create({ model: 'local-model', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as Error).message).toContain('maximum context length');
    expect(server.requests.length - from).toBe(1);
    // The step ended as an error; the turn stays open for a retry of the same messages.
    expect(
      session
        .events()
        .filter((e) => e.type === 'step/end')
        .at(-1),
    ).toMatchObject({ data: { reason: 'error' } });
    server.enqueue({ kind: 'reply', content: 'hello' });
    const again = await ai.chat.completions.create({ model: 'local-model', messages: [{ role: 'user', content: 'hi' }] });
    expect(again.choices[0]!.message.content).toBe('hello');
    expect(session.events().filter((e) => e.type === 'user/message')).toHaveLength(1);
    await ai.compaction.close();
  });

  it('a restart resumes from the session alone: the reopened session gives the messages to continue with', async () => {
    server.setHandler(reader(2));
    const store = new JsonlStore(dir);
    const first = await Session.open(store, 'restart');
    const ai = withCompaction(client(), { session: first, models: MODELS });
    const messages: ChatCompletionMessageParam[] = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'Read two files.' },
    ];
    await loop(ai, messages);
    await ai.compaction.close();
    await first.close();

    // A new process: nothing but the session id.
    const session = await Session.open(new JsonlStore(dir), 'restart');
    const again = withCompaction(client(), { session, models: MODELS });
    const resumed = again.compaction.messages();
    expect(resumed).toEqual(messages.map((m) => normalised(m)));
    resumed.push({ role: 'user', content: 'And the first file again?' });
    server.setHandler(undefined);
    server.enqueue({ kind: 'reply', content: 'f0.ts exports value.' });
    const from = server.requests.length;
    const reply = await again.chat.completions.create({ model: 'local-model', messages: resumed });
    expect(reply.choices[0]!.message.content).toBe('f0.ts exports value.');
    const sent = (server.requests[from]!.json as ChatRequestBody).messages!;
    expect(sent.at(-1)).toEqual({ role: 'user', content: 'And the first file again?' });
    expect(sent).toHaveLength(resumed.length);
    // Nothing was recorded twice.
    expect(session.events().filter((e) => e.type === 'user/message')).toHaveLength(2);
    await again.compaction.close();
    await session.close();
  });

  it('passing only the new messages works too', async () => {
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    server.enqueue({ kind: 'reply', toolCalls: [{ id: 'c1', name: 'read_file', arguments: '{"path":"a.ts"}' }] }, { kind: 'reply', content: 'done' });
    const r1 = await ai.chat.completions.create({
      model: 'local-model',
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: 'read a.ts' },
      ],
      tools: TOOLS,
    });
    const from = server.requests.length;
    // Only the tool result: the reply before it is already recorded.
    const r2 = await ai.chat.completions.create({ model: 'local-model', messages: [{ role: 'tool', tool_call_id: 'c1', content: 'export {}' }], tools: TOOLS });
    expect(r1.choices[0]!.message.tool_calls).toHaveLength(1);
    expect(r2.choices[0]!.message.content).toBe('done');
    const sent = (server.requests[from]!.json as ChatRequestBody).messages!;
    expect(sent.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    await ai.compaction.close();
  });

  it('refuses a history that does not continue the recording, and a tool call left without its result: typed, nothing recorded or sent', async () => {
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    server.enqueue({ kind: 'reply', toolCalls: [{ id: 'c1', name: 'read_file', arguments: '{"path":"a.ts"}' }] });
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'read a.ts' }];
    const r1 = await ai.chat.completions.create({ model: 'local-model', messages, tools: TOOLS });
    messages.push(r1.choices[0]!.message);
    const length = session.length;
    const requests = server.requests.length;

    const missing = await ai.chat.completions
      .create({ model: 'local-model', messages: [...messages, { role: 'user', content: 'go on' }] })
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(DropInError);
    expect((missing as DropInError).code).toBe('missing-tool-results');
    expect((missing as DropInError).toolCallIds).toEqual(['c1']);

    const edited: ChatCompletionMessageParam[] = [
      { role: 'user', content: 'read a.ts' },
      { role: 'assistant', content: 'something else' },
    ];
    const diverged = await ai.chat.completions.create({ model: 'local-model', messages: edited }).catch((e: unknown) => e);
    expect((diverged as DropInError).code).toBe('history-diverged');

    const stray = await ai.chat.completions
      .create({ model: 'local-model', messages: [...messages, { role: 'tool', tool_call_id: 'nope', content: 'x' }] })
      .catch((e: unknown) => e);
    expect((stray as DropInError).code).toBe('unexpected-tool-result');

    const custom = await ai.chat.completions
      .create({
        model: 'local-model',
        messages: [
          ...messages,
          { role: 'tool', tool_call_id: 'c1', content: [{ type: 'text', text: 'ok' }] },
          { role: 'assistant', content: null, tool_calls: [{ id: 'x', type: 'custom', custom: { name: 'grep', input: 'a' } }] },
        ],
      })
      .catch((e: unknown) => e);
    expect((custom as DropInError).code).toBe('unmappable-part');

    expect(session.length).toBe(length);
    expect(server.requests.length).toBe(requests);
    await ai.compaction.close();
  });

  it('a model with no known window is an error at the first call, naming the models entry; requireCapacity: false opts out', async () => {
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session });
    const requests = server.requests.length;
    const err = await ai.chat.completions.create({ model: 'mystery-model', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BudgetError);
    expect((err as BudgetError).code).toBe('no-context-capacity');
    expect((err as Error).message).toContain('models: { "local/mystery-model": { contextWindow: <tokens> } }');
    expect(session.length).toBe(0);
    expect(server.requests.length).toBe(requests);

    const optedOut = withCompaction(client(), { session: Session.inMemory(), requireCapacity: false });
    server.enqueue({ kind: 'reply', content: 'hello' });
    const reply = await optedOut.chat.completions.create({ model: 'mystery-model', messages: [{ role: 'user', content: 'hi' }] });
    expect(reply.choices[0]!.message.content).toBe('hello');
    await ai.compaction.close();
    await optedOut.compaction.close();
  });

  it("the rest of the client is the caller's own", async () => {
    const raw = client();
    const ai = withCompaction(raw, { session: Session.inMemory(), models: MODELS });
    expect(ai.baseURL).toBe(raw.baseURL);
    const models = await ai.models.list();
    expect(models.data[0]!.id).toBe('local-model');
    await ai.compaction.close();
  });
});

/** A message as the session gives it back: assistant content null when it only calls tools, no SDK extras. */
function normalised(m: ChatCompletionMessageParam): ChatCompletionMessageParam {
  if (m.role !== 'assistant') return m;
  const calls = (m.tool_calls ?? []).map((c) => ({
    id: c.id,
    type: 'function' as const,
    function: { name: (c as { function: { name: string } }).function.name, arguments: (c as { function: { arguments: string } }).function.arguments },
  }));
  const text = typeof m.content === 'string' ? m.content : '';
  return calls.length ? { role: 'assistant', content: text === '' ? null : text, tool_calls: calls } : { role: 'assistant', content: text };
}
