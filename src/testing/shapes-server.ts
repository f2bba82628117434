/**
 * The local server's two other request shapes: `POST /v1/responses` (the OpenAI Responses API)
 * and `POST /v1/messages` (Anthropic Messages, plus `POST /v1/messages/count_tokens`), as
 * llama-server serves them next to chat completions on one port.
 *
 * A request of either shape is read as the chat-completions body it stands for (`chatBodyOf`:
 * system prompt, user / assistant / tool messages, tool calls, tools), so the same scenarios
 * answer it (the queue, a handler, the echo) and the same token estimate prices it; the reply is
 * then written in the request's own shape, JSON or SSE events. This reading is the server's own,
 * written from the wire formats, not the library's mapping: a test sees what was really sent.
 */
import type { ServerResponse } from 'node:http';
import { estimateCompletionTokens, estimatePromptTokens, sendJson, type ResponseContext } from './responses';
import type { ChatRequestBody, RecordedRequest, ReplyScenario, Scenario } from './scenarios';

export type ShapeRoute = 'responses' | 'messages' | 'count_tokens';

/** Which shape a path is, if it is one of these. */
export function shapeRoute(path: string): ShapeRoute | undefined {
  if (path === '/v1/responses') return 'responses';
  if (path === '/v1/messages') return 'messages';
  if (path === '/v1/messages/count_tokens') return 'count_tokens';
  return undefined;
}

/** A request body of either shape, as parsed JSON. */
export type ShapeRequestBody = Record<string, unknown>;
type Obj = ShapeRequestBody;
type ChatMessage = NonNullable<ChatRequestBody['messages']>[number];
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const textOf = (content: unknown): string =>
  typeof content === 'string'
    ? content
    : Array.isArray(content)
      ? (content as Obj[])
          .map((p) =>
            typeof p['text'] === 'string'
              ? p['text']
              : typeof p['content'] === 'string'
                ? p['content']
                : Array.isArray(p['content'])
                  ? textOf(p['content'])
                  : '',
          )
          .join('\n\n')
      : '';

/** A Responses or Messages request body as the chat-completions body it stands for. */
export function chatBodyOf(shape: 'responses' | 'messages', body: ShapeRequestBody): ChatRequestBody {
  const messages: ChatMessage[] = [];
  const tools: unknown[] = [];
  if (shape === 'responses') {
    if (typeof body['instructions'] === 'string') messages.push({ role: 'system', content: body['instructions'] });
    const input = typeof body['input'] === 'string' ? [{ role: 'user', content: body['input'] }] : Array.isArray(body['input']) ? (body['input'] as Obj[]) : [];
    for (const item of input) {
      const type = item['type'] ?? 'message';
      if (type === 'message') messages.push({ role: String(item['role']), content: textOf(item['content']) });
      else if (type === 'function_call') {
        const call = { id: item['call_id'], type: 'function', function: { name: item['name'], arguments: item['arguments'] } };
        const last = messages[messages.length - 1];
        if (last?.role === 'assistant' && Array.isArray(last['tool_calls'])) (last['tool_calls'] as unknown[]).push(call);
        else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
      } else if (type === 'function_call_output') messages.push({ role: 'tool', tool_call_id: item['call_id'], content: textOf(item['output']) });
      else if (type === 'reasoning') messages.push({ role: 'assistant', content: '', reasoning: item });
    }
    for (const t of (body['tools'] as Obj[] | undefined) ?? [])
      tools.push({ type: 'function', function: { name: t['name'], description: t['description'], parameters: t['parameters'] } });
  } else {
    if (body['system'] !== undefined) messages.push({ role: 'system', content: textOf(body['system']) });
    for (const m of (body['messages'] as Obj[] | undefined) ?? []) {
      const blocks = typeof m['content'] === 'string' ? [{ type: 'text', text: m['content'] }] : ((m['content'] as Obj[] | undefined) ?? []);
      if (m['role'] === 'assistant') {
        const calls = blocks
          .filter((b) => b['type'] === 'tool_use')
          .map((b) => ({ id: b['id'], type: 'function', function: { name: b['name'], arguments: JSON.stringify(b['input'] ?? {}) } }));
        const text = textOf(blocks.filter((b) => b['type'] === 'text'));
        messages.push(calls.length > 0 ? { role: 'assistant', content: text === '' ? null : text, tool_calls: calls } : { role: 'assistant', content: text });
      } else {
        for (const b of blocks) if (b['type'] === 'tool_result') messages.push({ role: 'tool', tool_call_id: b['tool_use_id'], content: textOf(b['content']) });
        const rest = blocks.filter((b) => b['type'] !== 'tool_result');
        if (rest.length > 0) messages.push({ role: 'user', content: textOf(rest) });
      }
    }
    for (const t of (body['tools'] as Obj[] | undefined) ?? [])
      tools.push({ type: 'function', function: { name: t['name'], description: t['description'], parameters: t['input_schema'] } });
  }
  const cap = shape === 'responses' ? body['max_output_tokens'] : body['max_tokens'];
  return {
    model: typeof body['model'] === 'string' ? body['model'] : undefined,
    messages,
    ...(tools.length > 0 ? { tools } : {}),
    stream: body['stream'] === true,
    ...(typeof cap === 'number' ? { max_tokens: cap } : {}),
  };
}

/** `POST /v1/messages/count_tokens`: the prompt's estimate (`estimatePromptTokens`), as Anthropic answers it. */
export function serveCountTokens(rec: RecordedRequest, res: ServerResponse): void {
  if (!isObj(rec.json)) return sendJson(res, 400, anthropicError('invalid_request_error', 'The request body is not a JSON object.'));
  sendJson(res, 200, { input_tokens: estimatePromptTokens(chatBodyOf('messages', rec.json)) });
}

const anthropicError = (type: string, message: string) => ({ type: 'error', error: { type, message }, request_id: 'req_local' });

/** Anthropic's overflow body (its wording, with the counts), and llama.cpp's for the Responses route, as llama-server sends it there. */
export function shapeOverflow(shape: 'responses' | 'messages', prompt: number, window: number): { status: number; body: unknown } {
  if (shape === 'messages') return { status: 400, body: anthropicError('invalid_request_error', `prompt is too long: ${prompt} tokens > ${window} maximum`) };
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

/** Answers one Responses or Messages request with the chosen scenario. */
export async function respondShape(
  shape: 'responses' | 'messages',
  ctx: ResponseContext,
  scenario: Scenario,
  body: ChatRequestBody,
  rec: RecordedRequest,
  res: ServerResponse,
): Promise<void> {
  const headers = { 'x-request-id': `req_local_${rec.index}` };
  const stream = body.stream === true;
  const model = (scenario.kind === 'reply' && scenario.model) || body.model || ctx.defaultModel;
  if (scenario.kind === 'status') {
    await ctx.sleep(scenario.delayMs ?? 0);
    if (res.destroyed) return;
    res.writeHead(scenario.status, {
      'content-type': typeof scenario.body === 'string' ? 'text/plain; charset=utf-8' : 'application/json',
      ...headers,
      ...scenario.headers,
    });
    res.end(typeof scenario.body === 'string' ? scenario.body : JSON.stringify(scenario.body));
    return;
  }
  if (scenario.kind === 'hang') {
    if (scenario.sendHeaders === false) return;
    res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/json', ...headers });
    res.flushHeaders();
    return;
  }
  if (scenario.kind === 'streamError') {
    const message = scenario.error?.message ?? 'The server had an error while processing your request.';
    if (!stream) return sendJson(res, 500, shape === 'messages' ? anthropicError('api_error', message) : { error: { message, type: 'server_error' } }, headers);
    startSse(res, headers);
    writeEvent(
      res,
      'error',
      shape === 'messages' ? anthropicError('api_error', message) : { type: 'error', code: 'server_error', message, param: null, sequence_number: 0 },
    );
    res.end();
    return;
  }
  const prompt = scenario.usage?.prompt_tokens ?? estimatePromptTokens(body);
  if (ctx.contextWindow !== undefined && prompt >= ctx.contextWindow) {
    await ctx.sleep(scenario.delayMs ?? 0);
    const o = shapeOverflow(shape, prompt, ctx.contextWindow);
    if (!res.destroyed) sendJson(res, o.status, o.body, headers);
    return;
  }
  await ctx.sleep(scenario.delayMs ?? 0);
  if (res.destroyed) return;
  const completion = scenario.usage?.completion_tokens ?? estimateCompletionTokens(scenario);
  const events =
    shape === 'responses' ? responsesEvents(scenario, rec.index, model, prompt, completion) : messagesEvents(scenario, rec.index, model, prompt, completion);
  if (!stream) return sendJson(res, 200, events.final, headers);
  startSse(res, headers);
  for (let i = 0; i < events.stream.length; i++) {
    if (i > 0) await ctx.sleep(scenario.chunkDelayMs ?? 0);
    if (res.destroyed || res.writableEnded) return;
    const [name, data] = events.stream[i]!;
    writeEvent(res, name, data);
  }
  if (!res.destroyed) res.end();
}

type Events = { final: Obj; stream: Array<[string, Obj]> };

function responsesEvents(s: ReplyScenario, index: number, model: string, prompt: number, completion: number): Events {
  const output: Obj[] = [];
  if (s.reasoning !== undefined)
    output.push({
      type: 'reasoning',
      id: `rs_local_${index}`,
      summary: [{ type: 'summary_text', text: s.reasoning }],
      encrypted_content: `enc:${Buffer.from(s.reasoning).toString('base64')}`,
    });
  if (s.content !== undefined && s.content !== '' ? true : !s.toolCalls?.length) {
    output.push({
      type: 'message',
      id: `msg_local_${index}`,
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: s.content ?? '', annotations: [] }],
    });
  }
  for (const c of s.toolCalls ?? [])
    output.push({ type: 'function_call', id: `fc_local_${index}_${c.id}`, call_id: c.id, name: c.name, arguments: c.arguments, status: 'completed' });
  const incomplete = s.finishReason === 'length';
  const response: Obj = {
    id: `resp_local_${index}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    model,
    status: incomplete ? 'incomplete' : 'completed',
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    output,
    usage: {
      input_tokens: prompt,
      input_tokens_details: { cached_tokens: s.usage?.cached_tokens ?? 0 },
      output_tokens: completion,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: prompt + completion,
    },
  };
  let seq = 0;
  const ev = (type: string, data: Obj): [string, Obj] => [type, { type, sequence_number: seq++, ...data }];
  const stream: Array<[string, Obj]> = [ev('response.created', { response: { ...response, status: 'in_progress', output: [], usage: null } })];
  output.forEach((item, i) => {
    stream.push(
      ev('response.output_item.added', {
        output_index: i,
        item: { ...item, ...(item['type'] === 'message' ? { content: [] } : {}), ...(item['type'] === 'function_call' ? { arguments: '' } : {}) },
      }),
    );
    if (item['type'] === 'message')
      stream.push(ev('response.output_text.delta', { output_index: i, item_id: item['id'], content_index: 0, delta: s.content ?? '' }));
    if (item['type'] === 'function_call')
      stream.push(ev('response.function_call_arguments.delta', { output_index: i, item_id: item['id'], delta: item['arguments'] }));
    stream.push(ev('response.output_item.done', { output_index: i, item }));
  });
  stream.push(ev(incomplete ? 'response.incomplete' : 'response.completed', { response }));
  return { final: response, stream };
}

function messagesEvents(s: ReplyScenario, index: number, model: string, prompt: number, completion: number): Events {
  const content: Obj[] = [];
  if (s.reasoning !== undefined) content.push({ type: 'thinking', thinking: s.reasoning, signature: `sig:${Buffer.from(s.reasoning).toString('base64')}` });
  if (s.content !== undefined && s.content !== '' ? true : !s.toolCalls?.length) content.push({ type: 'text', text: s.content ?? '' });
  for (const c of s.toolCalls ?? []) {
    let input: unknown;
    try {
      input = JSON.parse(c.arguments);
    } catch {
      input = {};
    }
    content.push({ type: 'tool_use', id: c.id, name: c.name, input });
  }
  const stop = s.finishReason === 'length' ? 'max_tokens' : s.toolCalls?.length ? 'tool_use' : 'end_turn';
  const cached = s.usage?.cached_tokens ?? 0;
  const usage = { input_tokens: prompt - cached, cache_read_input_tokens: cached, cache_creation_input_tokens: 0, output_tokens: completion };
  const message: Obj = { id: `msg_local_${index}`, type: 'message', role: 'assistant', model, content, stop_reason: stop, stop_sequence: null, usage };
  const stream: Array<[string, Obj]> = [
    ['message_start', { type: 'message_start', message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } } }],
  ];
  content.forEach((b, i) => {
    const start =
      b['type'] === 'text' ? { type: 'text', text: '' } : b['type'] === 'thinking' ? { type: 'thinking', thinking: '', signature: '' } : { ...b, input: {} };
    stream.push(['content_block_start', { type: 'content_block_start', index: i, content_block: start }]);
    if (b['type'] === 'text') stream.push(['content_block_delta', { type: 'content_block_delta', index: i, delta: { type: 'text_delta', text: b['text'] } }]);
    if (b['type'] === 'thinking') {
      stream.push(['content_block_delta', { type: 'content_block_delta', index: i, delta: { type: 'thinking_delta', thinking: b['thinking'] } }]);
      stream.push(['content_block_delta', { type: 'content_block_delta', index: i, delta: { type: 'signature_delta', signature: b['signature'] } }]);
    }
    if (b['type'] === 'tool_use')
      stream.push([
        'content_block_delta',
        { type: 'content_block_delta', index: i, delta: { type: 'input_json_delta', partial_json: JSON.stringify(b['input']) } },
      ]);
    stream.push(['content_block_stop', { type: 'content_block_stop', index: i }]);
  });
  stream.push(['message_delta', { type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: completion } }]);
  stream.push(['message_stop', { type: 'message_stop' }]);
  return { final: message, stream };
}

function startSse(res: ServerResponse, headers: Record<string, string>): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', ...headers });
  res.flushHeaders();
}

function writeEvent(res: ServerResponse, name: string, data: unknown): void {
  if (!res.destroyed && !res.writableEnded) res.write(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
}
