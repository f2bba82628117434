import OpenAI, { APIError, APIUserAbortError, InternalServerError, RateLimitError } from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  estimateCompletionTokens,
  estimatePromptTokens,
  OTHER_ERROR_BODIES,
  startOpenAIServer,
  type ChatRequestBody,
  type LocalOpenAIServer,
} from '../../src/testing/index';

let server: LocalOpenAIServer;
let client: OpenAI;

beforeEach(async () => {
  server = await startOpenAIServer({ defaultModel: 'local-test' });
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
});

afterEach(async () => {
  await server.close();
});

const messages = [
  { role: 'system' as const, content: 'You are terse.' },
  { role: 'user' as const, content: 'Say hi' },
];

/** DeepSeek's extra delta field is not in the SDK's types. */
type DeltaWithReasoning = ChatCompletionChunk.Choice.Delta & { reasoning_content?: string };

async function collect(stream: AsyncIterable<ChatCompletionChunk>) {
  const chunks: ChatCompletionChunk[] = [];
  for await (const c of stream) chunks.push(c);
  const deltas = chunks.flatMap((c) => c.choices.map((ch) => ch.delta as DeltaWithReasoning));
  return {
    chunks,
    content: deltas.map((d) => d.content ?? '').join(''),
    reasoning: deltas.map((d) => d.reasoning_content ?? '').join(''),
    contentDeltas: deltas.filter((d) => d.content).length,
    finish: chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f !== null),
    usageChunks: chunks.filter((c) => c.usage),
  };
}

describe('local OpenAI server: replies', () => {
  it('answers a non-streaming request with the scripted content and estimated usage', async () => {
    server.enqueue({ kind: 'reply', content: 'hello there' });
    const res = await client.chat.completions.create({ model: 'deepseek-chat', messages });

    expect(res.choices[0]?.message.content).toBe('hello there');
    expect(res.choices[0]?.finish_reason).toBe('stop');
    expect(res.model).toBe('deepseek-chat');
    const body = server.requests[0]?.json as ChatRequestBody;
    expect(res.usage?.prompt_tokens).toBe(estimatePromptTokens(body));
    expect(res.usage?.completion_tokens).toBe(estimateCompletionTokens({ content: 'hello there' }));
    expect(res.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    expect(res._request_id).toBe('req_local_0');
  });

  it('streams content in N deltas and ends with a choices:[] usage chunk when include_usage is set', async () => {
    server.enqueue({ kind: 'reply', content: 'one two three four', chunks: 3, usage: { prompt_tokens: 1200, cached_tokens: 1024, completion_tokens: 7 } });
    const stream = await client.chat.completions.create({
      model: 'deepseek-chat',
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    const r = await collect(stream);

    expect(r.content).toBe('one two three four');
    expect(r.contentDeltas).toBe(3);
    expect(r.finish).toEqual(['stop']);
    const last = r.chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage).toMatchObject({ prompt_tokens: 1200, completion_tokens: 7, total_tokens: 1207, prompt_tokens_details: { cached_tokens: 1024 } });
    expect(r.usageChunks).toHaveLength(1);
  });

  it('sends no usage chunk without include_usage', async () => {
    server.enqueue({ kind: 'reply', content: 'x' });
    const r = await collect(await client.chat.completions.create({ model: 'm', messages, stream: true }));
    expect(r.usageChunks).toHaveLength(0);
    expect(r.chunks.every((c) => c.choices.length === 1)).toBe(true);
  });

  it('replies with tool calls only (null content, finish tool_calls), streaming and not', async () => {
    const toolCalls = [
      { id: 'call_1', name: 'read_file', arguments: '{"path":"src/a.ts"}' },
      { id: 'call_2', name: 'bash', arguments: '{"cmd":"ls"}' },
    ];
    server.enqueue({ kind: 'reply', toolCalls }, { kind: 'reply', toolCalls });

    const plain = await client.chat.completions.create({ model: 'm', messages });
    expect(plain.choices[0]?.message.content).toBeNull();
    expect(plain.choices[0]?.finish_reason).toBe('tool_calls');
    expect(plain.choices[0]?.message.tool_calls?.map((c) => (c.type === 'function' ? [c.id, c.function.name, c.function.arguments] : []))).toEqual(
      toolCalls.map((c) => [c.id, c.name, c.arguments]),
    );

    const r = await collect(await client.chat.completions.create({ model: 'm', messages, stream: true }));
    expect(r.content).toBe('');
    expect(r.finish).toEqual(['tool_calls']);
    const args = new Map<number, { id?: string; name?: string; args: string }>();
    for (const c of r.chunks) {
      for (const tc of c.choices[0]?.delta.tool_calls ?? []) {
        const cur = args.get(tc.index) ?? { args: '' };
        if (tc.id) cur.id = tc.id;
        if (tc.function?.name) cur.name = tc.function.name;
        cur.args += tc.function?.arguments ?? '';
        args.set(tc.index, cur);
      }
    }
    expect([...args.values()]).toEqual(toolCalls.map((c) => ({ id: c.id, name: c.name, args: c.arguments })));
  });

  it('sends DeepSeek reasoning_content deltas before the content, and as a message field', async () => {
    server.enqueue({ kind: 'reply', reasoning: 'Let me think.', content: 'Answer.', chunks: 2 }, { kind: 'reply', reasoning: 'Thinking.', content: 'Done.' });
    const r = await collect(await client.chat.completions.create({ model: 'deepseek-reasoner', messages, stream: true }));
    expect(r.reasoning).toBe('Let me think.');
    expect(r.content).toBe('Answer.');
    const firstContent = r.chunks.findIndex((c) => c.choices[0]?.delta.content);
    const lastReasoning = r.chunks.findLastIndex((c) => (c.choices[0]?.delta as DeltaWithReasoning | undefined)?.reasoning_content);
    expect(lastReasoning).toBeLessThan(firstContent);

    const plain = await client.chat.completions.create({ model: 'deepseek-reasoner', messages });
    expect((plain.choices[0]?.message as { reasoning_content?: string }).reasoning_content).toBe('Thinking.');
    expect(plain.usage?.completion_tokens_details?.reasoning_tokens).toBeGreaterThan(0);
  });

  it('reports finish reason length and empty content', async () => {
    server.enqueue({ kind: 'reply', content: 'truncated sum', finishReason: 'length' }, { kind: 'reply', content: '' });
    const cut = await collect(await client.chat.completions.create({ model: 'm', messages, stream: true }));
    expect(cut.finish).toEqual(['length']);
    expect(cut.content).toBe('truncated sum');

    const empty = await client.chat.completions.create({ model: 'm', messages });
    expect(empty.choices[0]?.message.content).toBe('');
    expect(empty.choices[0]?.finish_reason).toBe('stop');
    expect(empty.usage?.completion_tokens).toBe(0);
  });

  it('paces a slow stream by chunkDelayMs between events', async () => {
    server.enqueue({ kind: 'reply', content: 'abcdef', chunks: 3, chunkDelayMs: 15 });
    const started = performance.now();
    const stamps: number[] = [];
    for await (const c of await client.chat.completions.create({ model: 'm', messages, stream: true })) {
      if (c.choices[0]?.delta.content) stamps.push(performance.now() - started);
    }
    expect(stamps).toHaveLength(3);
    // role chunk, 3 content chunks, finish chunk: the finish arrives ≥ 4 delays after the first
    // event (a lower bound no machine load can break: a starved client may read the paced chunks
    // late and together, so the gaps between their arrivals prove nothing).
    expect(performance.now() - started).toBeGreaterThanOrEqual(4 * 15 - 5);
    expect([...stamps].sort((a, b) => a - b)).toEqual(stamps);
  });

  it('delays the answer by delayMs (a slow model), replies and errors alike; closing the server ends the wait', async () => {
    server.enqueue({ kind: 'reply', content: 'slow', delayMs: 120 }, { kind: 'status', ...OTHER_ERROR_BODIES.serverError, delayMs: 120 });
    let started = performance.now();
    const reply = await client.chat.completions.create({ model: 'm', messages, stream: true });
    expect(performance.now() - started).toBeGreaterThanOrEqual(115); // no header before the delay
    expect((await collect(reply)).content).toBe('slow');
    started = performance.now();
    await expect(client.chat.completions.create({ model: 'm', messages })).rejects.toBeInstanceOf(InternalServerError);
    expect(performance.now() - started).toBeGreaterThanOrEqual(115);

    // A 60 s delay does not keep a closing server (or the test process) waiting.
    server.enqueue({ kind: 'reply', content: 'never', delayMs: 60_000 });
    const pending = client.chat.completions.create({ model: 'm', messages }).catch((e: unknown) => e);
    await server.waitForRequest(2);
    expect(server.requests[2]!.closed).toBe(false);
    await server.close();
    expect(await pending).toBeInstanceOf(APIError);
  });

  it('uses the queue first, then the handler, then the echo reply', async () => {
    server.enqueue({ kind: 'reply', content: 'queued' });
    const first = await client.chat.completions.create({ model: 'm', messages });
    server.setHandler((req) => ({ kind: 'reply', content: `handled #${req.index} with ${req.body.messages?.length} messages` }));
    const second = await client.chat.completions.create({ model: 'm', messages });
    server.setHandler(undefined);
    const third = await client.chat.completions.create({ model: 'm', messages });

    expect(first.choices[0]?.message.content).toBe('queued');
    expect(second.choices[0]?.message.content).toBe('handled #1 with 2 messages');
    expect(third.choices[0]?.message.content).toBe('echo: Say hi');
    expect(third.model).toBe('m');
    expect(server.requests.map((r) => r.scenario)).toEqual(['reply', 'reply', 'reply']);
  });

  it('lists the default model and 404s unknown routes', async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['local-test']);
    await expect(client.embeddings.create({ model: 'e', input: 'x' })).rejects.toMatchObject({ status: 404 });
  });
});

describe('local OpenAI server: recording', () => {
  it('records every request body byte for byte', async () => {
    const sent: Uint8Array[] = [];
    const spying = new OpenAI({
      baseURL: server.baseURL,
      apiKey: 'test',
      maxRetries: 0,
      fetch: async (url, init) => {
        const body = init?.body;
        sent.push(typeof body === 'string' ? Buffer.from(body, 'utf8') : new Uint8Array(body as ArrayBuffer));
        return fetch(url, init);
      },
    });
    server.enqueue({ kind: 'reply', content: 'ok' });
    await spying.chat.completions.create({
      model: 'deepseek-chat',
      messages: [
        { role: 'system', content: 'Keep paths exact: /tmp/ü.txt' },
        { role: 'user', content: '日本語 and emoji 🧪 and "quotes" \\ backslash\n' },
      ],
      tools: [{ type: 'function', function: { name: 'read', parameters: { type: 'object', properties: {} } } }],
      max_tokens: 64,
    });

    const rec = server.requests[0]!;
    expect(rec.method).toBe('POST');
    expect(rec.path).toBe('/v1/chat/completions');
    expect(rec.headers['authorization']).toBe('Bearer test');
    expect(Buffer.compare(rec.rawBytes, Buffer.from(sent[0]!))).toBe(0);
    expect(rec.raw).toBe(Buffer.from(sent[0]!).toString('utf8'));
    expect(rec.json).toMatchObject({ model: 'deepseek-chat', max_tokens: 64 });
    expect(rec.aborted).toBe(false);
    expect((await server.waitForClose(0)).closed).toBe(true);
  });

  it('waitForRequest resolves when the request arrives and rejects when the server closes first', async () => {
    const arrival = server.waitForRequest(0);
    server.enqueue({ kind: 'reply', content: 'x' });
    await client.chat.completions.create({ model: 'm', messages });
    expect((await arrival).index).toBe(0);

    const never = server.waitForRequest(5);
    await server.close();
    await expect(never).rejects.toThrow(/closed/);
  });
});

describe('local OpenAI server: hangs and aborts', () => {
  it('SDK behaviour: aborting mid-stream ends the iteration SILENTLY (no error); the server records the abort', async () => {
    server.enqueue({ kind: 'hang', afterChunks: 2, content: 'half an answer' });
    const controller = new AbortController();
    const stream = await client.chat.completions.create({ model: 'm', messages, stream: true }, { signal: controller.signal });
    const seen: string[] = [];
    let threw: unknown;
    try {
      for await (const c of stream) {
        seen.push(c.choices[0]?.delta.content ?? '');
        if (seen.length === 3) controller.abort();
      }
    } catch (err) {
      threw = err;
    }
    // If this starts failing, openai changed how it surfaces aborts mid-stream: callers that
    // check `signal.aborted` after the loop (the summarizer) must be revisited.
    expect(threw).toBeUndefined();
    expect(seen.join('')).toBe('half an answer');
    const rec = await server.waitForClose(0);
    expect(rec.aborted).toBe(true);
    expect(rec.scenario).toBe('hang');
  });

  it('aborting before the headers rejects with APIUserAbortError and is recorded', async () => {
    server.enqueue({ kind: 'hang', sendHeaders: false });
    const controller = new AbortController();
    const pending = client.chat.completions.create({ model: 'm', messages, stream: true }, { signal: controller.signal });
    await server.waitForRequest(0);
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(APIUserAbortError);
    expect((await server.waitForClose(0)).aborted).toBe(true);
  });

  it('aborting a non-streaming request whose headers were sent rejects with APIUserAbortError', async () => {
    server.enqueue({ kind: 'hang' });
    const controller = new AbortController();
    const pending = client.chat.completions.create({ model: 'm', messages }, { signal: controller.signal });
    await server.waitForRequest(0);
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(APIUserAbortError);
    expect((await server.waitForClose(0)).aborted).toBe(true);
  });

  it('close() tears down a hung stream so nothing keeps the process alive', async () => {
    server.enqueue({ kind: 'hang', afterChunks: 1 });
    const stream = await client.chat.completions.create({ model: 'm', messages, stream: true });
    const iterating = (async () => {
      for await (const _ of stream) {
        // drain
      }
    })();
    await server.waitForRequest(0);
    await server.close();
    // A socket destroyed mid-body is a network error to the SDK, not a silent end.
    await expect(iterating).rejects.toThrow();
    expect(server.requests[0]?.aborted).toBe(true);
  });
});

describe('local OpenAI server: errors', () => {
  it('429 surfaces as RateLimitError with no retry when maxRetries is 0', async () => {
    server.enqueue({ kind: 'status', ...OTHER_ERROR_BODIES.rateLimit, headers: { 'retry-after': '1' } });
    const err = await client.chat.completions.create({ model: 'm', messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err).toMatchObject({ status: 429, code: 'rate_limit_exceeded' });
    expect((err as RateLimitError).headers?.get('retry-after')).toBe('1');
    expect(server.requests).toHaveLength(1);
  });

  it('500 surfaces as InternalServerError with no retry when maxRetries is 0, also for a streaming request', async () => {
    server.enqueue({ kind: 'status', ...OTHER_ERROR_BODIES.serverError });
    const err = await client.chat.completions.create({ model: 'm', messages, stream: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InternalServerError);
    expect((err as InternalServerError).message).toBe('500 The server had an error while processing your request. Sorry about that!');
    expect(server.requests).toHaveLength(1);
  });

  it('sends a raw string body verbatim', async () => {
    server.enqueue({ kind: 'status', status: 502, body: '<html>Bad gateway</html>' });
    const err = await client.chat.completions.create({ model: 'm', messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect((err as APIError).message).toBe('502 <html>Bad gateway</html>');
  });

  it.each([['error' as const], [null]])('a mid-stream error event (event line %s) throws APIError with no status after the deltas', async (event) => {
    server.enqueue({ kind: 'streamError', afterChunks: 2, content: 'so far', error: { message: 'upstream died', type: 'server_error' }, event });
    const seen: string[] = [];
    const err = await (async () => {
      for await (const c of await client.chat.completions.create({ model: 'm', messages, stream: true })) {
        seen.push(c.choices[0]?.delta.content ?? '');
      }
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect(err).toMatchObject({ status: undefined, message: 'upstream died', type: 'server_error' });
    expect(seen.join('')).toBe('so far');
  });

  it('a streamError scenario answers a non-streaming request with a 500', async () => {
    server.enqueue({ kind: 'streamError' });
    await expect(client.chat.completions.create({ model: 'm', messages })).rejects.toBeInstanceOf(InternalServerError);
  });

  it('a throwing handler becomes a 500 that names the failure', async () => {
    server.setHandler(() => {
      throw new Error('script bug');
    });
    await expect(client.chat.completions.create({ model: 'm', messages })).rejects.toThrow(/script bug/);
  });
});

describe('local OpenAI server: llama.cpp limits (contextWindow)', () => {
  let limited: LocalOpenAIServer;
  let limitedClient: OpenAI;
  beforeEach(async () => {
    limited = await startOpenAIServer({ contextWindow: 200 });
    limitedClient = new OpenAI({ baseURL: limited.baseURL, apiKey: 'test', maxRetries: 0 });
  });
  afterEach(async () => {
    await limited.close();
  });

  const prompt = estimatePromptTokens({ messages, tools: [] });
  const long = 'word '.repeat(400); // 500 tokens by the server's estimate

  it('stops generation at the window (prompt + generated), finish length, usage counting what was generated', async () => {
    limited.enqueue({ kind: 'reply', content: long, toolCalls: [{ id: 'c', name: 'x', arguments: '{}' }] });
    const stream = await limitedClient.chat.completions.create({
      model: 'm',
      messages,
      max_tokens: 1000,
      stream: true,
      stream_options: { include_usage: true },
    });
    const { chunks, content } = await collect(stream);
    const usage = chunks.at(-1)!.usage!;
    expect(usage).toMatchObject({ prompt_tokens: prompt, completion_tokens: 200 - prompt });
    expect(chunks.flatMap((c) => c.choices).find((c) => c.finish_reason)?.finish_reason).toBe('length');
    expect(long.startsWith(content)).toBe(true);
    expect(Buffer.byteLength(content)).toBe(4 * (200 - prompt));
    expect(chunks.some((c) => c.choices.some((ch) => ch.delta.tool_calls))).toBe(false);
  });

  it('stops at max_tokens (or max_completion_tokens) when that comes first, and sends a reply that fits whole', async () => {
    limited.enqueue({ kind: 'reply', content: long }, { kind: 'reply', content: long }, { kind: 'reply', content: 'short' });
    const capped = await limitedClient.chat.completions.create({ model: 'm', messages, max_tokens: 10 });
    expect(capped.choices[0]).toMatchObject({ finish_reason: 'length', message: { content: long.slice(0, 40) } });
    expect(capped.usage).toMatchObject({ prompt_tokens: prompt, completion_tokens: 10 });
    const cappedNew = await limitedClient.chat.completions.create({ model: 'm', messages, max_completion_tokens: 7 });
    expect(cappedNew.usage?.completion_tokens).toBe(7);
    const whole = await limitedClient.chat.completions.create({ model: 'm', messages, max_tokens: 10 });
    expect(whole.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'short' } });
  });

  it("answers a prompt that reaches the window with llama.cpp's exceed_context_size_error", async () => {
    const big = [{ role: 'user' as const, content: 'x'.repeat(1000) }];
    const err = await limitedClient.chat.completions.create({ model: 'm', messages: big }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    const n = estimatePromptTokens({ messages: big, tools: [] });
    expect(err).toMatchObject({ status: 400, type: 'exceed_context_size_error' });
    expect((err as APIError).message).toBe(`400 request (${n} tokens) exceeds the available context size (200 tokens), try increasing it`);
  });

  it('refuses a window that is not a whole number of tokens', async () => {
    await expect(startOpenAIServer({ contextWindow: 0 })).rejects.toThrow(/contextWindow must be a whole number/);
    await expect(startOpenAIServer({ contextWindow: 1.5 })).rejects.toThrow(/contextWindow must be a whole number/);
  });
});
