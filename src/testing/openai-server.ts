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
import { echoReply, respond, sendJson, type ResponseContext } from './responses.js';
import type { ChatRequestBody, LocalOpenAIServer, ParsedChatRequest, RecordedRequest, Scenario, ScenarioHandler, StartOpenAIServerOptions } from './scenarios.js';

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
} from './scenarios.js';
export { OVERFLOW_BODIES, OTHER_ERROR_BODIES, type ProviderErrorBody, type ProviderName } from './error-bodies.js';
export { estimateCompletionTokens, estimatePromptTokens } from './responses.js';

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
    await respond(ctx, scenario, body, rec, res);
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

