/**
 * A local OpenAI-compatible chat-completions server for tests, demos and benchmarks.
 *
 * It speaks `POST /v1/chat/completions` over plain `node:http` (streaming SSE and
 * non-streaming JSON, with `stream_options.include_usage`) and `GET /v1/models`, so the
 * real `openai` SDK can talk to it over real HTTP:
 *
 * ```ts
 * const server = await startOpenAIServer();
 * const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
 * server.enqueue({ kind: 'reply', content: 'hello' }, { kind: 'status', ...OVERFLOW_BODIES.openai });
 * // ... drive the agent, then assert on server.requests[n].raw (the exact bytes sent)
 * await server.close();
 * ```
 *
 * Every response is chosen by a {@link Scenario}: first from the FIFO queue filled by
 * `enqueue`, then from the handler set with `setHandler` (a scripted agent deciding per
 * request), else a default reply that echoes the last user message.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

// ---------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------

/** Token counts a `reply` reports; anything left out is estimated (see {@link estimatePromptTokens}). */
export interface UsageOverride {
  prompt_tokens?: number;
  completion_tokens?: number;
  /** Reported as `usage.prompt_tokens_details.cached_tokens` (OpenAI's prompt-cache field). */
  cached_tokens?: number;
}

export interface ScriptedToolCall {
  id: string;
  name: string;
  /** The JSON-encoded arguments string, sent as is. */
  arguments: string;
}

/**
 * A normal completion. Covers a plain reply, a slow stream (`chunkDelayMs`), truncation
 * (`finishReason: 'length'`), empty content (`content: ''`), tool calls only (`toolCalls`
 * without `content`) and DeepSeek-style `reasoning_content`.
 */
export interface ReplyScenario {
  kind: 'reply';
  /** Assistant text. `undefined` → `null` content when there are tool calls, else the echo reply. */
  content?: string;
  /** Sent as DeepSeek's `reasoning_content` (message field, or deltas before the content). */
  reasoning?: string;
  toolCalls?: ScriptedToolCall[];
  /** Defaults to `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: 'stop' | 'length' | 'tool_calls' | 'content_filter';
  usage?: UsageOverride;
  /** Wait this long before each SSE event after the first (a slow stream). */
  chunkDelayMs?: number;
  /** Split the content (and the reasoning) into this many deltas. Default 1. */
  chunks?: number;
  /** Wait this long before sending the response headers (both modes). */
  delayMs?: number;
  /** Reported model; defaults to the request's model. */
  model?: string;
}

/**
 * Never finishes: the request stays open until the client aborts it (recorded as
 * `aborted: true`) or the server is closed.
 */
export interface HangScenario {
  kind: 'hang';
  /** Send the 200 headers before hanging (default true). `false` hangs before any byte is sent. */
  sendHeaders?: boolean;
  /** For a streaming request, send the role chunk plus this many content deltas first. Default 0. */
  afterChunks?: number;
  /** Text split over the `afterChunks` deltas. Default `'partial '` repeated. */
  content?: string;
}

/** An HTTP error response (429, 500, a provider's overflow 400 …), the same for streaming requests. */
export interface StatusScenario {
  kind: 'status';
  status: number;
  /** A string is sent verbatim (raw or pre-serialised bodies); anything else is JSON-encoded. */
  body: unknown;
  headers?: Record<string, string>;
}

/**
 * Starts a 200 SSE stream, sends some deltas, then an error event and ends the response
 * (what OpenAI and vLLM do when generation fails mid-stream). The `openai` SDK throws an
 * `APIError` with `status === undefined` for it: its SSE decoder throws on any chat event
 * whose JSON data has an `error` key, whatever the `event:` name.
 * A non-streaming request gets a 500 with the same error object instead.
 */
export interface StreamErrorScenario {
  kind: 'streamError';
  /** Content deltas sent before the error. Default 1. */
  afterChunks?: number;
  content?: string;
  error?: { message: string; type?: string; code?: string | number | null; param?: string | null };
  /** The SSE `event:` line. Default `'error'`; `null` sends a bare `data:` event like OpenAI does. */
  event?: string | null;
}

export type Scenario = ReplyScenario | HangScenario | StatusScenario | StreamErrorScenario;

/** The parsed JSON body of a chat-completions request (only the fields the server reads are typed). */
export interface ChatRequestBody {
  model?: string;
  messages?: Array<{ role?: string; content?: unknown; [key: string]: unknown }>;
  tools?: unknown[];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null } | null;
  [key: string]: unknown;
}

/** What a {@link ScenarioHandler} sees: one chat-completions request. */
export interface ParsedChatRequest {
  /** Position in `server.requests` (zero-based). */
  index: number;
  path: string;
  headers: IncomingHttpHeaders;
  raw: string;
  body: ChatRequestBody;
}

export type ScenarioHandler = (req: ParsedChatRequest) => Scenario | Promise<Scenario>;

export interface RecordedRequest {
  /** Position in `server.requests` (zero-based). */
  readonly index: number;
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The request body exactly as received. */
  readonly rawBytes: Buffer;
  /** `rawBytes` decoded as UTF-8. */
  readonly raw: string;
  /** `raw` parsed as JSON; `undefined` when empty or not JSON. */
  readonly json: unknown;
  /** Which scenario answered (`undefined` for routes other than chat completions). */
  scenario?: Scenario['kind'];
  /** True when the client closed the connection before the response ended. */
  aborted: boolean;
  /** True once the response ended or the connection closed. */
  closed: boolean;
}

export interface LocalOpenAIServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** `url + '/v1'` — pass to `new OpenAI({ baseURL, apiKey: 'test', maxRetries: 0 })`. */
  readonly baseURL: string;
  /** Every request received, in arrival order. */
  readonly requests: readonly RecordedRequest[];
  /** Script the next responses (FIFO); when the queue is empty the handler or the echo reply answers. */
  enqueue(...scenarios: Scenario[]): void;
  /** Decide per request once the queue is empty (e.g. a scripted agent). */
  setHandler(handler: ScenarioHandler | undefined): void;
  /** Resolves with `requests[index]` once it has arrived (its body fully read). */
  waitForRequest(index: number): Promise<RecordedRequest>;
  /** Resolves with `requests[index]` once its response ended or its connection closed. */
  waitForClose(index: number): Promise<RecordedRequest>;
  /** Stops listening and destroys open sockets, so hung streams never keep the process alive. */
  close(): Promise<void>;
}

export interface StartOpenAIServerOptions {
  /** Initial queue, or a handler answering every request. */
  scenarios?: Scenario[] | ScenarioHandler;
  /** Model reported when a request names none, and listed by `GET /v1/models`. Default `local-model`. */
  defaultModel?: string;
}

// ---------------------------------------------------------------------------------------
// Ready-made provider error bodies
// ---------------------------------------------------------------------------------------

export type ProviderName =
  | 'openai'
  | 'openai-context-window'
  | 'deepseek'
  | 'vllm'
  | 'vllm-input-tokens'
  | 'llama.cpp'
  | 'ollama'
  | 'openrouter'
  | 'groq'
  | 'cerebras'
  | 'mistral'
  | 'gemini'
  | 'anthropic';

export interface ProviderErrorBody {
  status: number;
  body: unknown;
}

/**
 * Context-overflow responses in each provider's real wording and envelope. The numbers are
 * the ones in the cited reports. Use as `server.enqueue({ kind: 'status', ...OVERFLOW_BODIES.vllm })`.
 */
export const OVERFLOW_BODIES: Readonly<Record<ProviderName, ProviderErrorBody>> = {
  // Source: AsyncFuncAI/deepwiki-open#144 and webtimemachine/wtm2#579 (pasted API bodies);
  // numbers from the xcompact notes (verified with openai 6.49.0).
  openai: {
    status: 400,
    body: {
      error: {
        message:
          "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.",
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    },
  },
  // OpenAI's newer wording (no numbers). Source: quoted in the overflow catalogs of
  // earendil-works/pi (packages/ai overflow.ts) and its ports; not seen in an issue body here,
  // so the envelope fields other than `code` are assumed.
  'openai-context-window': {
    status: 400,
    body: {
      error: {
        message: 'Your input exceeds the context window of this model. Please adjust your input and try again.',
        type: 'invalid_request_error',
        param: 'input',
        code: 'context_length_exceeded',
      },
    },
  },
  // Source: evalstate/fast-agent#621 (deepseek-chat, full body pasted). Note `code` is
  // 'invalid_request_error', not 'context_length_exceeded': only the text identifies it.
  deepseek: {
    status: 400,
    body: {
      error: {
        message:
          "This model's maximum context length is 131072 tokens. However, you requested 131134 tokens (122942 in the messages, 8192 in the completion). Please reduce the length of the messages or completion.",
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_request_error',
      },
    },
  },
  // vLLM ≤ ~0.10 answers with a FLAT body (no `error` wrapper): ErrorResponse{object, message,
  // type, param, code} and the wording of OpenAIServing._validate_input, both read in
  // vllm-project/vllm vllm/entrypoints/openai/serving_engine.py; the same body is pasted in
  // vllm-project/vllm#20409 and elotl/GenAI-infra-stack#62. openai 6 reports it as
  // "400 status code (no body)" unless the body is recovered (see withErrorBodyRecovery).
  vllm: {
    status: 400,
    body: {
      object: 'error',
      message:
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
      type: 'BadRequestError',
      param: null,
      code: 400,
    },
  },
  // Newer vLLM: the renderer's check ("However, your request has N input tokens"), and the
  // ErrorResponse is now wrapped as {error: ErrorInfo} (vLLM protocol change quoted in a
  // guidellm issue; body pasted in public test fixtures). Wording read in vLLM's
  // entrypoints/renderer.py (create_tokens_prompt).
  'vllm-input-tokens': {
    status: 400,
    body: {
      error: {
        message:
          "This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens. Please reduce the length of the input messages.",
        type: 'BadRequestError',
        param: null,
        code: 400,
      },
    },
  },
  // llama.cpp llama-server (tools/server/server-context.cpp): type exceed_context_size_error
  // with n_prompt_tokens / n_ctx. Verified against a locally built llama-server (xcompact
  // notes); the same body shape is quoted in several public projects.
  'llama.cpp': {
    status: 400,
    body: {
      error: {
        code: 400,
        message: 'request (2028 tokens) exceeds the available context size (512 tokens), try increasing it',
        type: 'exceed_context_size_error',
        n_prompt_tokens: 2028,
        n_ctx: 512,
      },
    },
  },
  // Ollama's OpenAI-compatible endpoint wraps errors as {error:{message,type,param,code}}
  // with type invalid_request_error for 400 (ollama/ollama openai/openai.go, NewError).
  // The message is the one users report from Ollama ("Ollama API error 400 … prompt too long;
  // exceeded max context length by 4 tokens", also with a "(ref: <uuid>)" suffix from
  // ollama.com). NOT confirmed in Ollama's source: the local runner instead TRUNCATES an
  // oversized prompt silently (runner/ollamarunner/runner.go, "truncating input prompt"),
  // which only isSilentOverflow-style checks can see.
  ollama: {
    status: 400,
    body: {
      error: {
        message: 'prompt too long; exceeded max context length by 4 tokens',
        type: 'invalid_request_error',
        param: null,
        code: null,
      },
    },
  },
  // Source: OpenHands/OpenHands#8149 and #9937, refly-ai/refly#1177 (wording); newer
  // reports (RooCodeInc/Roo-Code#11998) add "of tool input" and mention the
  // context-compression plugin instead of middle-out. Envelope {error:{message, code}} as
  // quoted in public test fixtures; the `metadata` field OpenRouter may add is omitted.
  openrouter: {
    status: 400,
    body: {
      error: {
        message:
          'This endpoint\'s maximum context length is 40960 tokens. However, you requested about 42988 tokens (38892 of text input, 4096 in the output). Please reduce the length of either one, or use the "middle-out" transform to compress your prompt automatically.',
        code: 400,
      },
    },
  },
  // Source: OpenHands/OpenHands#1902, letta-ai/letta#1963, ScrapeGraphAI/Scrapegraph-ai#411
  // (same body each time; no token numbers).
  groq: {
    status: 400,
    body: {
      error: {
        message: 'Please reduce the length of the messages or completion.',
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    },
  },
  // Source: cline/cline#5140 (message text only: "400 Please reduce the length of the messages
  // or completion. Current length is 42328 while limit is 40000"); envelope assumed OpenAI-style.
  cerebras: {
    status: 400,
    body: {
      error: {
        message: 'Please reduce the length of the messages or completion. Current length is 42328 while limit is 40000',
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    },
  },
  // Mistral also answers with a FLAT body. Wording and envelope from a mistralai SDK error
  // pasted in public code ("Status 400. Body: {"object":"error","message":"Prompt contains
  // 159202 tokens and 0 draft tokens, too large for model with 131072 maximum context
  // length","type":"invalid_request_invalid_args","param":null,"code":"3051",...}") and test
  // fixtures citing https://docs.mistral.ai/resources/known-limitations. Not confirmed from
  // Mistral's own documentation here.
  mistral: {
    status: 400,
    body: {
      object: 'error',
      message: 'Prompt contains 40687 tokens and 0 draft tokens, too large for model with 32768 maximum context length',
      type: 'invalid_request_invalid_args',
      param: null,
      code: '3051',
    },
  },
  // Gemini's OpenAI-compatible endpoint answers with a JSON ARRAY of Google error objects
  // (seen as "Error code: 400 - [{'error': {'code': 400, 'message': ..., 'status':
  // 'INVALID_ARGUMENT'}}]" from the Python openai SDK, Simpleyyt/ai-manus#101 and a public
  // benchmark log for gemini-3.1-flash-lite); wording from google-gemini/gemini-cli#4692,
  // #6678, #12098. openai 6 loses it too ("400 status code (no body)").
  gemini: {
    status: 400,
    body: [
      {
        error: {
          code: 400,
          message: 'The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).',
          status: 'INVALID_ARGUMENT',
        },
      },
    ],
  },
  // Anthropic (and gateways passing its errors through). Source: earendil-works/pi#102 and
  // boldsoftware/exe.dev#62 (full bodies); stackblitz/bolt.new#1748 (wording).
  anthropic: {
    status: 400,
    body: {
      type: 'error',
      error: {
        type: 'invalid_request_error',
        message: 'prompt is too long: 208310 tokens > 200000 maximum',
      },
      request_id: 'req_011CVjxiYzEFcAQC4Fk87zw2',
    },
  },
};

/** Error responses that are NOT context overflow, in real wordings, for negative tests and demos. */
export const OTHER_ERROR_BODIES = {
  // OpenAI TPM rate limit: mentions tokens and "Requested", must stay a rate limit.
  rateLimit: {
    status: 429,
    body: {
      error: {
        message:
          'Rate limit reached for gpt-4o in organization org-local on tokens per min (TPM): Limit 30000, Used 29899, Requested 1151. Please try again in 2.1s. Visit https://platform.openai.com/account/rate-limits to learn more.',
        type: 'tokens',
        param: null,
        code: 'rate_limit_exceeded',
      },
    },
  },
  // Groq answers a request larger than the tier's tokens-per-minute with 413 (not 429).
  // Source: assafelovic/gpt-researcher#985, bklieger-groq/NotebookLlama-Groq#1.
  groqTokensPerMinute: {
    status: 413,
    body: {
      error: {
        message:
          'Request too large for model `llama-3.1-70b-versatile` in organization `org_local` on tokens per minute (TPM): Limit 6000, Requested 14368, please reduce your message size and try again. Visit https://console.groq.com/docs/rate-limits for more information.',
        type: 'tokens',
        code: 'rate_limit_exceeded',
      },
    },
  },
  serverError: {
    status: 500,
    body: {
      error: {
        message: 'The server had an error while processing your request. Sorry about that!',
        type: 'server_error',
        param: null,
        code: null,
      },
    },
  },
  invalidToolCalls: {
    status: 400,
    body: {
      error: {
        message:
          "Invalid 'messages[1].tool_calls': empty array. Expected an array with minimum length 1, but got an empty array instead.",
        type: 'invalid_request_error',
        param: 'messages[1].tool_calls',
        code: 'empty_array',
      },
    },
  },
  invalidContextValue: {
    status: 400,
    body: {
      error: {
        message: "Invalid value for 'context': expected an object, but got a string instead.",
        type: 'invalid_request_error',
        param: 'context',
        code: 'invalid_value',
      },
    },
  },
} as const satisfies Record<string, ProviderErrorBody>;

// ---------------------------------------------------------------------------------------
// Token estimate (documented so tests can compute expected usage)
// ---------------------------------------------------------------------------------------

/**
 * The prompt_tokens a `reply` reports when not overridden: UTF-8 bytes of
 * `JSON.stringify([messages, tools])` divided by 4, rounded up. Deterministic and
 * monotonic in the request size; it is not any real tokenizer.
 */
export function estimatePromptTokens(body: ChatRequestBody): number {
  return Math.ceil(Buffer.byteLength(JSON.stringify([body.messages ?? [], body.tools ?? []]), 'utf8') / 4);
}

/** The completion_tokens a `reply` reports when not overridden: UTF-8 bytes of the generated text / 4, rounded up. */
export function estimateCompletionTokens(scenario: Pick<ReplyScenario, 'content' | 'reasoning' | 'toolCalls'>): number {
  const text =
    (scenario.content ?? '') +
    (scenario.reasoning ?? '') +
    (scenario.toolCalls ?? []).map((c) => c.name + c.arguments).join('');
  return Math.ceil(Buffer.byteLength(text, 'utf8') / 4);
}

// ---------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------

const CHAT_PATH = '/v1/chat/completions';

/** Starts the server on 127.0.0.1 at a free port. */
export async function startOpenAIServer(opts: StartOpenAIServerOptions = {}): Promise<LocalOpenAIServer> {
  const defaultModel = opts.defaultModel ?? 'local-model';
  const queue: Scenario[] = Array.isArray(opts.scenarios) ? [...opts.scenarios] : [];
  let handler: ScenarioHandler | undefined = typeof opts.scenarios === 'function' ? opts.scenarios : undefined;
  const requests: RecordedRequest[] = [];
  const arrivalWaiters = new Map<number, Array<(r: RecordedRequest) => void>>();
  const closeWaiters = new Map<number, Array<(r: RecordedRequest) => void>>();
  const sockets = new Set<Socket>();
  const timers = new Set<{ timer: NodeJS.Timeout; resolve: () => void }>();
  let closing = false;
  let rejectAllWaiters: ((err: Error) => void)[] = [];

  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      if (ms <= 0 || closing) return resolve();
      const entry = {
        timer: setTimeout(() => {
          timers.delete(entry);
          resolve();
        }, ms),
        resolve,
      };
      timers.add(entry);
    });

  const notify = (waiters: Map<number, Array<(r: RecordedRequest) => void>>, rec: RecordedRequest) => {
    const list = waiters.get(rec.index);
    if (!list) return;
    waiters.delete(rec.index);
    for (const w of list) w(rec);
  };

  const waitOn = (
    waiters: Map<number, Array<(r: RecordedRequest) => void>>,
    index: number,
    ready: (r: RecordedRequest | undefined) => boolean,
  ): Promise<RecordedRequest> => {
    const existing = requests[index];
    if (existing && ready(existing)) return Promise.resolve(existing);
    if (closing) return Promise.reject(new Error(`local OpenAI server closed before request ${index} ${waiters === arrivalWaiters ? 'arrived' : 'closed'}`));
    return new Promise((resolve, reject) => {
      const list = waiters.get(index) ?? [];
      list.push(resolve);
      waiters.set(index, list);
      rejectAllWaiters.push(reject);
    });
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBytes = Buffer.concat(chunks);
      const raw = rawBytes.toString('utf8');
      let json: unknown;
      try {
        json = raw.length > 0 ? JSON.parse(raw) : undefined;
      } catch {
        json = undefined;
      }
      const rec: RecordedRequest = {
        index: requests.length,
        method: req.method ?? 'GET',
        path: (req.url ?? '/').split('?')[0] ?? '/',
        headers: req.headers,
        rawBytes,
        raw,
        json,
        aborted: false,
        closed: false,
      };
      requests.push(rec);
      res.on('close', () => {
        // 'close' before 'finish' means the client went away mid-response.
        if (!res.writableFinished) rec.aborted = true;
        rec.closed = true;
        notify(closeWaiters, rec);
      });
      notify(arrivalWaiters, rec);
      route(rec, req, res).catch((err: unknown) => {
        if (!res.headersSent && !res.destroyed) {
          sendJson(res, 500, {
            error: { message: `local OpenAI server failed: ${String(err)}`, type: 'server_error', param: null, code: null },
          });
        } else if (!res.destroyed) {
          res.destroy();
        }
      });
    });
  });

  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function route(rec: RecordedRequest, req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (rec.method === 'GET' && rec.path === '/v1/models') {
      sendJson(res, 200, { object: 'list', data: [{ id: defaultModel, object: 'model', created: 0, owned_by: 'xcompact' }] });
      return;
    }
    if (rec.method !== 'POST' || rec.path !== CHAT_PATH) {
      sendJson(res, 404, {
        error: { message: `Unknown route ${rec.method} ${rec.path}; this server speaks POST ${CHAT_PATH}.`, type: 'invalid_request_error', param: null, code: 'unknown_url' },
      });
      return;
    }
    if (typeof rec.json !== 'object' || rec.json === null || Array.isArray(rec.json)) {
      sendJson(res, 400, {
        error: { message: 'The request body is not a JSON object.', type: 'invalid_request_error', param: null, code: null },
      });
      return;
    }
    const body = rec.json as ChatRequestBody;
    const parsed: ParsedChatRequest = { index: rec.index, path: rec.path, headers: req.headers, raw: rec.raw, body };
    const scenario = queue.shift() ?? (handler ? await handler(parsed) : echoReply(body));
    rec.scenario = scenario.kind;
    await respond(scenario, body, rec, res);
  }

  async function respond(scenario: Scenario, body: ChatRequestBody, rec: RecordedRequest, res: ServerResponse): Promise<void> {
    const stream = body.stream === true;
    const model = (scenario.kind === 'reply' && scenario.model) || body.model || defaultModel;
    const id = `chatcmpl-local-${rec.index}`;
    const created = Math.floor(Date.now() / 1000);
    const baseHeaders = { 'x-request-id': `req_local_${rec.index}` };

    switch (scenario.kind) {
      case 'status': {
        const payload = typeof scenario.body === 'string' ? scenario.body : JSON.stringify(scenario.body);
        const contentType = typeof scenario.body === 'string' ? 'text/plain; charset=utf-8' : 'application/json';
        res.writeHead(scenario.status, { 'content-type': contentType, ...baseHeaders, ...scenario.headers });
        res.end(payload);
        return;
      }
      case 'hang': {
        if (scenario.sendHeaders === false) return; // nothing sent; only the client or close() ends it
        if (!stream) {
          res.writeHead(200, { 'content-type': 'application/json', ...baseHeaders });
          res.flushHeaders();
          return;
        }
        startSse(res, baseHeaders);
        const n = scenario.afterChunks ?? 0;
        if (n > 0) {
          writeSse(res, chunk(id, created, model, { role: 'assistant', content: '' }, null));
          for (const piece of splitText(scenario.content ?? 'partial '.repeat(n), n)) {
            writeSse(res, chunk(id, created, model, { content: piece }, null));
          }
        }
        return;
      }
      case 'streamError': {
        const error = { type: 'server_error', param: null, code: null, ...(scenario.error ?? { message: 'The server had an error while processing your request. Sorry about that!' }) };
        if (!stream) {
          sendJson(res, 500, { error }, baseHeaders);
          return;
        }
        startSse(res, baseHeaders);
        writeSse(res, chunk(id, created, model, { role: 'assistant', content: '' }, null));
        const n = scenario.afterChunks ?? 1;
        for (const piece of splitText(scenario.content ?? 'partial '.repeat(n), n)) {
          writeSse(res, chunk(id, created, model, { content: piece }, null));
        }
        const event = scenario.event === undefined ? 'error' : scenario.event;
        res.end(`${event === null ? '' : `event: ${event}\n`}data: ${JSON.stringify({ error })}\n\n`);
        return;
      }
      case 'reply': {
        await sleep(scenario.delayMs ?? 0);
        if (res.destroyed) return;
        const toolCalls = scenario.toolCalls ?? [];
        const content = scenario.content ?? (toolCalls.length > 0 ? null : '');
        const finishReason = scenario.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop');
        const usage = buildUsage(scenario, body);
        if (!stream) {
          const message: Record<string, unknown> = { role: 'assistant', content, refusal: null };
          if (scenario.reasoning !== undefined) message['reasoning_content'] = scenario.reasoning;
          if (toolCalls.length > 0) {
            message['tool_calls'] = toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
          }
          sendJson(
            res,
            200,
            {
              id,
              object: 'chat.completion',
              created,
              model,
              system_fingerprint: 'fp_xcompact_local',
              choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
              usage,
            },
            baseHeaders,
          );
          return;
        }
        await streamReply(res, scenario, { id, created, model, content, toolCalls, finishReason, usage, includeUsage: body.stream_options?.include_usage === true }, baseHeaders);
        return;
      }
    }
  }

  async function streamReply(
    res: ServerResponse,
    scenario: ReplyScenario,
    r: {
      id: string;
      created: number;
      model: string;
      content: string | null;
      toolCalls: ScriptedToolCall[];
      finishReason: string;
      usage: Record<string, unknown>;
      includeUsage: boolean;
    },
    headers: Record<string, string>,
  ): Promise<void> {
    // OpenAI sends `usage: null` on every chunk when include_usage is on, then a final
    // chunk with `choices: []` and the usage.
    const extra = r.includeUsage ? { usage: null } : {};
    const events: unknown[] = [];
    const n = Math.max(1, Math.floor(scenario.chunks ?? 1));
    events.push(chunk(r.id, r.created, r.model, { role: 'assistant', content: '' }, null, extra));
    if (scenario.reasoning) {
      for (const piece of splitText(scenario.reasoning, n)) {
        events.push(chunk(r.id, r.created, r.model, { reasoning_content: piece }, null, extra));
      }
    }
    if (r.content) {
      for (const piece of splitText(r.content, n)) events.push(chunk(r.id, r.created, r.model, { content: piece }, null, extra));
    }
    r.toolCalls.forEach((c, index) => {
      events.push(
        chunk(r.id, r.created, r.model, { tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] }, null, extra),
      );
      if (c.arguments.length > 0) {
        events.push(chunk(r.id, r.created, r.model, { tool_calls: [{ index, function: { arguments: c.arguments } }] }, null, extra));
      }
    });
    events.push(chunk(r.id, r.created, r.model, {}, r.finishReason, extra));
    if (r.includeUsage) {
      events.push({ id: r.id, object: 'chat.completion.chunk', created: r.created, model: r.model, system_fingerprint: 'fp_xcompact_local', choices: [], usage: r.usage });
    }

    startSse(res, headers);
    for (let i = 0; i < events.length; i++) {
      if (i > 0) await sleep(scenario.chunkDelayMs ?? 0);
      if (res.destroyed || res.writableEnded) return;
      writeSse(res, events[i]);
    }
    if (!res.destroyed) res.end('data: [DONE]\n\n');
  }

  function buildUsage(scenario: ReplyScenario, body: ChatRequestBody): Record<string, unknown> {
    const prompt = scenario.usage?.prompt_tokens ?? estimatePromptTokens(body);
    const completion = scenario.usage?.completion_tokens ?? estimateCompletionTokens(scenario);
    return {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      prompt_tokens_details: { cached_tokens: scenario.usage?.cached_tokens ?? 0, audio_tokens: 0 },
      completion_tokens_details: {
        reasoning_tokens: scenario.reasoning ? Math.ceil(Buffer.byteLength(scenario.reasoning, 'utf8') / 4) : 0,
        audio_tokens: 0,
        accepted_prediction_tokens: 0,
        rejected_prediction_tokens: 0,
      },
    };
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;

  return {
    url,
    baseURL: `${url}/v1`,
    requests,
    enqueue: (...scenarios) => {
      queue.push(...scenarios);
    },
    setHandler: (h) => {
      handler = h;
    },
    waitForRequest: (index) => waitOn(arrivalWaiters, index, (r) => r !== undefined),
    waitForClose: (index) => waitOn(closeWaiters, index, (r) => r?.closed === true),
    close: async () => {
      if (closing) return;
      closing = true;
      for (const t of timers) {
        clearTimeout(t.timer);
        t.resolve();
      }
      timers.clear();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      for (const s of sockets) s.destroy();
      await closed;
      const err = new Error('local OpenAI server closed while a test was still waiting on it');
      for (const reject of rejectAllWaiters) reject(err);
      rejectAllWaiters = [];
      arrivalWaiters.clear();
      closeWaiters.clear();
    },
  };
}

/** The reply used when nothing is queued and no handler is set: echoes the last user message. */
function echoReply(body: ChatRequestBody): ReplyScenario {
  const lastUser = [...(body.messages ?? [])].reverse().find((m) => m.role === 'user');
  const text = typeof lastUser?.content === 'string' ? lastUser.content : lastUser?.content === undefined ? '' : JSON.stringify(lastUser.content);
  return { kind: 'reply', content: `echo: ${text.length > 200 ? `${text.slice(0, 200)}…` : text}` };
}

function chunk(
  id: string,
  created: number,
  model: string,
  delta: Record<string, unknown>,
  finishReason: string | null,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    system_fingerprint: 'fp_xcompact_local',
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...extra,
  };
}

function startSse(res: ServerResponse, headers: Record<string, string>): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', ...headers });
  res.flushHeaders();
}

function writeSse(res: ServerResponse, data: unknown): void {
  if (!res.destroyed && !res.writableEnded) res.write(`data: ${JSON.stringify(data)}\n\n`);
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** Splits text into `n` pieces by code point (never inside a surrogate pair); empty pieces are dropped. */
function splitText(text: string, n: number): string[] {
  const points = Array.from(text);
  const size = Math.max(1, Math.ceil(points.length / Math.max(1, n)));
  const out: string[] = [];
  for (let i = 0; i < points.length; i += size) out.push(points.slice(i, i + size).join(''));
  return out;
}
