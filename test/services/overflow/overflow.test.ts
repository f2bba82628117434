import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIUserAbortError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  classifyRequestError,
  isSilentOverflow,
  OVERFLOW_PATTERNS,
  recoverErrorBody,
  withErrorBodyRecovery,
  type RequestErrorClass,
} from '../../../src/services/overflow';
import { OTHER_ERROR_BODIES, OVERFLOW_BODIES, startOpenAIServer, type LocalOpenAIServer, type ProviderName, type Scenario } from '../../../src/testing/index';
import { XcompactError } from '../../../src/errors';

let server: LocalOpenAIServer;
let plain: OpenAI;
let recovering: OpenAI;

beforeAll(async () => {
  server = await startOpenAIServer();
  plain = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
  recovering = withErrorBodyRecovery(new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }));
});

afterAll(async () => {
  await server.close();
});

const messages = [{ role: 'user' as const, content: 'continue' }];

/** The error a user's agent loop actually catches: the real SDK against the real server. */
async function errorFrom(scenario: Scenario, opts: { client?: OpenAI; stream?: boolean } = {}): Promise<unknown> {
  server.enqueue(scenario);
  const client = opts.client ?? recovering;
  try {
    if (opts.stream) {
      for await (const _ of await client.chat.completions.create({ model: 'm', messages, stream: true })) {
        // drain
      }
    } else {
      await client.chat.completions.create({ model: 'm', messages });
    }
  } catch (err) {
    return err;
  }
  throw new Error('expected the request to fail');
}

type Expected = Omit<RequestErrorClass, 'message' | 'kind'>;

const providerRows: Array<[ProviderName, Expected]> = [
  ['openai', { provider: 'openai', status: 400, limitTokens: 128000, requestedTokens: 130532, promptTokens: 130532, excessTokens: 2532 }],
  ['openai-context-window', { provider: 'openai', status: 400 }],
  ['deepseek', { provider: 'openai-compatible', status: 400, limitTokens: 131072, requestedTokens: 131134, promptTokens: 122942, excessTokens: 62 }],
  ['vllm', { provider: 'openai-compatible', status: 400, limitTokens: 4096, requestedTokens: 5000, promptTokens: 4000, excessTokens: 904 }],
  ['vllm-input-tokens', { provider: 'vllm', status: 400, limitTokens: 32768, requestedTokens: 40000, promptTokens: 40000, excessTokens: 7232 }],
  ['llama.cpp', { provider: 'llama.cpp', status: 400, limitTokens: 512, requestedTokens: 2028, promptTokens: 2028, excessTokens: 1516 }],
  ['ollama', { provider: 'ollama', status: 400, excessTokens: 4 }],
  ['openrouter', { provider: 'openrouter', status: 400, limitTokens: 40960, requestedTokens: 42988, excessTokens: 2028 }],
  ['groq', { provider: 'groq', status: 400 }],
  ['cerebras', { provider: 'cerebras', status: 400, limitTokens: 40000, requestedTokens: 42328, promptTokens: 42328, excessTokens: 2328 }],
  ['mistral', { provider: 'mistral', status: 400, limitTokens: 32768, requestedTokens: 40687, promptTokens: 40687, excessTokens: 7919 }],
  ['gemini', { provider: 'gemini', status: 400, limitTokens: 1048575, requestedTokens: 1196265, promptTokens: 1196265, excessTokens: 147690 }],
  ['anthropic', { provider: 'anthropic', status: 400, limitTokens: 200000, requestedTokens: 208310, promptTokens: 208310, excessTokens: 8310 }],
];

describe('classifyRequestError: every provider overflow wording, through the real SDK', () => {
  it('covers every ready-made overflow body', () => {
    expect(providerRows.map(([p]) => p).sort()).toEqual(Object.keys(OVERFLOW_BODIES).sort());
  });

  it.each(providerRows)('%s → context-overflow with its numbers', async (name, expected) => {
    const err = await errorFrom({ kind: 'status', ...OVERFLOW_BODIES[name] });
    const cls = classifyRequestError(err);
    expect(cls).toEqual({ kind: 'context-overflow', message: expect.any(String), ...expected });
    // the message is the provider's own text, not the SDK's "400 …" prefix or "(no body)"
    expect(cls.message).not.toMatch(/^400 |no body/);
  });

  it('a streaming request gets the same classification (the error comes before the stream)', async () => {
    const err = await errorFrom({ kind: 'status', ...OVERFLOW_BODIES.vllm }, { stream: true });
    expect(classifyRequestError(err)).toMatchObject({ kind: 'context-overflow', limitTokens: 4096, requestedTokens: 5000 });
  });
});

describe('flat and array error bodies: what openai 6 loses and withErrorBodyRecovery restores', () => {
  it.each([['vllm' as const], ['mistral' as const], ['gemini' as const]])(
    'without recovery the SDK reports %s as "400 status code (no body)" and it cannot be recognised',
    async (name) => {
      const err = await errorFrom({ kind: 'status', ...OVERFLOW_BODIES[name] }, { client: plain });
      // If this starts failing, openai began reading flat bodies itself: the recovery may be redundant.
      expect(err).toMatchObject({ status: 400, message: '400 status code (no body)', error: undefined, code: undefined });
      expect(classifyRequestError(err)).toEqual({ kind: 'other', status: 400, message: '400 status code (no body)' });
    },
  );

  it('with recovery the vLLM flat body is on err.error and the message is the provider text', async () => {
    const err = await errorFrom({ kind: 'status', ...OVERFLOW_BODIES.vllm });
    expect(err).toMatchObject({
      status: 400,
      code: 400,
      type: 'BadRequestError',
      error: { object: 'error', type: 'BadRequestError' },
      message: expect.stringMatching(/^400 This model's maximum context length is 4096 tokens\./),
    });
  });

  it('wrapped bodies pass through unchanged, so recovery never changes a normal error', async () => {
    const withRecovery = await errorFrom({ kind: 'status', ...OVERFLOW_BODIES.openai });
    const without = await errorFrom({ kind: 'status', ...OVERFLOW_BODIES.openai }, { client: plain });
    expect(classifyRequestError(withRecovery)).toEqual(classifyRequestError(without));
    expect((withRecovery as Error).message).toBe((without as Error).message);
  });

  it('patching the same client twice wraps makeStatusError once', () => {
    const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test' });
    withErrorBodyRecovery(client);
    const once = (client as unknown as { makeStatusError: unknown }).makeStatusError;
    expect(withErrorBodyRecovery(client)).toBe(client);
    expect((client as unknown as { makeStatusError: unknown }).makeStatusError).toBe(once);
  });

  it('recoverErrorBody normalises flat, array and FastAPI bodies and leaves the rest alone', () => {
    const flat = { object: 'error', message: 'm', type: 't', code: 400 };
    expect(recoverErrorBody(flat)).toEqual({ error: flat });
    expect(recoverErrorBody([{ error: { code: 400, message: 'g' } }])).toEqual({ error: { code: 400, message: 'g' } });
    expect(recoverErrorBody({ detail: 'Not allowed' })).toEqual({ error: { message: 'Not allowed' } });
    const wrapped = { error: { message: 'x' } };
    expect(recoverErrorBody(wrapped)).toBe(wrapped);
    expect(recoverErrorBody({ error: 'plain string' })).toEqual({ error: 'plain string' });
    expect(recoverErrorBody(undefined)).toBeUndefined();
    expect(recoverErrorBody([1, 2])).toEqual([1, 2]);
    expect(recoverErrorBody({ unrelated: true })).toEqual({ unrelated: true });
  });
});

describe('classifyRequestError: other wordings in the catalog, through the real SDK', () => {
  const rows: Array<[string, Scenario, Expected]> = [
    [
      'OpenAI legacy completions wording',
      {
        kind: 'status',
        status: 400,
        body: {
          error: {
            message:
              "This model's maximum context length is 8192 tokens, however you requested 8977 tokens (8977 in your prompt; 0 for the completion). Please reduce your prompt; or completion length.",
            type: 'invalid_request_error',
            param: null,
            code: null,
          },
        },
      },
      { provider: 'openai-compatible', status: 400, limitTokens: 8192, requestedTokens: 8977, promptTokens: 8977, excessTokens: 785 },
    ],
    [
      'vLLM max_tokens too large',
      {
        kind: 'status',
        status: 400,
        body: {
          error: {
            message:
              "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778). None",
            type: 'BadRequestError',
            param: null,
            code: 400,
          },
        },
      },
      { provider: 'vllm', status: 400, limitTokens: 4096, requestedTokens: 10778, promptTokens: 2778, excessTokens: 6682 },
    ],
    [
      'Ollama native string error (ollama.com)',
      { kind: 'status', status: 400, body: { error: 'prompt too long; exceeded max context length by 17 tokens (ref: 0f7c)' } },
      { provider: 'ollama', status: 400, excessTokens: 17 },
    ],
    [
      'Gemini without numbers in parentheses',
      {
        kind: 'status',
        status: 400,
        body: [{ error: { code: 400, message: 'The input token count exceeds the maximum number of tokens allowed 1048576.', status: 'INVALID_ARGUMENT' } }],
      },
      { provider: 'gemini', status: 400, limitTokens: 1048576 },
    ],
    [
      'xAI',
      {
        kind: 'status',
        status: 400,
        body: { code: 'Client specified an invalid argument', error: "This model's maximum prompt length is 131072 but the request contains 149617 tokens." },
      },
      { provider: 'xai', status: 400, limitTokens: 131072, requestedTokens: 149617, promptTokens: 149617, excessTokens: 18545 },
    ],
    [
      'Together AI',
      {
        kind: 'status',
        status: 400,
        body: { error: { message: "The input (516368 tokens) is longer than the model's context length (262144 tokens).", type: 'invalid_request_error' } },
      },
      { provider: 'together', status: 400, limitTokens: 262144, requestedTokens: 516368, promptTokens: 516368, excessTokens: 254224 },
    ],
    [
      'Anthropic 413 request_too_large (code only)',
      { kind: 'status', status: 413, body: { type: 'error', error: { type: 'request_too_large', message: 'Request exceeds the maximum size' } } },
      { provider: 'code:request_too_large', status: 413 },
    ],
    [
      'a bare 413 from a proxy',
      { kind: 'status', status: 413, body: '<html><body>413 Request Entity Too Large</body></html>' },
      { provider: 'http-413', status: 413 },
    ],
    [
      'a gateway re-wrapping an overflow in a 503 (LiteLLM)',
      {
        kind: 'status',
        status: 503,
        body: {
          error: {
            message:
              "litellm.ServiceUnavailableError: litellm.MidStreamFallbackError: APIConnectionError: OpenAIException - Requested token count exceeds the model's maximum context length of 131072 tokens.",
            type: null,
            code: '503',
          },
        },
      },
      { provider: 'generic', status: 503 },
    ],
  ];

  it.each(rows)('%s', async (_name, scenario, expected) => {
    const cls = classifyRequestError(await errorFrom(scenario));
    expect(cls).toEqual({ kind: 'context-overflow', message: expect.any(String), ...expected });
  });

  it('an overflow reported mid-stream (no status) is still an overflow', async () => {
    const err = await errorFrom(
      {
        kind: 'streamError',
        error: {
          message:
            "This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens. Please reduce the length of the input messages.",
          type: 'BadRequestError',
          code: 400,
        },
      },
      { stream: true },
    );
    expect(classifyRequestError(err)).toEqual({
      kind: 'context-overflow',
      provider: 'vllm',
      message: expect.stringContaining('4096'),
      limitTokens: 4096,
      requestedTokens: 5000,
      promptTokens: 5000,
      excessTokens: 904,
    });
  });

  it('every catalog pattern is exercised by a wording somewhere in these tests', () => {
    const wordings = [
      ...Object.values(OVERFLOW_BODIES).map((b) => JSON.stringify(b.body)),
      ...rows.map(([, s]) => JSON.stringify(s)),
      "Your request exceeded the model's maximum context length",
      'context window exceeded',
      'too many tokens in the request',
      'Input is too long for requested model.',
      'tokens to keep from the initial prompt is greater than the context length',
      'the input length exceeds the context length',
      'the request exceeds the available context size, try increasing it',
      'prompt is too long',
    ];
    const unused = OVERFLOW_PATTERNS.filter(({ pattern }) => !wordings.some((w) => pattern.test(w.replace(/\\"/g, '"'))));
    expect(unused.map((p) => `${p.provider}: ${p.pattern.source}`)).toEqual([]);
  });

  it('plain errors carrying a provider wording (other clients, gateways) are recognised too', () => {
    expect(classifyRequestError(new Error('generate: prompt is too long: 208310 tokens > 200000 maximum'))).toMatchObject({
      kind: 'context-overflow',
      provider: 'anthropic',
      limitTokens: 200000,
    });
    expect(classifyRequestError(new Error('context window exceeded'))).toMatchObject({ kind: 'context-overflow', provider: 'generic' });
  });
});

describe('classifyRequestError: negatives that must NOT be overflow', () => {
  it('429 rate limit (mentions tokens and "Requested") → rate-limit', async () => {
    const cls = classifyRequestError(await errorFrom({ kind: 'status', ...OTHER_ERROR_BODIES.rateLimit }));
    expect(cls).toEqual({ kind: 'rate-limit', status: 429, message: expect.stringContaining('Rate limit reached') });
  });

  it("Groq's 413 'Request too large … tokens per minute' → rate-limit", async () => {
    const cls = classifyRequestError(await errorFrom({ kind: 'status', ...OTHER_ERROR_BODIES.groqTokensPerMinute }));
    expect(cls).toMatchObject({ kind: 'rate-limit', status: 413 });
  });

  it('500 → server', async () => {
    const cls = classifyRequestError(await errorFrom({ kind: 'status', ...OTHER_ERROR_BODIES.serverError }));
    expect(cls).toEqual({ kind: 'server', status: 500, message: 'The server had an error while processing your request. Sorry about that!' });
  });

  it('a server_error event mid-stream (no status) → server', async () => {
    const cls = classifyRequestError(await errorFrom({ kind: 'streamError' }, { stream: true }));
    expect(cls).toEqual({ kind: 'server', message: 'The server had an error while processing your request. Sorry about that!' });
  });

  it("an unrelated 400 (Invalid 'messages[1].tool_calls') → other", async () => {
    const cls = classifyRequestError(await errorFrom({ kind: 'status', ...OTHER_ERROR_BODIES.invalidToolCalls }));
    expect(cls).toEqual({ kind: 'other', status: 400, message: expect.stringMatching(/^Invalid 'messages\[1\]\.tool_calls'/) });
  });

  it("a 400 mentioning 'context' that is not an overflow → other", async () => {
    const cls = classifyRequestError(await errorFrom({ kind: 'status', ...OTHER_ERROR_BODIES.invalidContextValue }));
    expect(cls).toMatchObject({ kind: 'other', status: 400 });
  });

  it('throttling worded with tokens → rate-limit, not overflow', () => {
    expect(classifyRequestError(new Error('ThrottlingException: Too many tokens, please wait before trying again.'))).toMatchObject({ kind: 'rate-limit' });
  });

  it('an abort mid-request → cancelled (APIUserAbortError)', async () => {
    server.enqueue({ kind: 'hang', sendHeaders: false });
    const index = server.requests.length;
    const controller = new AbortController();
    const pending = recovering.chat.completions.create({ model: 'm', messages }, { signal: controller.signal }).catch((e: unknown) => e);
    await server.waitForRequest(index);
    controller.abort();
    const err = await pending;
    expect(err).toBeInstanceOf(APIUserAbortError);
    expect(classifyRequestError(err)).toEqual({ kind: 'cancelled', message: 'Request was aborted.' });
  });

  it('a DOM AbortError (signal.reason of AbortSignal.abort()) → cancelled', () => {
    const signal = AbortSignal.abort();
    expect(classifyRequestError(signal.reason)).toMatchObject({ kind: 'cancelled' });
    expect(classifyRequestError(new DOMException('stop', 'AbortError'))).toMatchObject({ kind: 'cancelled', message: 'stop' });
  });

  it('a timeout → other (APIConnectionTimeoutError)', async () => {
    // its own server: a hang left queued by a request that timed out before arriving must not leak
    const slow = await startOpenAIServer({ scenarios: () => ({ kind: 'hang', sendHeaders: false }) });
    try {
      const client = new OpenAI({ baseURL: slow.baseURL, apiKey: 'test', maxRetries: 0, timeout: 20 });
      const err = await client.chat.completions.create({ model: 'm', messages }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(APIConnectionTimeoutError);
      expect(classifyRequestError(err)).toEqual({ kind: 'other', message: 'Request timed out.' });
    } finally {
      await slow.close();
    }
  });

  it('connection refused → other (APIConnectionError)', async () => {
    const gone = await startOpenAIServer();
    const baseURL = gone.baseURL;
    await gone.close();
    const client = new OpenAI({ baseURL, apiKey: 'test', maxRetries: 0 });
    const err = await client.chat.completions.create({ model: 'm', messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIConnectionError);
    expect(classifyRequestError(err)).toEqual({ kind: 'other', message: 'Connection error.' });
  });

  it('non-errors do not throw', () => {
    expect(classifyRequestError(undefined)).toEqual({ kind: 'other', message: '' });
    expect(classifyRequestError('boom')).toEqual({ kind: 'other', message: 'boom' });
    expect(classifyRequestError({ status: 502 })).toEqual({ kind: 'server', status: 502, message: '' });
  });
});

describe('isSilentOverflow', () => {
  it('is true only when the reported prompt tokens exceed the window', () => {
    expect(isSilentOverflow({ promptTokens: 128001 }, 128000)).toBe(true);
    expect(isSilentOverflow({ promptTokens: 128000 }, 128000)).toBe(false);
    expect(isSilentOverflow({ promptTokens: Number.NaN }, 128000)).toBe(false);
  });

  it('reads the usage a provider reports through the SDK', async () => {
    server.enqueue({ kind: 'reply', content: 'answered from a truncated prompt', usage: { prompt_tokens: 140000 } });
    const res = await recovering.chat.completions.create({ model: 'm', messages });
    expect(isSilentOverflow({ promptTokens: res.usage!.prompt_tokens }, 128000)).toBe(true);
  });

  it('rejects a context window that is not a positive number', () => {
    expect(() => isSilentOverflow({ promptTokens: 1 }, 0)).toThrow(XcompactError);
    expect(() => isSilentOverflow({ promptTokens: 1 }, Number.NaN)).toThrow(/positive context window/);
  });
});
