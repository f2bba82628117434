import { PI_FIXTURE } from '../../helpers/pi-data';
import { readFileSync } from 'node:fs';
import OpenAI, { APIError, APIUserAbortError, InternalServerError, RateLimitError } from 'openai';
import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { frameCheckpoint } from '../../../src/services/summarizing';
import { classifyRequestError } from '../../../src/services/overflow';
import { SummarizerError, type SummaryRequest } from '../../../src/services/summarizing';
import { defaultSafetyMargin, inputBudget, priceRequest, truncationMarker } from '../../../src/services/summarizing';
import { COMPACTION_INSTRUCTION, SUMMARY_SECTIONS, buildInstruction } from '../../../src/services/summarizing';
import { OpenAISummarizer } from '../../../src/services/summarizing';
import { getTokenizer } from '../../../src/services/metering';
import type { ChatMessage } from '../../../src/session/derive';
import { COMPACTION_CHECKPOINT_SOURCE, type SurfaceEvent } from '../../../src/session/events';
import { importPiFile } from '../../../src/transcripts/pi';
import { Session } from '../../../src/session/session';
import { SessionWriter } from '../../../src/session/writer';
import { OTHER_ERROR_BODIES, OVERFLOW_BODIES, startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../../src/testing/index';

let server: LocalOpenAIServer;
let client: OpenAI;

beforeEach(async () => {
  server = await startOpenAIServer({ defaultModel: 'local-test' });
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
});

afterEach(async () => {
  await server.close();
});

const count = (text: string): number => getTokenizer('o200k_base').count(text);

const TOOLS: ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'read',
      description: 'Read a file — UTF-8, returns the text. Ünïcödé and 日本語 stay as they are.',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    },
  },
  {
    type: 'function',
    function: { name: 'bash', description: 'Run a shell command.', parameters: { type: 'object', properties: { command: { type: 'string' } } } },
  },
];

const SUMMARY = '## Primary Request and Intent\n- Fix the parser in `src/parse.ts`\n\n## Key Technical Concepts\n(none)';

/** A small conversation with a tool batch, non-ASCII text and an optional kept checkpoint after the system prompt. */
function conversation(options: { checkpoint?: boolean } = {}) {
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  w.startTurn();
  w.startStep();
  w.request({ provider: 'local', model: 'local-chat', systemPrompt: 'You are a careful coding agent. Café ☕ — keep paths exact.', tools: TOOLS });
  if (options.checkpoint) w.user(frameCheckpoint('## Primary Request and Intent\n- Earlier: set up the repo'), COMPACTION_CHECKPOINT_SOURCE);
  w.user('Fix the parser in src/parse.ts — it fails on "quoted \\ strings" and emoji 🧪.');
  w.assistant({
    text: 'Reading both files first.',
    toolCalls: [
      { id: 'call_1', name: 'read', arguments: '{"path":"src/parse.ts"}' },
      { id: 'call_2', name: 'bash', arguments: '{"command":"npm test -- parse"}' },
    ],
  });
  w.toolResult('call_1', 'export function parse(s: string) {\n  return s.split("\\"");\n}', { toolName: 'read' });
  w.toolResult('call_2', 'FAIL test/parse.test.ts\nError: expected 2 parts, got 3', { toolName: 'bash', isError: true });
  w.assistant({ text: 'The split ignores escapes; I will rewrite it with a small scanner. 日本語 comments stay.' });
  w.user('Go ahead, and keep the public signature.');
  const messages = session.deriveMessages();
  const surface = session.surface;
  const events = surface.slice(0).map((seq) => session.event(seq) as SurfaceEvent);
  return { session, messages, events };
}

function summaryRequest(messages: readonly ChatMessage[], events: readonly SurfaceEvent[], extra: Partial<SummaryRequest> = {}): SummaryRequest {
  return {
    system: messages[0],
    tools: TOOLS as unknown as Record<string, unknown>[],
    context: [],
    messages: messages.slice(1),
    events: events.slice(1),
    target: { provider: 'local', model: 'local-chat' },
    maxTokens: 4096,
    countTokens: count,
    ...extra,
  };
}

// ---------------------------------------------------------------------------------------
// Raw JSON helpers: compare what went over the wire, not a re-serialisation of it.

/** The raw text of each top-level member value of a JSON object text. */
function rawMembers(raw: string): Map<string, string> {
  const out = new Map<string, string>();
  let i = raw.indexOf('{') + 1;
  while (i < raw.length) {
    while (/[\s,]/.test(raw[i]!)) i++;
    if (raw[i] === '}') break;
    const keyEnd = scanValue(raw, i);
    const key = JSON.parse(raw.slice(i, keyEnd)) as string;
    i = keyEnd;
    while (/[\s:]/.test(raw[i]!)) i++;
    const end = scanValue(raw, i);
    out.set(key, raw.slice(i, end));
    i = end;
  }
  return out;
}

/** The raw text of each element of a JSON array text. */
function rawElements(raw: string): string[] {
  const out: string[] = [];
  let i = 1;
  while (i < raw.length) {
    while (/[\s,]/.test(raw[i]!)) i++;
    if (raw[i] === ']') break;
    const end = scanValue(raw, i);
    out.push(raw.slice(i, end));
    i = end;
  }
  return out;
}

/** End index (exclusive) of the JSON value starting at `start`. */
function scanValue(raw: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < raw.length; i++) {
    const c = raw[i]!;
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') {
        inString = false;
        if (depth === 0) return i + 1;
      }
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      depth--;
      if (depth === 0) return i + 1;
    } else if (depth === 0 && /[,}\]\s]/.test(c)) return i;
  }
  return raw.length;
}

function bodyOf(index: number): ChatRequestBody {
  return server.requests[index]!.json as ChatRequestBody;
}

async function rejection(p: Promise<unknown>): Promise<SummarizerError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SummarizerError);
  return err as SummarizerError;
}

const signal = () => new AbortController().signal;

/** A fetch that asks the server for no usage chunk (as some proxies answer). */
const withoutUsage: typeof fetch = async (url, init) => {
  const body = JSON.parse(String(init?.body)) as Record<string, unknown>;
  delete body['stream_options'];
  return fetch(url, { ...init, body: JSON.stringify(body) });
};

// ---------------------------------------------------------------------------------------

describe('the compaction instruction', () => {
  it("is the reference's text word for word, with the eight sections in order", () => {
    // Extracted verbatim from the reference's package README (shared/seeds/003_*.txt, "Compaction instruction").
    const reference = readFileSync(new URL('../../fixtures/reference-compaction-instruction.txt', import.meta.url), 'utf8');
    expect(COMPACTION_INSTRUCTION).toBe(reference);
    expect([...COMPACTION_INSTRUCTION.matchAll(/^## (.+)$/gm)].map((m) => m[1])).toEqual([...SUMMARY_SECTIONS]);
    expect(buildInstruction()).toBe(COMPACTION_INSTRUCTION);
    expect(buildInstruction({ focus: '   ', keptCheckpoints: 0 })).toBe(COMPACTION_INSTRUCTION);
  });

  it('adds the kept-checkpoints paragraph, then the focus, after the reference text', () => {
    const text = buildInstruction({ keptCheckpoints: 2, focus: 'the parser' });
    expect(text.startsWith(`${COMPACTION_INSTRUCTION}\n\nThe first 2 messages after the system prompt are earlier checkpoints`)).toBe(true);
    expect(text).toContain('Condense only the messages that follow them');
    expect(text.endsWith('\nthe parser')).toBe(true);
  });
});

describe('OpenAISummarizer: the request', () => {
  it('replays the conversation prefix byte for byte and appends exactly one instruction', async () => {
    const { messages, events } = conversation();
    // The conversation's own request, as an agent loop sends it.
    server.enqueue({ kind: 'reply', content: 'conversation reply' }, { kind: 'reply', content: SUMMARY });
    const stream = await client.chat.completions.create({
      model: 'local-chat',
      messages: [...messages],
      tools: TOOLS,
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const _ of stream) {
      // drain
    }
    const result = await new OpenAISummarizer({ ledger: false, client }).summarize(summaryRequest(messages, events), signal());

    const conv = rawMembers(server.requests[0]!.raw);
    const summ = rawMembers(server.requests[1]!.raw);
    const convMessages = rawElements(conv.get('messages')!);
    const summMessages = rawElements(summ.get('messages')!);
    expect(summMessages).toHaveLength(convMessages.length + 1);
    expect(summMessages.slice(0, -1).join(',')).toBe(convMessages.join(','));
    expect(Buffer.from(summ.get('tools')!).equals(Buffer.from(conv.get('tools')!))).toBe(true);
    // Not escaped or re-encoded on the way: the non-ASCII bytes are on the wire as they are.
    expect(summ.get('messages')).toContain('Café ☕');
    expect(summ.get('tools')).toContain('日本語');

    const body = bodyOf(1);
    expect(body.messages?.at(-1)).toEqual({ role: 'user', content: COMPACTION_INSTRUCTION });
    expect(body.messages?.filter((m) => m.content === COMPACTION_INSTRUCTION)).toHaveLength(1);
    expect(body).toMatchObject({ model: 'local-chat', max_tokens: 4096, stream: true, stream_options: { include_usage: true } });
    expect(body).not.toHaveProperty('tool_choice');
    expect(result).toMatchObject({ text: SUMMARY, provider: 'local', model: 'local-chat', requests: 1 });
  });

  it('with kept checkpoints, replays them after the system prompt and tells the model not to merge them', async () => {
    const { messages, events } = conversation({ checkpoint: true });
    server.enqueue({ kind: 'reply', content: 'conversation reply' }, { kind: 'reply', content: SUMMARY });
    await client.chat.completions.create({ model: 'local-chat', messages: [...messages], tools: TOOLS });
    await new OpenAISummarizer({ client }).summarize(
      summaryRequest(messages, events, { context: [messages[1]!], messages: messages.slice(2), events: events.slice(2) }),
      signal(),
    );

    const convMessages = rawElements(rawMembers(server.requests[0]!.raw).get('messages')!);
    const summMessages = rawElements(rawMembers(server.requests[1]!.raw).get('messages')!);
    expect(summMessages.slice(0, -1).join(',')).toBe(convMessages.join(','));
    const instruction = bodyOf(1).messages!.at(-1)!.content as string;
    expect(instruction.startsWith(COMPACTION_INSTRUCTION)).toBe(true);
    expect(instruction).toContain('The first message after the system prompt is an earlier checkpoint (<compacted-summary> blocks) that stay');
    expect(instruction).toContain('Condense only the messages that follow it');
  });

  it('omits `tools` when the conversation had none, and sends no system message when there is none', async () => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'reply', content: SUMMARY });
    await new OpenAISummarizer({ client }).summarize(summaryRequest(messages, events, { tools: [], system: undefined }), signal());
    const body = bodyOf(0);
    expect(body).not.toHaveProperty('tools');
    expect(body.messages?.[0]?.role).toBe('user');
    expect(body.messages).toHaveLength(messages.length);
  });

  it('adds the focus after the reference instruction', async () => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'reply', content: SUMMARY });
    await new OpenAISummarizer({ client }).summarize(summaryRequest(messages, events, { focus: 'the escape handling in parse()' }), signal());
    const instruction = bodyOf(0).messages!.at(-1)!.content as string;
    expect(instruction.startsWith(COMPACTION_INSTRUCTION)).toBe(true);
    expect(instruction.endsWith('while keeping every section:\nthe escape handling in parse()')).toBe(true);
  });

  it("sends a separately configured summarization model and reports the route's model, not the name the server answered with (llama.cpp answers with its weights' path; docs/local-models.md#counts-the-tokenizer-is-not-ours)", async () => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'reply', content: SUMMARY, model: '/models/cheap-summarizer-q4.gguf' });
    const result = await new OpenAISummarizer({ ledger: false, client }).summarize(
      summaryRequest(messages, events, { target: { provider: 'deepseek', model: 'cheap-summarizer' }, maxTokens: 1234 }),
      signal(),
    );
    expect(bodyOf(0)).toMatchObject({ model: 'cheap-summarizer', max_tokens: 1234 });
    expect(result).toMatchObject({ provider: 'deepseek', model: 'cheap-summarizer' });
  });

  it('sends the cap as max_completion_tokens when told to (OpenAI reasoning models reject max_tokens)', async () => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'reply', content: SUMMARY });
    await new OpenAISummarizer({ ledger: false, client, outputCapField: 'max_completion_tokens' }).summarize(
      summaryRequest(messages, events, { maxTokens: 777 }),
      signal(),
    );
    expect(bodyOf(0)).toMatchObject({ max_completion_tokens: 777 });
    expect(bodyOf(0)).not.toHaveProperty('max_tokens');
  });
});

describe('OpenAISummarizer: the response', () => {
  it('keeps only the text: reasoning is dropped; usage and cached tokens are kept', async () => {
    const { messages, events } = conversation();
    server.enqueue({
      kind: 'reply',
      reasoning: 'Let me think about what matters here.',
      content: `\n${SUMMARY}\n`,
      chunks: 4,
      usage: { prompt_tokens: 5210, cached_tokens: 4992, completion_tokens: 180 },
    });
    const result = await new OpenAISummarizer({ ledger: false, client }).summarize(summaryRequest(messages, events), signal());
    expect(result.text).toBe(SUMMARY);
    expect(result.text).not.toContain('Let me think');
    expect(result.usage).toMatchObject({ promptTokens: 5210, cachedTokens: 4992, completionTokens: 180 });
    expect(result.usage?.reasoningTokens).toBeGreaterThan(0);
    expect(result.requests).toBe(1);
  });

  describe("finish reason 'length' (summary-truncated, never the cut text) says which limit stopped it", () => {
    // A server that behaves like llama-server -c 2000: it stops at max_tokens or at its window, whichever comes first.
    let llama: LocalOpenAIServer;
    let llamaClient: OpenAI;
    beforeEach(async () => {
      llama = await startOpenAIServer({ contextWindow: 2000 });
      llamaClient = new OpenAI({ baseURL: llama.baseURL, apiKey: 'test', maxRetries: 0 });
    });
    afterEach(async () => {
      await llama.close();
    });
    const long = `${SUMMARY}\n${'- detail\n'.repeat(2000)}`;

    it('max_tokens reached: raise maxTokens', async () => {
      const { messages, events } = conversation();
      llama.enqueue({ kind: 'reply', content: long });
      const err = await rejection(
        new OpenAISummarizer({ ledger: false, client: llamaClient }).summarize(summaryRequest(messages, events, { maxTokens: 100 }), signal()),
      );
      expect(err.code).toBe('summary-truncated');
      expect(err.message).toContain('cut off at max_tokens 100 (finish reason "length")');
      expect(err.message).toContain('Raise maxTokens');
      expect(err.message).not.toContain('window');
    });

    it("the server's window reached before max_tokens (llama.cpp): a smaller input, not a larger maxTokens", async () => {
      const { messages, events } = conversation();
      llama.enqueue({ kind: 'reply', content: long });
      // The registry says 128k; the server really has 2000. max_tokens 4096 is never reached.
      const err = await rejection(
        new OpenAISummarizer({ ledger: false, client: llamaClient }).summarize(
          summaryRequest(messages, events, { maxTokens: 4096, contextWindow: 128_000 }),
          signal(),
        ),
      );
      expect(err.code).toBe('summary-truncated');
      expect(err.message).toMatch(
        /cut off by the server's context window, not by max_tokens: prompt \d+ \+ generated \d+ = 2000 tokens reached the server's window \(before max_tokens 4096\)/,
      );
      expect(err.message).toContain('Raising maxTokens cannot help');
      expect(err.message).toContain('contextWindow');
      expect(llama.requests).toHaveLength(1);
    });

    it('both limits at once (prompt + max_tokens = the known window): names the window', async () => {
      const { messages, events } = conversation();
      // The server counts 1500 prompt tokens, so max_tokens 500 ends exactly at its window of 2000.
      llama.enqueue({ kind: 'reply', content: long, usage: { prompt_tokens: 1500 } });
      const err = await rejection(
        new OpenAISummarizer({ ledger: false, client: llamaClient }).summarize(
          summaryRequest(messages, events, { maxTokens: 500, contextWindow: 2000 }),
          signal(),
        ),
      );
      expect(err.message).toContain("= 2000 tokens reached the model's window of 2000");
      expect(err.message).toContain('Raising maxTokens cannot help');
    });

    it('without usage, says that either limit may have been reached', async () => {
      const { messages, events } = conversation();
      server.enqueue({ kind: 'reply', content: SUMMARY, finishReason: 'length' });
      const stream = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0, fetch: withoutUsage });
      const err = await rejection(new OpenAISummarizer({ ledger: false, client: stream }).summarize(summaryRequest(messages, events), signal()));
      expect(err.code).toBe('summary-truncated');
      expect(err.message).toContain("unknown whether max_tokens 4096 or the server's own context window was reached");
    });
  });

  it.each([
    ['empty', ''],
    ['whitespace-only', ' \n\t \n'],
  ])('rejects %s text as summary-empty', async (_name, content) => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'reply', content });
    const err = await rejection(new OpenAISummarizer({ ledger: false, client }).summarize(summaryRequest(messages, events), signal()));
    expect(err.code).toBe('summary-empty');
  });

  it('rejects a reply made only of tool calls as summary-tool-calls', async () => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'reply', toolCalls: [{ id: 'c9', name: 'read', arguments: '{"path":"src/parse.ts"}' }] });
    const err = await rejection(new OpenAISummarizer({ client }).summarize(summaryRequest(messages, events), signal()));
    expect(err.code).toBe('summary-tool-calls');
  });

  it('rejects a reply made only of reasoning as summary-empty', async () => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'reply', reasoning: 'thinking only', content: '' });
    const err = await rejection(new OpenAISummarizer({ client }).summarize(summaryRequest(messages, events), signal()));
    expect(err.code).toBe('summary-empty');
  });
});

describe('OpenAISummarizer: failures and retries', () => {
  it('429 is summary-request with the RateLimitError as cause, sent once even when the client itself retries', async () => {
    const retrying = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 2 });
    const { messages, events } = conversation();
    server.enqueue({ kind: 'status', ...OTHER_ERROR_BODIES.rateLimit, headers: { 'retry-after': '0' } });
    const err = await rejection(new OpenAISummarizer({ client: retrying }).summarize(summaryRequest(messages, events), signal()));
    expect(err.code).toBe('summary-request');
    expect(err.cause).toBeInstanceOf(RateLimitError);
    expect(classifyRequestError(err.cause).kind).toBe('rate-limit');
    expect(server.requests).toHaveLength(1);
    expect(retrying.maxRetries).toBe(2);
  });

  it('500 is summary-request with the InternalServerError as cause', async () => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'status', ...OTHER_ERROR_BODIES.serverError });
    const err = await rejection(new OpenAISummarizer({ client }).summarize(summaryRequest(messages, events), signal()));
    expect(err.code).toBe('summary-request');
    expect(err.cause).toBeInstanceOf(InternalServerError);
    expect(server.requests).toHaveLength(1);
  });

  it('maxRetries is passed per request', async () => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'status', ...OTHER_ERROR_BODIES.serverError, headers: { 'retry-after-ms': '1' } }, { kind: 'reply', content: SUMMARY });
    const result = await new OpenAISummarizer({ ledger: false, client, maxRetries: 1 }).summarize(summaryRequest(messages, events), signal());
    expect(result.text).toBe(SUMMARY);
    expect(server.requests).toHaveLength(2);
    expect(client.maxRetries).toBe(0);
  });

  it('an error event mid-stream is summary-request, not a partial summary', async () => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'streamError', afterChunks: 2, content: '## Primary Request', error: { message: 'upstream died', type: 'server_error' } });
    const err = await rejection(new OpenAISummarizer({ client }).summarize(summaryRequest(messages, events), signal()));
    expect(err.code).toBe('summary-request');
    expect(err.cause).toBeInstanceOf(APIError);
    expect(classifyRequestError(err.cause).kind).toBe('server');
  });

  it('keeps the text of a flat-body overflow (vLLM) so the engine can classify it', async () => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'status', ...OVERFLOW_BODIES.vllm });
    const err = await rejection(new OpenAISummarizer({ client }).summarize(summaryRequest(messages, events), signal()));
    expect(err.code).toBe('summary-request');
    expect((err.cause as Error).message).toContain('maximum context length is 4096 tokens');
    expect(classifyRequestError(err.cause)).toMatchObject({ kind: 'context-overflow', limitTokens: 4096 });
  });
});

describe('OpenAISummarizer: cancellation', () => {
  it('an already aborted signal sends nothing', async () => {
    const { messages, events } = conversation();
    const controller = new AbortController();
    controller.abort(new Error('stopped'));
    const err = await rejection(new OpenAISummarizer({ client }).summarize(summaryRequest(messages, events), controller.signal));
    expect(err.code).toBe('summary-cancelled');
    expect(server.requests).toHaveLength(0);
  });

  it('abort before the response headers is summary-cancelled (APIUserAbortError), and the server saw the abort', async () => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'hang', sendHeaders: false });
    const controller = new AbortController();
    const pending = new OpenAISummarizer({ client }).summarize(summaryRequest(messages, events), controller.signal);
    await server.waitForRequest(0);
    controller.abort();
    const err = await rejection(pending);
    expect(err.code).toBe('summary-cancelled');
    expect(err.cause).toBeInstanceOf(APIUserAbortError);
    expect((await server.waitForClose(0)).aborted).toBe(true);
  });

  it('abort mid-stream (the SDK ends the stream silently) is summary-cancelled, never the partial text', async () => {
    let headersSeen!: () => void;
    const headers = new Promise<void>((resolve) => (headersSeen = resolve));
    const watching = new OpenAI({
      baseURL: server.baseURL,
      apiKey: 'test',
      maxRetries: 0,
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        headersSeen();
        return res;
      },
    });
    const { messages, events } = conversation();
    server.enqueue({ kind: 'hang', afterChunks: 3, content: '## Primary Request and Intent\n- partial' });
    const controller = new AbortController();
    const pending = new OpenAISummarizer({ client: watching }).summarize(summaryRequest(messages, events), controller.signal);
    await headers;
    await new Promise((r) => setTimeout(r, 50)); // let the three deltas be read
    const reason = new Error('user pressed Esc');
    controller.abort(reason);
    const err = await rejection(pending);
    expect(err.code).toBe('summary-cancelled');
    // The silent end (not an APIUserAbortError): detected by checking the signal after the loop.
    expect(err.cause).toBe(reason);
    expect(err.message).toContain('user pressed Esc');
    const rec = await server.waitForClose(0);
    expect(rec.aborted).toBe(true);
    expect(rec.scenario).toBe('hang');
  });
});

// ---------------------------------------------------------------------------------------
// Bounded input

/** Every tool message has its call earlier in the same request, and every call its result. */
function expectPaired(messages: NonNullable<ChatRequestBody['messages']>): void {
  const calls = new Set<string>();
  const answered = new Set<string>();
  for (const m of messages) {
    if (m.role === 'assistant') for (const c of (m['tool_calls'] as Array<{ id: string }> | undefined) ?? []) calls.add(c.id);
    if (m.role === 'tool') {
      const id = m['tool_call_id'] as string;
      expect(calls.has(id), `tool result ${id} without its call in the same request`).toBe(true);
      answered.add(id);
    }
  }
  for (const id of calls) expect(answered.has(id), `tool call ${id} without its result in the same request`).toBe(true);
}

describe('OpenAISummarizer: bounded input', () => {
  it('refuses before sending when system + tools + instruction alone do not fit', async () => {
    const { messages, events } = conversation();
    const err = await rejection(
      new OpenAISummarizer({ ledger: false, client }).summarize(summaryRequest(messages, events, { contextWindow: 1500, maxTokens: 500 }), signal()),
    );
    expect(err.code).toBe('summary-input-too-large');
    expect(err.message).toMatch(/alone cost \d+ tokens, and the input budget is \d+ \(window 1500 − max_tokens 500 − safety margin 542\)/);
    expect(server.requests).toHaveLength(0);
  });

  it('sends as is when the request fits the budget', async () => {
    const { messages, events } = conversation();
    server.enqueue({ kind: 'reply', content: SUMMARY });
    const summarizer = new OpenAISummarizer({ client });
    const result = await summarizer.summarize(summaryRequest(messages, events, { contextWindow: 128_000 }), signal());
    expect(result.bounding).toMatchObject({ mode: 'as-is', chunks: 1, cutBlocks: 0 });
    expect(bodyOf(0).messages).toHaveLength(messages.length + 1);
  });

  it('cuts an oversized tool result (head and tail kept) when that is enough for one request', async () => {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    w.startTurn();
    w.startStep();
    w.request({ provider: 'local', model: 'm', systemPrompt: 'System prompt.', tools: TOOLS });
    w.user('Why does the build fail?');
    w.assistant({ toolCalls: [{ id: 'c1', name: 'bash', arguments: '{"command":"npm run build"}' }] });
    const log = [
      '> build start',
      ...Array.from({ length: 3000 }, (_, i) => `compiling module ${i} of 3000 ok`),
      'error TS2304: Cannot find name "parse".',
    ].join('\n');
    w.toolResult('c1', log, { toolName: 'bash' });
    w.assistant({ text: 'The build fails on a missing name.' });
    const messages = session.deriveMessages();
    const events = session.surface.slice(0).map((s) => session.event(s) as SurfaceEvent);

    server.enqueue({ kind: 'reply', content: SUMMARY });
    const summarizer = new OpenAISummarizer({ ledger: false, client });
    const request = summaryRequest(messages, events, { contextWindow: 16_000, maxTokens: 2_000 });
    const budget = inputBudget(16_000, 2_000, defaultSafetyMargin(16_000));
    const result = await summarizer.summarize(request, signal());

    expect(result.bounding).toMatchObject({ mode: 'truncated', chunks: 1, cutBlocks: 1 });
    const body = bodyOf(0);
    expect(priceRequest(body.messages as ChatMessage[], body.tools as Record<string, unknown>[], count)).toBeLessThanOrEqual(budget);
    const tool = body.messages!.find((m) => m.role === 'tool')!.content as string;
    expect(tool.startsWith('> build start\ncompiling module 0 of 3000 ok')).toBe(true);
    expect(tool.endsWith('error TS2304: Cannot find name "parse".')).toBe(true);
    expect(tool).toMatch(/\n\[… \d+ characters omitted to fit the summarizer's input …\]\n/);
    // Everything before the cut message is still the conversation's bytes.
    const sent = rawElements(rawMembers(server.requests[0]!.raw).get('messages')!);
    expect(sent.slice(0, 3)).toEqual(messages.slice(0, 3).map((m) => JSON.stringify(m)));
    expect(truncationMarker(1)).toBe("[… 1 characters omitted to fit the summarizer's input …]");
  });

  it('never splits a tool-call batch across chunks: a batch bigger than a chunk is cut further instead', async () => {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    w.startTurn();
    w.startStep();
    w.request({ provider: 'local', model: 'm', systemPrompt: 'System prompt.', tools: TOOLS });
    w.user('Read every module.');
    const ids = Array.from({ length: 20 }, (_, i) => `call_${i}`);
    w.assistant({ toolCalls: ids.map((id, i) => ({ id, name: 'read', arguments: JSON.stringify({ path: `src/module${i}.ts` }) })) });
    for (const [i, id] of ids.entries()) {
      w.toolResult(id, Array.from({ length: 400 }, (_, j) => `export const value${i}_${j} = ${j};`).join('\n'), { toolName: 'read' });
    }
    w.assistant({ text: `All twenty modules read. ${Array.from({ length: 600 }, (_, i) => `value${i} is exported.`).join(' ')}` });
    w.user('Now summarize what they export.');
    const messages = session.deriveMessages();
    const events = session.surface.slice(0).map((s) => session.event(s) as SurfaceEvent);
    const contextWindow = 16_000;
    const budget = inputBudget(contextWindow, 1_000, defaultSafetyMargin(contextWindow));

    server.setHandler((req) => ({ kind: 'reply', content: `## Current Work\n- part ${req.index}` }));
    const summarizer = new OpenAISummarizer({ ledger: false, client });
    const result = await summarizer.summarize(summaryRequest(messages, events, { contextWindow, maxTokens: 1_000 }), signal());

    expect(result.bounding?.mode).toBe('chunked');
    expect(server.requests).toHaveLength(2);
    expect(result).toMatchObject({ requests: 2, text: '## Current Work\n- part 1' });
    const first = bodyOf(0).messages!;
    expect(first.filter((m) => m.role === 'tool')).toHaveLength(20);
    expectPaired(first);
    expect(bodyOf(1).messages!.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user', 'user']);
    for (const i of [0, 1]) {
      const body = bodyOf(i);
      expect(priceRequest(body.messages as ChatMessage[], body.tools as Record<string, unknown>[], count)).toBeLessThanOrEqual(budget);
    }
  });

  it('summarizes a transcript larger than the window in chunks, each request within the budget, merging as it goes', async () => {
    const session = Session.inMemory();
    await importPiFile(session, PI_FIXTURE, { systemPrompt: 'You are pi, a coding agent.', tools: TOOLS as unknown as Record<string, unknown>[] });
    const messages = session.deriveMessages();
    const events = session.surface.slice(0).map((s) => session.event(s) as SurfaceEvent);
    const contextWindow = 32_000;
    const maxTokens = 2_000;
    const budget = inputBudget(contextWindow, maxTokens, defaultSafetyMargin(contextWindow));
    const request = summaryRequest(messages, events, { contextWindow, maxTokens, context: [] });
    expect(priceRequest(messages, TOOLS as unknown as Record<string, unknown>[], count)).toBeGreaterThan(4 * contextWindow);

    server.setHandler((req) => ({
      kind: 'reply',
      content: `## Primary Request and Intent\n- merged through request ${req.index}\n\n## Current Work\n- chunk ${req.index}`,
      usage: { prompt_tokens: 1000 + req.index, completion_tokens: 20, cached_tokens: 7 },
    }));
    const summarizer = new OpenAISummarizer({ ledger: false, client });
    const result = await summarizer.summarize(request, signal());

    const n = server.requests.length;
    expect(n).toBeGreaterThan(1);
    expect(result.requests).toBe(n);
    expect(result.bounding).toMatchObject({ mode: 'chunked', chunks: n, budget });
    for (let i = 0; i < n; i++) {
      const body = bodyOf(i);
      const msgs = body.messages!;
      expect(priceRequest(msgs as ChatMessage[], (body.tools ?? []) as Record<string, unknown>[], count)).toBeLessThanOrEqual(budget);
      expect(body.tools).toEqual(TOOLS);
      expect(msgs[0]).toEqual(messages[0]);
      expect(msgs.at(-1)).toEqual({ role: 'user', content: COMPACTION_INSTRUCTION });
      expectPaired(msgs);
      if (i > 0) {
        // The previous partial summary rides along as a checkpoint to merge.
        expect(msgs[1]).toEqual({
          role: 'user',
          content: frameCheckpoint(`## Primary Request and Intent\n- merged through request ${i - 1}\n\n## Current Work\n- chunk ${i - 1}`),
        });
      }
    }
    // Every user request of the transcript went to some request (cut or whole), in order.
    const sentUsers = server.requests.flatMap((_, i) =>
      bodyOf(i)
        .messages!.filter((m, j) => m.role === 'user' && j > (i > 0 ? 1 : 0))
        .slice(0, -1),
    );
    expect(sentUsers).toHaveLength(messages.filter((m) => m.role === 'user').length);
    expect(result.text).toBe(`## Primary Request and Intent\n- merged through request ${n - 1}\n\n## Current Work\n- chunk ${n - 1}`);
    const promptSum = Array.from({ length: n }, (_, i) => 1000 + i).reduce((a, b) => a + b, 0);
    expect(result.usage).toEqual({ promptTokens: promptSum, completionTokens: 20 * n, cachedTokens: 7 * n, reasoningTokens: 0 });
  });
});
