/**
 * The economics bench's yardsticks, the same for every policy: one tokenizer pricing every
 * message the way the engine's meter does, the prompt-cache model and the price table.
 *
 * Cache model: a request's cached prefix is its longest common prefix, in whole messages,
 * with the previous agent request (tools first: a different tool list shares nothing). Agent
 * requests write their uncached suffix to the cache (a breakpoint at the end, as coding agents
 * set it); summary requests are never reused, so their uncached part is plain input.
 */
import type { ChatMessage } from '../session/derive';
import { getTokenizer, messageOverhead, type Tokenizer } from '../services/metering';
import { parseLedger } from '../services/summarizing';

/**
 * US dollars per million tokens: Claude Sonnet 4.x list prices (base input, 5-minute cache
 * write, cache hit, output), https://platform.claude.com/docs/en/about-claude/pricing, checked
 * 2026-11-30. The transcript's own recorded costs (claude-sonnet-4-5) bill at the same rates.
 */
export const PRICES: Readonly<{ input: number; cacheRead: number; cacheWrite: number; output: number }> = {
  input: 3,
  cacheRead: 0.3,
  cacheWrite: 3.75,
  output: 15,
};

export const PRICE_TABLE =
  `prices per 1M tokens (Claude Sonnet 4.x list prices): input $${PRICES.input.toFixed(2)}, cache read $${PRICES.cacheRead.toFixed(2)}, ` +
  `cache write $${PRICES.cacheWrite.toFixed(2)}, output $${PRICES.output.toFixed(2)}`;

export const CACHE_MODEL =
  "cache model: a request's cached prefix = its longest common prefix (whole messages, tools first) with the previous agent request; " +
  'agent requests pay cache read on it and cache write on the rest; a summary request pays cache read on its prefix shared with the ' +
  'agent request before it, input on the rest, output on the prose of the summary (its ledger blocks are copied in by code, not written by the model). Agent replies are identical for every policy and not billed.';

/** What a request sends, as the cache sees it. */
export interface PricedRequest {
  /** Tool list as sent (JSON): part of the cached prefix, before the messages. */
  tools: string;
  messages: readonly ChatMessage[];
  /**
   * False for a request that does not carry the agent's own system prompt and tools (a peer's
   * summary request with a prompt of its own): the calibration's unrecorded part is not in it.
   */
  unrecorded?: boolean;
}

/** The figures of a calibrated count (calibration.ts fits them to a recorded session's usage). */
export interface CountCalibration {
  /** Provider tokens per token of ours. */
  ratio: number;
  /** Provider tokens per message of each role beyond ratio × its price (a system message counts as a user one). */
  perMessage: Record<'user' | 'assistant' | 'tool', number>;
  /** Provider tokens per token of reasoning a reply carried. */
  reasoning: number;
  /** Tokens every request carries unrecorded. */
  unrecorded: number;
}

/** A calibrated count: the provider's tokens for what we price. */
export interface PricerCalibration {
  calibration: CountCalibration;
  /** Reasoning each reply carried, by the reply's chat message (JSON). */
  reasoning: ReadonlyMap<string, number>;
  /** The uncalibrated pricer whose prices (cached) this one calibrates: each message is tokenized once for both. */
  raw?: Pricer;
}

export class Pricer {
  readonly tokenizer: Tokenizer;
  private readonly byJson = new Map<string, number>();
  // Requests share their message objects from one to the next: each is serialized and priced
  // once by identity (JSON.stringify of every message of every request was most of an eval run).
  private readonly jsonByMessage = new WeakMap<ChatMessage, string>();
  private readonly priceOf = new WeakMap<ChatMessage, number>();

  constructor(
    readonly tokenizerName: Parameters<typeof getTokenizer>[0] = 'o200k_base',
    private readonly calibrated?: PricerCalibration,
  ) {
    this.tokenizer = getTokenizer(tokenizerName);
  }

  /** The tokens every request carries unrecorded (0 uncalibrated). */
  get unrecorded(): number {
    return this.calibrated?.calibration.unrecorded ?? 0;
  }

  /** The calibration the count follows, if any. */
  get calibration(): PricerCalibration['calibration'] | undefined {
    return this.calibrated?.calibration;
  }

  count(text: string): number {
    return this.tokenizer.count(text);
  }

  /** A message's tokens, as src/services/metering/meter.ts prices a surface node (cached by content). */
  message(m: ChatMessage): number {
    const known = this.priceOf.get(m);
    if (known !== undefined) return known;
    const key = this.json(m);
    let p = this.byJson.get(key);
    if (p === undefined) {
      p = this.calibrate(m, key, this.calibrated?.raw ? this.calibrated.raw.message(m) : this.price(m));
      this.byJson.set(key, p);
    }
    this.priceOf.set(m, p);
    return p;
  }

  /** A message as JSON, serialized once per message object. */
  jsonOf(m: ChatMessage): string {
    return this.json(m);
  }

  private json(m: ChatMessage): string {
    let s = this.jsonByMessage.get(m);
    if (s === undefined) {
      s = JSON.stringify(m);
      this.jsonByMessage.set(m, s);
    }
    return s;
  }

  /** What a request costs beyond its messages: the tool list, and with a calibration the unrecorded part (unless `unrecorded` is false). */
  envelope(tools: string, unrecorded = true): number {
    const t = this.tokenizer;
    const own = t.overhead.perRequest + (tools === '' || tools === '[]' ? 0 : t.count(tools) + (t.overhead.perBlock ?? 0));
    const c = this.calibrated?.calibration;
    return c ? Math.round(c.ratio * own) + (unrecorded ? c.unrecorded : 0) : own;
  }

  tokens(r: PricedRequest): number {
    let sum = this.envelope(r.tools, r.unrecorded !== false);
    for (const m of r.messages) sum += this.message(m);
    return sum;
  }

  /** Tokens of `r` a prompt cache holding `previous` serves. */
  cachedPrefix(r: PricedRequest, previous: PricedRequest | undefined): number {
    if (previous === undefined || previous.tools !== r.tools) return 0;
    let sum = this.envelope(r.tools, r.unrecorded !== false && previous.unrecorded !== false);
    const n = Math.min(r.messages.length, previous.messages.length);
    for (let i = 0; i < n; i++) {
      const a = r.messages[i]!;
      const b = previous.messages[i]!;
      if (a !== b && this.json(a) !== this.json(b)) break;
      sum += this.message(a);
    }
    return sum;
  }

  /** Our price of a message as the calibrated provider counts it: ratio × price, its role's framing, the reasoning it carries. */
  private calibrate(m: ChatMessage, json: string, own: number): number {
    const c = this.calibrated;
    if (!c) return own;
    const k = c.calibration;
    const role = m.role === 'assistant' ? 'assistant' : m.role === 'tool' ? 'tool' : 'user';
    const reasoning = m.role === 'assistant' ? (c.reasoning.get(json) ?? 0) : 0;
    return Math.max(0, Math.round(k.ratio * own + k.perMessage[role] + k.reasoning * reasoning));
  }

  private price(m: ChatMessage): number {
    const t = this.tokenizer;
    let tokens = 0;
    let toolCalls = 0;
    let blocks = 0;
    const content = m.content;
    if (typeof content === 'string') {
      tokens += t.count(content);
      blocks = content === '' ? 0 : 1;
    } else if (Array.isArray(content)) {
      for (const part of content as Array<{ type: string; text?: string; image_url?: { detail?: string } }>) {
        blocks++;
        if (part.type === 'text') tokens += t.count(part.text ?? '');
        else if (part.type === 'image_url') tokens += part.image_url?.detail === 'low' ? 85 : 765;
      }
    }
    if (m.role === 'assistant' && m.tool_calls) {
      for (const call of m.tool_calls) {
        if (call.type !== 'function') continue;
        toolCalls++;
        tokens += t.count(call.function.name) + t.count(call.function.arguments);
      }
    }
    return tokens + messageOverhead(t.overhead, { role: m.role as 'system' | 'user' | 'assistant' | 'tool', toolCalls, blocks });
  }
}

/** Running totals of one policy's bill. */
export class Ledger {
  requests = 0;
  promptTokens = 0;
  cacheMissTokens = 0;
  peak = 0;
  overWindow = 0;
  summaryRequests = 0;
  summaryInputTokens = 0;
  summaryTokens = 0;
  cost = 0;
  /** The bill by kind: cache reads and writes of agent requests, summary requests' input, summary output. */
  costs = { read: 0, write: 0, summaryInput: 0, output: 0 };
  /** Of the last agent request, the tokens the cache served. */
  lastCached = 0;
  lastTokens = 0;
  private previous: PricedRequest | undefined;

  constructor(
    private readonly pricer: Pricer,
    private readonly window: number,
    private readonly prices: Readonly<typeof PRICES> = PRICES,
  ) {}

  /** An agent request: billed, and the cache now holds it. */
  agent(r: PricedRequest): number {
    const tokens = this.pricer.tokens(r);
    const cached = Math.min(tokens, this.pricer.cachedPrefix(r, this.previous));
    this.lastCached = cached;
    this.lastTokens = tokens;
    this.requests++;
    this.promptTokens += tokens;
    this.cacheMissTokens += tokens - cached;
    this.peak = Math.max(this.peak, tokens);
    if (tokens > this.window) this.overWindow++;
    this.bill('read', cached * this.prices.cacheRead);
    this.bill('write', (tokens - cached) * this.prices.cacheWrite);
    this.previous = r;
    return tokens;
  }

  /** A summary request and its output (see summaryOutputTokens); `cacheable` false when the request cannot share the agent's cache key. */
  summary(r: PricedRequest, outputTokens: number, cacheable = true): void {
    const tokens = this.pricer.tokens(r);
    const cached = cacheable ? Math.min(tokens, this.pricer.cachedPrefix(r, this.previous)) : 0;
    this.summaryRequests++;
    this.summaryInputTokens += tokens;
    this.cacheMissTokens += tokens - cached;
    this.summaryTokens += outputTokens;
    this.bill('summaryInput', cached * this.prices.cacheRead + (tokens - cached) * this.prices.input);
    this.bill('output', outputTokens * this.prices.output);
  }

  private bill(kind: keyof Ledger['costs'], microDollars: number): void {
    this.costs[kind] += microDollars / 1e6;
    this.cost += microDollars / 1e6;
  }
}

/**
 * What of a summary a model writes, so what is billed as output: its prose. The ledger blocks
 * (`<user-messages>`, the file lists, the errors) are copied in by code after the model's reply
 * (withCheckpointLedger; pi appends its file lists the same way), so they cost input on every
 * later request but no output. The extractive summarizer stands in for the model and writes
 * both, so the bench bills only the prose, for every policy.
 */
export function summaryOutputTokens(text: string, pricer: Pricer): number {
  return pricer.count(parseLedger(text).body);
}
