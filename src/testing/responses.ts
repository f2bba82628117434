/**
 * How the local server answers one chat-completions request with a chosen scenario: JSON or
 * SSE bodies shaped like OpenAI's, usage (reported or estimated), and llama.cpp's limits when
 * the server was started with a context window.
 */
import type { ServerResponse } from 'node:http';
import type { ChatRequestBody, RecordedRequest, ReplyScenario, Scenario, ScriptedToolCall } from './scenarios';

/** What `respond` needs from the server that calls it. */
export interface ResponseContext {
  /** Resolves after `ms`, or at once when the server is closing. */
  sleep(ms: number): Promise<void>;
  defaultModel: string;
  /** llama-server's `-c`; see `StartOpenAIServerOptions.contextWindow`. */
  contextWindow?: number;
}

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
  const text = (scenario.content ?? '') + (scenario.reasoning ?? '') + (scenario.toolCalls ?? []).map((c) => c.name + c.arguments).join('');
  return Math.ceil(Buffer.byteLength(text, 'utf8') / 4);
}

// ---------------------------------------------------------------------------------------
// llama.cpp's limits
// ---------------------------------------------------------------------------------------

/** The output cap the request asked for, whichever field carries it. */
function requestedCap(body: ChatRequestBody): number | undefined {
  for (const key of ['max_completion_tokens', 'max_tokens'] as const) {
    const v = body[key];
    if (typeof v === 'number' && Number.isFinite(v) && v > 0) return Math.floor(v);
  }
  return undefined;
}

/** llama.cpp's overflow body for a prompt of `prompt` tokens in a window of `window`. */
function llamaOverflow(prompt: number, window: number): { status: number; body: unknown } {
  return {
    status: 400,
    body: {
      error: {
        code: 400,
        message: `request (${prompt} tokens) exceeds the available context size (${window} tokens), try increasing it`,
        type: 'exceed_context_size_error',
        n_prompt_tokens: prompt,
        n_ctx: window,
      },
    },
  };
}

/** `text` cut to at most `bytes` UTF-8 bytes, by code point. */
function cutToBytes(text: string, bytes: number): string {
  let used = 0;
  let out = '';
  for (const point of text) {
    const size = Buffer.byteLength(point, 'utf8');
    if (used + size > bytes) break;
    used += size;
    out += point;
  }
  return out;
}

/**
 * The reply as a server with `contextWindow` generates it: generation stops at the first of
 * the request's output cap or the window (prompt + generated), like llama-server, with finish
 * reason `length` and usage counting exactly the tokens it was allowed. A reply stopped inside
 * its tool calls comes back as llama-server sends it (200, finish reason `length`): the text,
 * and the call it was writing with its arguments cut (`"{"` at least: invalid JSON); the calls
 * after it are not sent. Stopped in its text, it carries the text only.
 */
function applyLimits(scenario: ReplyScenario, body: ChatRequestBody, window: number): ReplyScenario {
  const prompt = scenario.usage?.prompt_tokens ?? estimatePromptTokens(body);
  const cap = requestedCap(body);
  const limit = Math.min(cap ?? Infinity, window - prompt);
  if (estimateCompletionTokens(scenario) <= limit) return scenario;
  const reasoning = scenario.reasoning === undefined ? undefined : cutToBytes(scenario.reasoning, 4 * limit);
  const content = cutToBytes(scenario.content ?? '', 4 * limit - Buffer.byteLength(reasoning ?? '', 'utf8'));
  const stopped: ReplyScenario = {
    ...scenario,
    content,
    finishReason: 'length',
    usage: { ...scenario.usage, prompt_tokens: prompt, completion_tokens: limit },
  };
  delete stopped.toolCalls;
  const left = 4 * limit - Buffer.byteLength(reasoning ?? '', 'utf8') - Buffer.byteLength(content, 'utf8');
  const first = scenario.toolCalls?.[0];
  if (first && content === (scenario.content ?? '') && left > 0) {
    // Cut inside the first call: its name written, its arguments not finished.
    const room = Math.max(1, Math.min(left - Buffer.byteLength(first.name, 'utf8'), Buffer.byteLength(first.arguments, 'utf8') - 1));
    stopped.toolCalls = [{ ...first, arguments: cutToBytes(first.arguments, room) || '{' }];
  }
  if (reasoning === undefined) delete stopped.reasoning;
  else stopped.reasoning = reasoning;
  return stopped;
}

/**
 * llama-server (with `--jinja`) renders every tool call of the history through its chat
 * template, which parses the call's arguments: one that is not JSON (a reply cut inside a call,
 * recorded as it came) fails every request that carries it, summaries included, with this 500.
 */
export function brokenToolCallIn(body: ChatRequestBody): string | undefined {
  for (const m of body.messages ?? []) {
    const calls = (m as { tool_calls?: Array<{ function?: { arguments?: unknown } }> }).tool_calls ?? [];
    for (const c of calls) {
      const args = c.function?.arguments;
      if (typeof args !== 'string') continue;
      try {
        JSON.parse(args);
      } catch (err) {
        return String((err as Error).message);
      }
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------
// Responding
// ---------------------------------------------------------------------------------------

/** The reply used when nothing is queued and no handler is set: echoes the last user message. */
export function echoReply(body: ChatRequestBody): ReplyScenario {
  const lastUser = [...(body.messages ?? [])].reverse().find((m) => m.role === 'user');
  const text = typeof lastUser?.content === 'string' ? lastUser.content : lastUser?.content === undefined ? '' : JSON.stringify(lastUser.content);
  return { kind: 'reply', content: `echo: ${text.length > 200 ? `${text.slice(0, 200)}…` : text}` };
}

export async function respond(ctx: ResponseContext, scenario: Scenario, body: ChatRequestBody, rec: RecordedRequest, res: ServerResponse): Promise<void> {
  const stream = body.stream === true;
  const model = (scenario.kind === 'reply' && scenario.model) || body.model || ctx.defaultModel;
  const id = `chatcmpl-local-${rec.index}`;
  const created = Math.floor(Date.now() / 1000);
  const baseHeaders = { 'x-request-id': `req_local_${rec.index}` };

  if (ctx.contextWindow !== undefined && scenario.kind === 'reply') {
    const broken = brokenToolCallIn(body);
    if (broken !== undefined) {
      await ctx.sleep(scenario.delayMs ?? 0);
      if (!res.destroyed)
        sendJson(res, 500, { error: { code: 500, message: `Failed to parse tool call arguments as JSON: ${broken}`, type: 'server_error' } }, baseHeaders);
      return;
    }
    const prompt = scenario.usage?.prompt_tokens ?? estimatePromptTokens(body);
    if (prompt >= ctx.contextWindow) {
      await ctx.sleep(scenario.delayMs ?? 0);
      if (!res.destroyed) sendJson(res, 400, llamaOverflow(prompt, ctx.contextWindow).body, baseHeaders);
      return;
    }
    scenario = applyLimits(scenario, body, ctx.contextWindow);
  }

  switch (scenario.kind) {
    case 'status': {
      await ctx.sleep(scenario.delayMs ?? 0);
      if (res.destroyed) return;
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
      const error = {
        type: 'server_error',
        param: null,
        code: null,
        ...(scenario.error ?? { message: 'The server had an error while processing your request. Sorry about that!' }),
      };
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
      await ctx.sleep(scenario.delayMs ?? 0);
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
      await streamReply(
        ctx,
        res,
        scenario,
        { id, created, model, content, toolCalls, finishReason, usage, includeUsage: body.stream_options?.include_usage === true },
        baseHeaders,
      );
      return;
    }
  }
}

async function streamReply(
  ctx: ResponseContext,
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
    events.push({
      id: r.id,
      object: 'chat.completion.chunk',
      created: r.created,
      model: r.model,
      system_fingerprint: 'fp_xcompact_local',
      choices: [],
      usage: r.usage,
    });
  }

  startSse(res, headers);
  for (let i = 0; i < events.length; i++) {
    if (i > 0) await ctx.sleep(scenario.chunkDelayMs ?? 0);
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

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
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
