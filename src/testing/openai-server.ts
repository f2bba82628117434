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
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { echoReply, respond, sendJson, type ResponseContext } from './responses';
import { bytesPerFour, chatPromptTokens, serveTokenize, type TokenizeOptions } from './tokenize';
import type { ChatRequestBody, LocalOpenAIServer, ParsedChatRequest, RecordedRequest, Scenario, ScenarioHandler, StartOpenAIServerOptions } from './scenarios';
import { chatBodyOf, respondShape, serveCountTokens, shapeRoute } from './shapes-server';

export type {
  ChatRequestBody,
  HangScenario,
  LocalOpenAIServer,
  ParsedChatRequest,
  RecordedRequest,
  ReplyScenario,
  Scenario,
  ScenarioHandler,
  ScriptedToolCall,
  StartOpenAIServerOptions,
  StatusScenario,
  StreamErrorScenario,
  UsageOverride,
} from './scenarios';
export { OVERFLOW_BODIES, OTHER_ERROR_BODIES, type ProviderErrorBody, type ProviderName } from './error-bodies';
export { estimateCompletionTokens, estimatePromptTokens } from './responses';
export { bytesPerFour, chatPromptTokens, digitTokens, type TokenizeOptions } from './tokenize';

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
  const ctx: ResponseContext = { sleep, defaultModel };
  if (opts.contextWindow !== undefined) {
    if (!Number.isInteger(opts.contextWindow) || opts.contextWindow < 1) {
      throw new RangeError(`startOpenAIServer: contextWindow must be a whole number of tokens ≥ 1, got ${String(opts.contextWindow)}`);
    }
    ctx.contextWindow = opts.contextWindow;
  }

  if (opts.slots !== undefined && (!Number.isInteger(opts.slots) || opts.slots < 1)) {
    throw new RangeError(`startOpenAIServer: slots must be a whole number ≥ 1, got ${String(opts.slots)}`);
  }
  const slots = opts.slots === undefined ? undefined : new Slots(opts.slots);
  const tokenize: TokenizeOptions | undefined = opts.tokenize === true ? {} : opts.tokenize || undefined;

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
    if (tokenize && rec.method === 'POST' && rec.path === '/tokenize') return serveTokenize(tokenize, rec, res, sleep);
    // The Responses and Anthropic Messages shapes (shapes-server.ts): the same scenarios, answered in the request's shape.
    const shape = rec.method === 'POST' ? shapeRoute(rec.path) : undefined;
    if (shape === 'count_tokens') return serveCountTokens(rec, res);
    if (rec.method !== 'POST' || (rec.path !== CHAT_PATH && !shape)) {
      sendJson(res, 404, {
        error: {
          message: `Unknown route ${rec.method} ${rec.path}; this server speaks POST ${CHAT_PATH}.`,
          type: 'invalid_request_error',
          param: null,
          code: 'unknown_url',
        },
      });
      return;
    }
    if (typeof rec.json !== 'object' || rec.json === null || Array.isArray(rec.json)) {
      sendJson(res, 400, {
        error: { message: 'The request body is not a JSON object.', type: 'invalid_request_error', param: null, code: null },
      });
      return;
    }
    const body = shape ? chatBodyOf(shape, rec.json as Record<string, unknown>) : (rec.json as ChatRequestBody);
    const parsed: ParsedChatRequest = { index: rec.index, path: rec.path, headers: req.headers, raw: rec.raw, body };
    let scenario = queue.shift() ?? (handler ? await handler(parsed) : echoReply(body));
    // The server's own vocabulary counts the prompt too (TokenizeOptions.usage).
    if (tokenize?.usage && scenario.kind === 'reply' && scenario.usage?.prompt_tokens === undefined) {
      scenario = { ...scenario, usage: { ...scenario.usage, prompt_tokens: chatPromptTokens(body, tokenize.count ?? bytesPerFour) } };
    }
    rec.scenario = scenario.kind;
    if (shape) return respondShape(shape, ctx, scenario, body, rec, res);
    if (!slots) return respond(ctx, scenario, body, rec, res);
    const arrived = Date.now();
    const slot = await slots.acquire(promptText(body));
    try {
      rec.queuedMs = Date.now() - arrived;
      rec.evaluatedTokens = slot.evaluate(promptText(body));
      await sleep(rec.evaluatedTokens * (opts.evalMsPerToken ?? 0));
      await respond(ctx, scenario, body, rec, res);
    } finally {
      slots.release(slot);
    }
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

/** The prompt as the slots compare it: what `estimatePromptTokens` counts. */
function promptText(body: ChatRequestBody): string {
  return JSON.stringify([body.messages ?? [], body.tools ?? []]);
}

/** One llama.cpp slot: it keeps the last prompt it evaluated (its prompt cache). */
class Slot {
  last = '';
  busy = false;
  /** Tokens to evaluate for `prompt`: those after the prefix it shares with the last one. */
  evaluate(prompt: string): number {
    const i = this.shared(prompt);
    this.last = prompt;
    return Math.ceil(Buffer.byteLength(prompt.slice(i), 'utf8') / 4);
  }
  shared(prompt: string): number {
    let i = 0;
    const n = Math.min(prompt.length, this.last.length);
    while (i < n && prompt.charCodeAt(i) === this.last.charCodeAt(i)) i++;
    return i;
  }
}

/** `-np N`: requests wait in arrival order for a free slot, the one whose cache shares most of their prompt. */
class Slots {
  private readonly all: Slot[];
  private readonly waiting: Array<{ prompt: string; take: (s: Slot) => void }> = [];
  constructor(n: number) {
    this.all = Array.from({ length: n }, () => new Slot());
  }
  acquire(prompt: string): Promise<Slot> {
    const free = this.best(prompt);
    if (free && this.waiting.length === 0) {
      free.busy = true;
      return Promise.resolve(free);
    }
    return new Promise((take) => this.waiting.push({ prompt, take }));
  }
  release(slot: Slot): void {
    slot.busy = false;
    const next = this.waiting.shift();
    if (!next) return;
    const s = this.best(next.prompt)!;
    s.busy = true;
    next.take(s);
  }
  private best(prompt: string): Slot | undefined {
    let best: Slot | undefined;
    for (const s of this.all) if (!s.busy && (!best || s.shared(prompt) > best.shared(prompt))) best = s;
    return best;
  }
}
