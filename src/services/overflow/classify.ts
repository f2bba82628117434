/**
 * Classifies a failed model request: did the provider reject it because the prompt no
 * longer fits the context window (the only case compaction can fix), or is it a rate
 * limit, a server fault, a cancellation, or something else? Also recovers the error
 * bodies openai 6 drops, and detects "silent" overflow from reported usage.
 *
 * Pure functions: no retries, no waiting — what to do with the class is the charts' call.
 */
import type { OpenAIClient } from './openai-client';
import type { APIError } from 'openai';
import { XcompactError } from '../../errors';

/**
 * `broken-history`: the request's history holds a tool call whose arguments are not JSON (an
 * earlier reply cut inside the call by the output cap or the context, which llama.cpp answers
 * 200 with `arguments: "{"`), and the server refuses to render it (llama.cpp's 500 "Failed to
 * parse tool call arguments as JSON", on every later request until the history is repaired).
 * Not the reply to this request, so neither a larger max_tokens nor a retry of the same
 * messages helps: the history must be repaired. A request xcompact derives from the session
 * never holds such a call (session/derive.ts sends a cut call's arguments as `{}`), so this
 * comes from messages built elsewhere.
 */
export type RequestErrorKind = 'context-overflow' | 'broken-history' | 'rate-limit' | 'server' | 'cancelled' | 'other';

export interface RequestErrorClass {
  kind: RequestErrorKind;
  /** Which catalog entry matched (see OVERFLOW_PATTERNS), or `code:<code>` when only the error code did. */
  provider?: string;
  status?: number;
  /** The provider's own message when the body carried one, else the error's message. */
  message: string;
  /** The window the provider reported. */
  limitTokens?: number;
  /** What the provider said was requested (prompt, plus reserved completion when it counts it). */
  requestedTokens?: number;
  /** The prompt part alone, when the wording separates it from the completion. */
  promptTokens?: number;
  /** How far over the window, when that is all the wording gives (Ollama). */
  excessTokens?: number;
}

/**
 * Overflow wordings, most specific first. Named groups carry the numbers:
 * `limit`, `requested`, `prompt`, `completion`, `excess`.
 * Sources for each wording are cited next to the bodies in `src/testing/openai-server.ts`
 * (OVERFLOW_BODIES) where the local server serves them.
 */
export const OVERFLOW_PATTERNS: ReadonlyArray<{ provider: string; pattern: RegExp }> = [
  {
    provider: 'openrouter',
    pattern: /endpoint's maximum context length is (?<limit>[\d,]+) tokens\. However, you requested about (?<requested>[\d,]+) tokens/i,
  },
  // vLLM renderer: prompt alone over the window.
  { provider: 'vllm', pattern: /maximum context length is (?<limit>[\d,]+) tokens\. However, your request has (?<prompt>[\d,]+) input tokens/i },
  // vLLM: prompt fits but max_tokens does not.
  {
    provider: 'vllm',
    pattern:
      /is too large: (?<completion>[\d,]+)\. This model's maximum context length is (?<limit>[\d,]+) tokens and your request has (?<prompt>[\d,]+) input tokens/i,
  },
  // DeepSeek, vLLM ≤ ~0.10 and OpenAI's pre-2024 chat wording share this sentence exactly.
  {
    provider: 'openai-compatible',
    pattern:
      /maximum context length is (?<limit>[\d,]+) tokens\. However, you requested (?<requested>[\d,]+) tokens \((?<prompt>[\d,]+) in the messages, (?<completion>[\d,]+) in the completion\)/i,
  },
  { provider: 'openai', pattern: /maximum context length is (?<limit>[\d,]+) tokens\. However, your messages resulted in (?<prompt>[\d,]+) tokens/i },
  { provider: 'openai', pattern: /exceeds the context window of this model/i },
  // Legacy completions wording, still returned by some OpenRouter upstreams.
  {
    provider: 'openai-compatible',
    pattern:
      /maximum context length is (?<limit>[\d,]+) tokens, however you requested (?<requested>[\d,]+) tokens \((?<prompt>[\d,]+) in your prompt; (?<completion>[\d,]+) for the completion\)/i,
  },
  { provider: 'anthropic', pattern: /prompt is too long: (?<prompt>[\d,]+) tokens > (?<limit>[\d,]+) maximum/i },
  { provider: 'anthropic', pattern: /prompt is too long/i },
  {
    provider: 'gemini',
    pattern: /input token count (?:\((?<prompt>[\d,]+)\) )?exceeds the maximum number of tokens allowed(?: \((?<limit>[\d,]+)\)| (?<limit2>[\d,]+))?/i,
  },
  { provider: 'mistral', pattern: /prompt contains (?<prompt>[\d,]+) tokens.{0,40}?too large for model with (?<limit>[\d,]+) maximum context length/i },
  { provider: 'llama.cpp', pattern: /request \((?<prompt>[\d,]+) tokens\) exceeds the available context size \((?<limit>[\d,]+) tokens\)/i },
  { provider: 'llama.cpp', pattern: /exceeds the available context size/i },
  { provider: 'ollama', pattern: /prompt too long; exceeded (?:max )?context length(?: by (?<excess>[\d,]+) tokens?)?/i },
  { provider: 'ollama', pattern: /the input length exceeds the context length/i },
  { provider: 'cerebras', pattern: /current length is (?<prompt>[\d,]+) while limit is (?<limit>[\d,]+)/i },
  { provider: 'groq', pattern: /please reduce the length of the messages or completion/i },
  { provider: 'xai', pattern: /maximum prompt length is (?<limit>[\d,]+) but the request contains (?<prompt>[\d,]+) tokens/i },
  { provider: 'together', pattern: /the input \((?<prompt>[\d,]+) tokens\) is longer than the model's context length \((?<limit>[\d,]+) tokens\)/i },
  { provider: 'bedrock', pattern: /input is too long for requested model/i },
  { provider: 'lm-studio', pattern: /greater than the context length/i },
  // Generic fallbacks: other OpenAI-compatible servers and gateways re-wrapping the above.
  { provider: 'generic', pattern: /maximum context length is (?<limit>[\d,]+) tokens/i },
  { provider: 'generic', pattern: /context[_ ]length[_ ]exceeded/i },
  { provider: 'generic', pattern: /(?:exceeds?|exceeded|exceeding) (?:the )?(?:model'?s )?(?:maximum )?context (?:length|window|size|limit)/i },
  { provider: 'generic', pattern: /context window (?:exceeded|exceeds (?:the )?limit|is full)/i },
  { provider: 'generic', pattern: /\btoo many tokens\b/i },
];

/** Error codes (or `type`s) that mean overflow whatever the wording. */
const OVERFLOW_CODES: ReadonlySet<string> = new Set([
  'context_length_exceeded', // OpenAI, Groq
  'exceed_context_size_error', // llama.cpp (in `type`)
  'model_context_window_exceeded', // z.ai
  'request_too_large', // Anthropic 413 (payload over the request size cap)
]);

/**
 * Wordings that look like overflow but are quotas: "Request too large … tokens per minute",
 * "Too many tokens, please wait". They must never trigger a lossy compaction.
 */
const NON_OVERFLOW_PATTERNS: readonly RegExp[] = [
  /rate[ _-]?limit/i,
  /too many requests/i,
  /tokens per (?:min|minute|day|hour)/i,
  /\b(?:TPM|TPD|RPM)\b/,
  /quota/i,
  /throttl/i,
  /please (?:wait|try again in)/i,
];

/** A server that cannot render a tool call in the history whose arguments are not JSON (llama.cpp, with --jinja). */
const BROKEN_HISTORY_PATTERNS: readonly RegExp[] = [/failed to parse tool call arguments as json/i];

const RATE_LIMIT_CODES: ReadonlySet<string> = new Set(['rate_limit_exceeded', 'rate_limit_error', 'insufficient_quota', 'tokens', 'requests']);

/** Types/codes of server faults, for errors that carry no status (an error event mid-stream). */
const SERVER_CODES: ReadonlySet<string> = new Set(['server_error', 'internal_server_error', 'api_error', 'overloaded_error', 'service_unavailable']);

/**
 * Classifies any thrown value. Works on the `openai` SDK's errors (also when the SDK was
 * loaded twice, CJS and ESM, by falling back to constructor names), DOM `AbortError`s, and
 * plain errors whose message carries a provider's wording (gateways that re-wrap errors).
 *
 * - cancelled: `APIUserAbortError`, any `AbortError`.
 * - other: connection failures and timeouts (`APIConnectionError`, incl. `APIConnectionTimeoutError`):
 *   a timeout says nothing reliable about the prompt size, and retrying them is a policy decision.
 * - rate-limit: 429, `RateLimitError`, a rate-limit code, or quota wording (e.g. Groq's 413
 *   "Request too large … tokens per minute", which compaction is not the answer to).
 * - context-overflow: an overflow code, a catalog wording, or a bare 413.
 * - broken-history: a server that cannot render a cut tool call in the history (see RequestErrorKind).
 * - server: status ≥ 500 without overflow wording, or a server-error type mid-stream (no status).
 */
export function classifyRequestError(err: unknown): RequestErrorClass {
  if (isAbort(err)) return { kind: 'cancelled', message: messageOf(err) || 'Request was aborted.' };
  if (isConnectionError(err)) return { kind: 'other', message: messageOf(err) || 'Connection error.' };

  const status = statusOf(err);
  const body = bodyOf(err);
  const providerMessage = providerMessageOf(body);
  const message = providerMessage ?? messageOf(err);
  const codes = [codeOf(err, 'code'), codeOf(err, 'type'), codeOf(body, 'code'), codeOf(body, 'type'), codeOf(body, 'status')].filter(
    (c): c is string => c !== undefined,
  );
  const text = [providerMessage, messageOf(err), typeof body === 'string' ? body : undefined].filter(Boolean).join('\n');
  const base = status === undefined ? { message } : { status, message };

  const quotaWording = NON_OVERFLOW_PATTERNS.some((p) => p.test(text));
  const rateLimited = status === 429 || isInstance(err, 'RateLimitError') || codes.some((c) => RATE_LIMIT_CODES.has(c)) || quotaWording;
  if (rateLimited) return { kind: 'rate-limit', ...base };

  for (const { provider, pattern } of OVERFLOW_PATTERNS) {
    const m = pattern.exec(text);
    if (m) return { kind: 'context-overflow', provider, ...base, ...numbersFrom(m.groups, body) };
  }
  const overflowCode = codes.find((c) => OVERFLOW_CODES.has(c));
  if (overflowCode !== undefined) return { kind: 'context-overflow', provider: `code:${overflowCode}`, ...base, ...numbersFrom(undefined, body) };
  if (status === 413) return { kind: 'context-overflow', provider: 'http-413', ...base };

  if (BROKEN_HISTORY_PATTERNS.some((p) => p.test(text))) return { kind: 'broken-history', ...base };

  const serverFault =
    (status !== undefined && status >= 500) || isInstance(err, 'InternalServerError') || (status === undefined && codes.some((c) => SERVER_CODES.has(c)));
  if (serverFault) {
    return { kind: 'server', ...base };
  }
  return { kind: 'other', ...base };
}

/**
 * True when a successful response reports more prompt tokens than the model's window: the
 * provider accepted an oversized prompt and silently truncated it (llama.cpp / Ollama context
 * shifting), so the model answered without part of the conversation.
 */
export function isSilentOverflow(usage: { promptTokens: number }, contextWindow: number): boolean {
  if (!Number.isFinite(contextWindow) || contextWindow <= 0) {
    throw new XcompactError(
      'invalid-context-window',
      `isSilentOverflow needs a positive context window in tokens, got ${String(contextWindow)}; check the model's contextWindow in the models config.`,
    );
  }
  return Number.isFinite(usage.promptTokens) && usage.promptTokens > contextWindow;
}

// ---------------------------------------------------------------------------------------
// Error-body recovery
// ---------------------------------------------------------------------------------------

const RECOVERY_MARK = Symbol.for('xcompact.errorBodyRecovery');

/**
 * openai 6 builds an `APIError` from `body.error` only (`APIError.generate`), so a body
 * without an `error` key — vLLM's and Mistral's flat `{object:'error', message, type, code}`,
 * Gemini's OpenAI endpoint's `[{error:{…}}]` array, a FastAPI `{detail}` — becomes
 * `"400 status code (no body)"` with no code and no text: an overflow looks like any 400.
 *
 * This rewrites such bodies into the `{error:{…}}` shape before the SDK builds the error, by
 * wrapping the client's `makeStatusError` (the SDK's hook for exactly this; it receives the
 * parsed JSON body). The client is patched in place and returned; patching twice is a no-op.
 * `client.withOptions(...)` builds a fresh client, so patch that one too.
 */
export function withErrorBodyRecovery<C extends OpenAIClient>(client: C): C {
  const target = client as unknown as Record<PropertyKey, unknown> & {
    makeStatusError: (status: number, error: unknown, message: string | undefined, headers: Headers) => APIError;
  };
  if (target[RECOVERY_MARK]) return client;
  const original = target.makeStatusError.bind(client);
  target.makeStatusError = (status, error, message, headers) => original(status, recoverErrorBody(error), message, headers);
  target[RECOVERY_MARK] = true;
  return client;
}

/**
 * Normalises a parsed error body into `{error: {...}}` when it carries an error without that
 * wrapper; returns anything else unchanged.
 */
export function recoverErrorBody(body: unknown): unknown {
  if (Array.isArray(body)) {
    const first: unknown = body[0];
    if (isRecord(first) && first['error'] !== undefined) return { error: first['error'] };
    return body;
  }
  if (!isRecord(body) || body['error'] !== undefined) return body;
  if (typeof body['message'] === 'string') return { error: body };
  const detail = body['detail'];
  if (typeof detail === 'string') return { error: { message: detail } };
  if (isRecord(detail) && typeof detail['message'] === 'string') return { error: detail };
  return body;
}

// ---------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------

function numbersFrom(groups: Record<string, string | undefined> | undefined, body: unknown): Partial<RequestErrorClass> {
  const num = (s: string | undefined): number | undefined => {
    if (s === undefined) return undefined;
    const n = Number(s.replace(/,/g, ''));
    return Number.isFinite(n) ? n : undefined;
  };
  const out: Partial<RequestErrorClass> = {};
  const limit = num(groups?.['limit']) ?? num(groups?.['limit2']) ?? numberField(body, 'n_ctx');
  const prompt = num(groups?.['prompt']) ?? numberField(body, 'n_prompt_tokens');
  const completion = num(groups?.['completion']);
  const requested = num(groups?.['requested']) ?? (prompt !== undefined ? prompt + (completion ?? 0) : undefined);
  const excess = num(groups?.['excess']);
  if (limit !== undefined) out.limitTokens = limit;
  if (requested !== undefined) out.requestedTokens = requested;
  if (prompt !== undefined) out.promptTokens = prompt;
  if (excess !== undefined) out.excessTokens = excess;
  else if (limit !== undefined && requested !== undefined && requested > limit) out.excessTokens = requested - limit;
  return out;
}

function isAbort(err: unknown): boolean {
  if (isInstance(err, 'APIUserAbortError')) return true;
  return isRecord(err) && err['name'] === 'AbortError';
}

function isConnectionError(err: unknown): boolean {
  return isInstance(err, 'APIConnectionError');
}

/**
 * The SDK's error class by name along the prototype chain (`APIConnectionTimeoutError` is an
 * `APIConnectionError`): no `instanceof`, so xcompact never loads the SDK to classify (importing
 * xcompact does not load `openai`), and an error from a second copy of the SDK (CJS and ESM, or
 * openai 6 and 7) is read the same. The status-based checks beside each use cover a bundler
 * that renamed the classes.
 */
function isInstance(err: unknown, name: string): boolean {
  let proto: unknown = isRecord(err) ? Object.getPrototypeOf(err) : null;
  while (isRecord(proto)) {
    const ctor = proto['constructor'];
    if (typeof ctor === 'function' && ctor.name === name) return true;
    proto = Object.getPrototypeOf(proto);
  }
  return false;
}

function statusOf(err: unknown): number | undefined {
  if (!isRecord(err)) return undefined;
  const s = err['status'] ?? err['statusCode'];
  return typeof s === 'number' && Number.isInteger(s) ? s : undefined;
}

/** The SDK keeps the body's `error` member (or the recovered flat body) on `err.error`. */
function bodyOf(err: unknown): unknown {
  return isRecord(err) ? err['error'] : undefined;
}

function providerMessageOf(body: unknown): string | undefined {
  if (typeof body === 'string') return body;
  if (isRecord(body) && typeof body['message'] === 'string') return body['message'];
  return undefined;
}

function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (isRecord(err) && typeof err['message'] === 'string') return err['message'];
  return typeof err === 'string' ? err : '';
}

function codeOf(obj: unknown, key: string): string | undefined {
  if (!isRecord(obj)) return undefined;
  const v = obj[key];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

function numberField(obj: unknown, key: string): number | undefined {
  if (!isRecord(obj)) return undefined;
  const v = obj[key];
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function isRecord(v: unknown): v is Record<PropertyKey, unknown> {
  return typeof v === 'object' && v !== null;
}
