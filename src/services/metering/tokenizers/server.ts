/**
 * The `server` tokenizer: the model's own counts, from the server that runs it (docs/local-models.md#the-server-tokenizer-the-model-servers-own-counts).
 *
 * llama.cpp serves `POST /tokenize {"content", "add_special": false}` → `{"tokens": [...]}` at the
 * server root, vLLM `POST /tokenize {"model", "prompt", "add_special_tokens": false}` →
 * `{"count", "tokens", "max_model_len"}`; the base URL a user gives the openai SDK ends in `/v1`,
 * so the endpoint is that URL without it (serverTokenizeUrl). Ollama and OpenAI have none.
 *
 * The meter prices synchronously, so counting is split in two: `prefetch` (async, one batch per
 * step, a few requests in parallel since both servers take one text per request, under one short
 * deadline: the step waits no longer, but a request still open then is left to answer, up to
 * LATE_ANSWER_MS, and its count kept for the next step) fills a bounded LRU cache keyed by a hash
 * of the text; `count` (sync) answers from
 * the cache and otherwise from the fallback tokenizer (the model's in-process one), counting
 * each such stand-in (`fallbacks`) so the meter knows which prices are provisional and reprices
 * them once the server's counts are in. A 404 (or 405/501) means the server has no /tokenize:
 * remembered, never asked again. A failed or slow request only leaves its texts to the fallback
 * until the next step asks again; the agent never waits past the deadline. A server that keeps
 * failing (hung, or refusing connections) is not asked at every step: after the second failed
 * prefetch in a row the next one is skipped, after the third the next two, doubling up to
 * MAX_COOLDOWN_PREFETCHES, so a hung endpoint costs the agent the deadline on a few steps of a
 * long session instead of on every one; the first prefetch the server answers ends it.
 *
 * The chat template's framing (role markers) is not text the server counts here: the fallback
 * tokenizer's overhead figures stand for it, and the provider's reports calibrate the rest.
 */
import { createHash } from 'node:crypto';
import { SERVER_TOKENIZER, type ChatOverhead, type Tokenizer } from './types';

/** How long one step's prefetch may take as a whole (ms): the agent waits at most this. */
export const DEFAULT_PREFETCH_DEADLINE_MS = 300;
/** Requests in flight at once (llama.cpp and vLLM tokenize one text per request). */
export const DEFAULT_PREFETCH_CONCURRENCY = 4;
/**
 * Texts one prefetch asks for at most (newest first): no more fit in its deadline, and a long
 * backlog (a reopened session, a server that was down) is worked off over the next steps.
 */
export const DEFAULT_PREFETCH_BATCH = 256;
/** The most prefetches a server that keeps failing is skipped for between two tries (see the file comment). */
export const MAX_COOLDOWN_PREFETCHES = 32;
/**
 * How long a request the deadline left unanswered may still answer (ms). The step does not wait
 * for it, but its count is kept for the next step (a third of the answers came late under load,
 * docs/local-models.md); past this it is given up.
 */
export const LATE_ANSWER_MS = 30_000;
/** Counts kept (hash → count, about 100 bytes each). */
export const DEFAULT_CACHE_ENTRIES = 50_000;

/** What the endpoint is known to be: not asked yet, answering, or without /tokenize. */
export type ServerTokenizerState = 'unknown' | 'available' | 'absent';

export interface ServerTokenizerOptions {
  /** The tokenize endpoint itself, e.g. `http://127.0.0.1:8080/tokenize`. */
  url: string;
  /** The route's model (vLLM's `model` field; llama.cpp ignores it). */
  model: string;
  /** Counts what the server has not counted (yet): the model's in-process tokenizer. */
  fallback: Tokenizer;
  /** Sent with every request (an `Authorization` the server requires). */
  headers?: Record<string, string>;
  deadlineMs?: number;
  concurrency?: number;
  batchTexts?: number;
  cacheEntries?: number;
  fetch?: typeof fetch;
}

/** What one prefetch did. */
export interface PrefetchReport {
  /** Distinct texts the cache lacked. */
  asked: number;
  /** Of those, counted by the server now. */
  counted: number;
  /** HTTP requests sent. */
  requests: number;
  state: ServerTokenizerState;
  /** A request could not reach the server (refused, reset): the rest of the batch was not sent. */
  unreachable: boolean;
  /** The server failed the prefetches before: this one asked nothing, and the fallback counts (see the file comment). */
  skipped: boolean;
}

type Dialect = 'llama.cpp' | 'vllm';

export class ServerTokenizer implements Tokenizer {
  readonly name = SERVER_TOKENIZER;
  readonly exact = true;
  readonly id: string;
  readonly overhead: ChatOverhead;
  /** HTTP requests sent so far. */
  requests = 0;
  private readonly cache = new Map<string, number>();
  private stand = 0;
  private known: ServerTokenizerState = 'unknown';
  private dialect: Dialect | undefined;
  /** Prefetches in a row that asked and got no count; and how many to skip before asking again. */
  private failures = 0;
  private cooldown = 0;
  private readonly deadlineMs: number;
  private readonly concurrency: number;
  private readonly batchTexts: number;
  private readonly cacheEntries: number;
  private readonly fetch: typeof fetch;

  constructor(private readonly options: ServerTokenizerOptions) {
    this.id = `${SERVER_TOKENIZER}:${options.url}#${options.model}`;
    this.overhead = options.fallback.overhead;
    this.deadlineMs = options.deadlineMs ?? DEFAULT_PREFETCH_DEADLINE_MS;
    this.concurrency = Math.max(1, options.concurrency ?? DEFAULT_PREFETCH_CONCURRENCY);
    this.batchTexts = Math.max(1, options.batchTexts ?? DEFAULT_PREFETCH_BATCH);
    this.cacheEntries = Math.max(1, options.cacheEntries ?? DEFAULT_CACHE_ENTRIES);
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  get state(): ServerTokenizerState {
    return this.known;
  }

  get fallback(): Tokenizer {
    return this.options.fallback;
  }

  readonly count = (text: string): number => {
    if (text.length === 0) return 0;
    const key = keyOf(text);
    const cached = this.cache.get(key);
    if (cached !== undefined) {
      // Least recently used first: a hit moves to the end.
      this.cache.delete(key);
      this.cache.set(key, cached);
      return cached;
    }
    this.stand++;
    return this.options.fallback.count(text);
  };

  readonly fallbacks = (): number => this.stand;

  /** The server's count of `text` is cached. */
  has(text: string): boolean {
    return text.length === 0 || this.cache.has(keyOf(text));
  }

  /**
   * Asks the server for the texts the cache lacks (the first `batchTexts` of them; `texts` is
   * read lazily, and not at all once the server is known to have no /tokenize), at most
   * `concurrency` requests at a time, and resolves by the deadline whatever is still open
   * (those texts stay with the fallback). A request that cannot reach the server ends the batch.
   */
  async prefetch(texts: Iterable<string>, signal?: AbortSignal): Promise<PrefetchReport> {
    const sent = this.requests;
    const wanted = new Map<string, string>();
    let unreachable = false;
    let skipped = false;
    const report = (counted: number): PrefetchReport => ({
      asked: wanted.size,
      counted,
      requests: this.requests - sent,
      state: this.known,
      unreachable,
      skipped,
    });
    if (this.known === 'absent' || signal?.aborted) return report(0);
    for (const text of texts) {
      if (text.length === 0) continue;
      const key = keyOf(text);
      if (!this.cache.has(key) && !wanted.has(key)) wanted.set(key, text);
      if (wanted.size >= this.batchTexts) break;
    }
    if (wanted.size === 0) return report(0);
    if (this.cooldown > 0) {
      this.cooldown--;
      skipped = true;
      return report(0);
    }
    // The deadline ends the wait and the batch (no request starts after it); `flight` ends the
    // requests themselves: the caller's abort, an unreachable server, or LATE_ANSWER_MS.
    const deadline = new AbortController();
    const flight = new AbortController();
    const gone = () => {
      unreachable = true;
      deadline.abort(new Error('tokenize endpoint unreachable'));
      flight.abort(new Error('tokenize endpoint unreachable'));
    };
    const timer = setTimeout(() => deadline.abort(new Error('tokenize deadline')), this.deadlineMs);
    const stop = () => {
      deadline.abort(signal?.reason);
      flight.abort(signal?.reason);
    };
    signal?.addEventListener('abort', stop, { once: true });
    const queue = [...wanted];
    /** This batch's requests: those still open at the deadline may answer late. */
    const mine: Array<Promise<void>> = [];
    const worker = async (): Promise<void> => {
      for (let next = queue.shift(); next && !deadline.signal.aborted && this.known !== 'absent'; next = queue.shift()) {
        const [key, text] = next;
        // Asked anew even when an earlier batch's request for it is still open (a server that hung then may answer now).
        const pending = this.ask(key, text, flight.signal, gone);
        mine.push(pending);
        await pending;
      }
    };
    // An endpoint not heard from yet is probed with one request first: a server without /tokenize
    // (or of the other dialect) answers one request, not one per worker.
    const probe = async (): Promise<void> => {
      if (this.known === 'unknown' && this.dialect === undefined) {
        const first = queue.shift()!;
        const pending = this.ask(first[0], first[1], flight.signal, gone);
        mine.push(pending);
        await pending;
      }
      await Promise.all(Array.from({ length: Math.min(this.concurrency, queue.length) }, worker));
    };
    const workers = probe();
    const expired = new Promise<void>((resolve) => deadline.signal.addEventListener('abort', () => resolve(), { once: true }));
    try {
      await Promise.race([workers, expired]);
    } finally {
      clearTimeout(timer);
      deadline.abort();
      // Requests still open answer into the cache for the next step, or are given up.
      const giveUp = setTimeout(() => flight.abort(new Error('tokenize answer too late')), LATE_ANSWER_MS);
      giveUp.unref?.();
      void Promise.allSettled(mine).then(() => {
        clearTimeout(giveUp);
        signal?.removeEventListener('abort', stop);
      });
    }
    let counted = 0;
    for (const key of wanted.keys()) if (this.cache.has(key)) counted++;
    // A batch the caller cut short says nothing about the server.
    if (counted > 0 || (this.known as ServerTokenizerState) === 'absent') this.failures = 0;
    else if (!signal?.aborted && ++this.failures >= 2) this.cooldown = Math.min(MAX_COOLDOWN_PREFETCHES, 2 ** (this.failures - 2));
    return report(counted);
  }

  private ask(key: string, text: string, signal: AbortSignal, gone: () => void): Promise<void> {
    return this.tokenize(text, signal, gone).then((n) => {
      if (n === undefined) return;
      this.remember(key, n);
      // A server that answers (if late) is not failing: no prefetch is skipped for it.
      this.failures = 0;
      this.cooldown = 0;
    });
  }

  /** The server's count of `text`, or undefined (no answer, an error, or no /tokenize). */
  private async tokenize(text: string, signal: AbortSignal, gone: () => void): Promise<number | undefined> {
    for (const dialect of this.dialect ? [this.dialect] : (['llama.cpp', 'vllm'] as const)) {
      const answer = await this.send(dialect, text, signal, gone);
      if (answer === 'wrong-dialect') continue;
      if (answer !== undefined) this.dialect = dialect;
      return answer;
    }
    return undefined;
  }

  private async send(dialect: Dialect, text: string, signal: AbortSignal, gone: () => void): Promise<number | 'wrong-dialect' | undefined> {
    const body = dialect === 'llama.cpp' ? { content: text, add_special: false } : { model: this.options.model, prompt: text, add_special_tokens: false };
    let res: Response;
    try {
      this.requests++;
      res = await this.fetch(this.options.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...this.options.headers },
        body: JSON.stringify(body),
        signal,
      });
    } catch {
      // Past the deadline, or refused / reset: the fallback counts it this time, and a server that
      // cannot be reached is not asked for the rest of the batch.
      if (!signal.aborted) gone();
      return undefined;
    }
    if (res.status === 404 || res.status === 405 || res.status === 501) {
      this.known = 'absent';
      await res.body?.cancel().catch(() => undefined);
      return undefined;
    }
    let json: unknown;
    try {
      json = await res.json();
    } catch {
      return undefined;
    }
    // llama.cpp answers a body without `content` with 400; vLLM one without `prompt` with 400 or 422.
    if ((res.status === 400 || res.status === 422) && this.dialect === undefined) return 'wrong-dialect';
    if (!res.ok) return undefined;
    const n = countOf(json);
    if (n !== undefined) this.known = 'available';
    return n;
  }

  private remember(key: string, n: number): void {
    this.cache.set(key, n);
    if (this.cache.size > this.cacheEntries) this.cache.delete(this.cache.keys().next().value!);
  }
}

/** The count in a tokenize answer: vLLM's `count`, else the length of `tokens`. */
function countOf(json: unknown): number | undefined {
  if (typeof json !== 'object' || json === null) return undefined;
  const { count, tokens } = json as { count?: unknown; tokens?: unknown };
  if (typeof count === 'number' && Number.isSafeInteger(count) && count >= 0) return count;
  if (Array.isArray(tokens)) return tokens.length;
  return undefined;
}

/** Cache key: a digest and the length, so the cache holds no text. */
function keyOf(text: string): string {
  return createHash('sha1').update(text).digest('base64') + text.length.toString(36);
}

/**
 * The tokenize endpoint of a server whose OpenAI-compatible base URL is `baseURL`: llama.cpp and
 * vLLM serve it at the root, so a trailing `/v1` is dropped. Undefined for a URL that does not parse.
 */
export function serverTokenizeUrl(baseURL: string): string | undefined {
  let url: URL;
  try {
    url = new URL(baseURL);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  const path = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  url.pathname = `${path}/tokenize`;
  url.search = '';
  url.hash = '';
  return url.toString();
}
