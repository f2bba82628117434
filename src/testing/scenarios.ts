/**
 * What the local OpenAI-compatible server can be told to do (scenarios) and what it records
 * about each request. Types only; the server is in `openai-server.ts`.
 */
import type { IncomingHttpHeaders } from 'node:http';

/** Token counts a `reply` reports; anything left out is estimated (see `estimatePromptTokens`). */
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
  /**
   * Wait this long before sending the response headers (both modes): a slow model, e.g. a
   * summarizer that takes 2 s. The wait ends early when the server closes.
   */
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
  /** Wait this long before answering (a slow failure). */
  delayMs?: number;
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
  /**
   * With `slots`: how long the request waited for a free slot before it was worked on (ms), and
   * the prompt tokens the slot evaluated for it (those after the prefix it shares with the
   * slot's previous prompt, llama.cpp's prompt cache; see `StartOpenAIServerOptions.slots`).
   */
  queuedMs?: number;
  evaluatedTokens?: number;
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
  /**
   * Behave like llama.cpp's `llama-server -c <contextWindow>` (one slot) for `reply` scenarios,
   * counting with `estimatePromptTokens`: a prompt that reaches the window gets
   * llama.cpp's 400 `exceed_context_size_error`; generation stops at the first of the
   * request's `max_tokens`/`max_completion_tokens` or the window (prompt + generated), with
   * finish reason `length` and usage counting the tokens generated; a reply stopped inside a
   * tool call carries that call with its arguments cut (invalid JSON), and a request whose
   * history holds such a call is answered 500 "Failed to parse tool call arguments as JSON", as
   * llama-server `--jinja` answers it. Unset (the default): the
   * window and the output cap are ignored and every reply is sent whole.
   */
  contextWindow?: number;
  /**
   * Behave like `llama-server -np <slots>`: at most this many chat completions are worked on at
   * once, the others wait in arrival order (a request's `delayMs` and stream are its work). Each
   * slot keeps its last prompt: a request evaluates only the tokens after the prefix it shares
   * with it (the prompt cache), recorded as `evaluatedTokens`, and with `evalMsPerToken` that
   * evaluation takes time too. Unset: every request is served at once, as before.
   */
  slots?: number;
  /** With `slots`: milliseconds a slot spends per evaluated prompt token (default 0). */
  evalMsPerToken?: number;
  /**
   * Serve llama.cpp's and vLLM's `POST /tokenize` at the server root: `{content}` (llama.cpp) or
   * `{prompt}` (vLLM) → `{tokens, count}`; `true`: one token per started 4 UTF-8 bytes (as
   * `estimatePromptTokens` counts), or a vocabulary, dialect, delay and usage of its own
   * (TokenizeOptions in tokenize.ts). Unset: `/tokenize` is an unknown route (404), as on OpenAI.
   */
  tokenize?: boolean | TokenizeOptions;
}

/** The local server's `POST /tokenize` (tokenize.ts). */
export interface TokenizeOptions {
  /**
   * The vocabulary: tokens of a text. Default `bytesPerFour` (one token per started 4 UTF-8
   * bytes); `digitTokens` spends one token per digit, as Qwen- and Llama-family tokenizers do,
   * about three times what o200k_base spends on numbers.
   */
  count?: (text: string) => number;
  /**
   * Which server it answers as: `llama.cpp` wants `{content}` and answers `{tokens}`; `vllm`
   * wants `{prompt}` (400 without) and answers `{count, tokens, max_model_len}`; `any` (the
   * default) takes either and answers `{tokens, count}`.
   */
  dialect?: 'llama.cpp' | 'vllm' | 'any';
  /** Milliseconds before each answer (a slow or stuck server). */
  delayMs?: number;
  /**
   * Count the prompt of chat requests with the same vocabulary, as the model's server does: the
   * usage a reply reports, and the window `contextWindow` enforces. Each message costs its texts
   * (content, tool-call names and arguments) plus 4 (chatml framing), a tool call 3 more, the
   * request 3 plus its tool list's JSON. Default false: `estimatePromptTokens`.
   */
  usage?: boolean;
}
