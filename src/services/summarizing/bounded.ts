/**
 * Bounding as a wrapper any {@link Summarizer} can wear: the summary request must never
 * overflow the summarizing model's window (peers pain point 3 — "the compaction request
 * overflows, so compaction can never succeed"), whoever builds the model request.
 *
 * The wrapper prices the request the way a chat-completions summarizer sends it (system +
 * kept checkpoints + span + the compaction instruction, with the tools; see `bounded.ts`) and
 * hands its inner summarizer only requests that fit:
 * 1. as is, when it fits;
 * 2. else with oversized blocks cut in the middle (head and tail kept), when that is enough;
 * 3. else in chunks cut at message boundaries where no tool call waits for its result, one
 *    inner call per chunk, each carrying the previous chunk's summary as a checkpoint to
 *    merge (a rolling merge); the last chunk's summary is the result.
 * How it went is part of the result (`SummaryResult.bounding`), not state on the wrapper.
 */
import type { ChatCompletionContentPart } from 'openai/resources/chat/completions';
import type { ChatMessage } from '../../session/derive';
import { XcompactError } from '../../errors';
import { frameCheckpoint } from './checkpoint';
import { COMPACTION_CHECKPOINT_SOURCE, type SurfaceEvent, type Usage } from '../../session/events';
import { SummarizerError, type BoundingReport, type Summarizer, type SummaryRequest, type SummaryResult } from './contract';
import { throwIfCancelled } from './reply';
import { buildInstruction } from './instruction';

// ── Measuring and cutting the span ──
/*
 * Bounded summarizer input: the compaction request itself must never overflow the
 * summarizer's window (peers pain point 3 — "the compaction request overflows, so compaction
 * can never succeed"). Pure pricing and cutting, no I/O:
 *
 * 1. price a request the way the summarizer will send it (texts counted with the target's
 *    tokenizer, plus a per-message, per-tool-call and per-request template cost);
 * 2. when it is over the budget, cut oversized text blocks in the middle, keeping head and
 *    tail around one marker line — tool results first, then the biggest of the rest;
 * 3. when even that is not enough, the span is cut into chunks (`chunks.ts`) and summarized
 *    one after the other with the previous partial summary carried along (a rolling merge;
 *    the loop is `BoundedSummarizer` below).
 */

export type CountTokens = (text: string) => number;

/**
 * Template costs charged on top of the counted texts. The contract only hands us a text
 * counter, not the target's chat template, so these are the highest figures among the
 * templates xcompact knows (`src/services/metering/tokenizers/overhead.ts`): OpenAI's 4 per message
 * and 3 per request, DeepSeek-V3's 9 per tool call. Erring high only makes chunks smaller.
 */
export const TEMPLATE_COST = Object.freeze({
  perMessage: 4,
  perRequest: 3,
  perToolCall: 9,
  /**
   * An image part. Providers price images by size (OpenAI: 85 + 170 per 512px tile, ≤ ~1,105
   * for the sizes it accepts; Anthropic: ≤ ~1,600); the URL (often a base64 `data:` URL) is
   * never tokenized as text, so it is not counted.
   */
  perImage: 1600,
  /** An audio or file part: no text to count and no size to read here; a flat guess. */
  perOtherPart: 1600,
});

/** Nothing is cut below this many tokens: the marker line itself needs about 20. */
export const MIN_BLOCK_TOKENS = 48;

// ---------------------------------------------------------------------------------------
// Budget
// ---------------------------------------------------------------------------------------

/**
 * Tokens kept free between our count and the window: 512 for what we cannot see (the
 * provider's tool-use preamble that templates render around the tools, e.g. Qwen's and
 * DeepSeek's ~100–300 tokens, and a tools rendering other than `JSON.stringify`) plus 2% of
 * the window for a counter that is not the provider's exact tokenizer (o200k vs DeepSeek's
 * own differs by a few percent on code and prose).
 */
export function defaultSafetyMargin(contextWindow: number): number {
  return 512 + Math.ceil(contextWindow * 0.02);
}

/** Prompt tokens a summary request may use: window − output cap − safety margin. */
export function inputBudget(contextWindow: number, maxTokens: number, safetyMargin: number): number {
  return contextWindow - maxTokens - safetyMargin;
}

// ---------------------------------------------------------------------------------------
// Pricing
// ---------------------------------------------------------------------------------------

export function priceTools(tools: ReadonlyArray<Record<string, unknown>>, count: CountTokens): number {
  return tools.length === 0 ? 0 : count(JSON.stringify(tools));
}

/** Template cost plus every counted text of one message. */
export function priceMessage(message: ChatMessage, count: CountTokens): number {
  let tokens = TEMPLATE_COST.perMessage;
  for (const b of blocksOfMessage(message)) tokens += count(b.text);
  tokens += fixedPartsOf(message, count);
  return tokens;
}

export function priceMessages(messages: readonly ChatMessage[], count: CountTokens): number {
  let total = 0;
  for (const m of messages) total += priceMessage(m, count);
  return total;
}

/** What a chat-completions request with these messages and tools costs as prompt. */
export function priceRequest(messages: readonly ChatMessage[], tools: ReadonlyArray<Record<string, unknown>>, count: CountTokens): number {
  return TEMPLATE_COST.perRequest + priceTools(tools, count) + priceMessages(messages, count);
}

/** Counted parts of a message that truncation never changes: ids, names, images. */
function fixedPartsOf(message: ChatMessage, count: CountTokens): number {
  let tokens = 0;
  if ('name' in message && typeof message.name === 'string') tokens += count(message.name);
  if (message.role === 'tool') tokens += count(message.tool_call_id);
  if (Array.isArray(message.content)) {
    for (const part of message.content as ReadonlyArray<{ type: string }>) {
      if (part.type === 'image_url') tokens += TEMPLATE_COST.perImage;
      else if (part.type !== 'text' && part.type !== 'refusal') tokens += TEMPLATE_COST.perOtherPart;
    }
  }
  if (message.role === 'assistant') {
    for (const call of message.tool_calls ?? []) {
      tokens += TEMPLATE_COST.perToolCall + count(call.id);
      tokens += count(call.type === 'function' ? call.function.name : call.custom.name);
    }
    if (typeof message.refusal === 'string') tokens += count(message.refusal);
  }
  return tokens;
}

// ---------------------------------------------------------------------------------------
// Blocks: the texts truncation may cut
// ---------------------------------------------------------------------------------------

export type BlockKind = 'tool-result' | 'text' | 'tool-arguments';

export interface Block {
  kind: BlockKind;
  text: string;
  /** Which content part (array content), or -1 for string content. */
  part: number;
  /** Which tool call, for `tool-arguments`; else -1. */
  call: number;
}

export function blocksOfMessage(message: ChatMessage): Block[] {
  const out: Block[] = [];
  const kind: BlockKind = message.role === 'tool' ? 'tool-result' : 'text';
  const content = message.content;
  if (typeof content === 'string') out.push({ kind, text: content, part: -1, call: -1 });
  else if (Array.isArray(content)) {
    (content as ReadonlyArray<{ type: string; text?: string; refusal?: string }>).forEach((p, i) => {
      if (p.type === 'text' && typeof p.text === 'string') out.push({ kind, text: p.text, part: i, call: -1 });
      else if (p.type === 'refusal' && typeof p.refusal === 'string') out.push({ kind, text: p.refusal, part: i, call: -1 });
    });
  }
  if (message.role === 'assistant') {
    (message.tool_calls ?? []).forEach((c, i) => {
      out.push({ kind: 'tool-arguments', text: c.type === 'function' ? c.function.arguments : c.custom.input, part: -1, call: i });
    });
  }
  return out;
}

/** A copy of `message` with its blocks' texts replaced (same order as `blocksOfMessage`). */
function withBlockTexts(message: ChatMessage, blocks: readonly Block[], texts: readonly string[]): ChatMessage {
  const copy = { ...message } as ChatMessage & Record<string, unknown>;
  blocks.forEach((b, i) => {
    const text = texts[i]!;
    if (text === b.text) return;
    if (b.call >= 0 && copy.role === 'assistant') {
      const calls = [...(copy.tool_calls ?? [])];
      const c = calls[b.call]!;
      calls[b.call] = c.type === 'function' ? { ...c, function: { ...c.function, arguments: text } } : { ...c, custom: { ...c.custom, input: text } };
      copy.tool_calls = calls;
    } else if (b.part >= 0 && Array.isArray(copy.content)) {
      const parts = [...(copy.content as ChatCompletionContentPart[])] as unknown as Array<Record<string, unknown>>;
      const p = parts[b.part]!;
      parts[b.part] = p['type'] === 'refusal' ? { ...p, refusal: text } : { ...p, text };
      (copy as Record<string, unknown>)['content'] = parts;
    } else {
      (copy as Record<string, unknown>)['content'] = text;
    }
  });
  return copy;
}

// ---------------------------------------------------------------------------------------
// Cutting one text
// ---------------------------------------------------------------------------------------

/** The line that replaces the middle of a cut block. */
export function truncationMarker(omittedChars: number): string {
  return `[… ${omittedChars} characters omitted to fit the summarizer's input …]`;
}

/** Share of the kept characters taken from the head (the rest comes from the tail). */
const HEAD_SHARE = 2 / 3;

function renderCut(points: readonly string[], keep: number): string {
  const head = Math.ceil(keep * HEAD_SHARE);
  const tail = keep - head;
  const omitted = points.length - keep;
  return `${points.slice(0, head).join('')}\n${truncationMarker(omitted)}\n${tail > 0 ? points.slice(points.length - tail).join('') : ''}`;
}

/**
 * `text` cut to at most `maxTokens` tokens: the first two thirds of the kept characters, one
 * marker line saying how many characters were left out, the last third. Cuts by code point
 * (never inside a surrogate pair). Returns `text` itself when it already fits. The result
 * always counts ≤ maxTokens when maxTokens ≥ {@link MIN_BLOCK_TOKENS}.
 */
export function truncateMiddle(text: string, maxTokens: number, count: CountTokens): string {
  if (count(text) <= maxTokens) return text;
  const points = Array.from(text);
  // Largest kept length whose rendering fits (binary search; a token is rarely > 16 chars,
  // which bounds the search without counting a huge text over and over).
  let lo = 0;
  let hi = Math.min(points.length - 1, Math.max(0, maxTokens) * 16);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (count(renderCut(points, mid)) <= maxTokens) lo = mid;
    else hi = mid - 1;
  }
  return renderCut(points, lo);
}

/**
 * Tool-call arguments cut to at most `maxTokens`, keeping them valid JSON when they are: the
 * longest string values are cut in the middle (all to the same length), structure and keys
 * stay. Arguments that are not JSON, or whose structure alone is too big, are cut as text.
 */
export function truncateToolArguments(args: string, maxTokens: number, count: CountTokens): string {
  if (count(args) <= maxTokens) return args;
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch {
    return truncateMiddle(args, maxTokens, count);
  }
  let longest = 0;
  visitStrings(parsed, (s) => {
    longest = Math.max(longest, Array.from(s).length);
  });
  const render = (cap: number) => JSON.stringify(mapStrings(parsed, (s) => capString(s, cap)));
  if (longest === 0 || count(render(0)) > maxTokens) return truncateMiddle(args, maxTokens, count);
  let lo = 0;
  let hi = longest;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (count(render(mid)) <= maxTokens) lo = mid;
    else hi = mid - 1;
  }
  return render(lo);
}

/** `s` cut to `cap` kept characters, or `s` itself when cutting would not make it shorter. */
function capString(s: string, cap: number): string {
  const points = Array.from(s);
  if (points.length <= cap) return s;
  const cut = renderCut(points, cap);
  return cut.length < s.length ? cut : s;
}

function visitStrings(v: unknown, f: (s: string) => void): void {
  if (typeof v === 'string') f(v);
  else if (Array.isArray(v)) for (const x of v) visitStrings(x, f);
  else if (v !== null && typeof v === 'object') for (const x of Object.values(v)) visitStrings(x, f);
}

function mapStrings(v: unknown, f: (s: string) => string): unknown {
  if (typeof v === 'string') return f(v);
  if (Array.isArray(v)) return v.map((x) => mapStrings(x, f));
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = mapStrings(x, f);
    return out;
  }
  return v;
}

// ---------------------------------------------------------------------------------------
// Cutting a span's blocks to fit
// ---------------------------------------------------------------------------------------

/**
 * The highest cap L ≥ floor such that cutting every size above L down to L frees at least
 * `excess`: Σ max(0, size − L) ≥ excess. Undefined when even L = floor frees too little.
 * Capping at one level ("water-filling") cuts the biggest blocks first and never cuts a block
 * below a smaller one.
 */
export function waterLevel(sizes: readonly number[], excess: number, floor: number): number | undefined {
  if (excess <= 0) return Math.max(floor, ...sizes, 0);
  const freed = (level: number) => sizes.reduce((sum, s) => sum + Math.max(0, s - level), 0);
  if (freed(floor) < excess) return undefined;
  let lo = floor;
  let hi = Math.max(floor, ...sizes);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (freed(mid) >= excess) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

export interface BlockCut {
  /** Index of the message in the span. */
  message: number;
  kind: BlockKind;
  tokensBefore: number;
  tokensAfter: number;
}

export interface FitResult {
  /** The span, with cut blocks; messages that were not cut are the same objects. */
  messages: ChatMessage[];
  /** Price of `messages` (Σ priceMessage). */
  tokens: number;
  fits: boolean;
  cuts: BlockCut[];
}

export interface FitFloors {
  /** Tool results are not cut below this. */
  toolResult: number;
  /** Other texts (user, assistant, tool-call arguments) are not cut below this. */
  other: number;
}

/**
 * Cuts the span's blocks so the span costs at most `available` tokens: first tool results
 * (capped at one level, never below `floors.toolResult`), and only if that is not enough,
 * every other block (never below `floors.other`). When even both floors are not enough, the
 * blocks are left cut at the floors and `fits` is false: the caller chunks what remains.
 */
export function truncateToFit(messages: readonly ChatMessage[], available: number, floors: FitFloors, count: CountTokens): FitResult {
  const entries = messages.map((m) => {
    const blocks = blocksOfMessage(m);
    return { message: m, blocks, sizes: blocks.map((b) => count(b.text)) };
  });
  const total = (): number => entries.reduce((sum, e) => sum + priceMessage(e.message, count), 0);
  const before = total();
  if (before <= available) return { messages: [...messages], tokens: before, fits: true, cuts: [] };

  const caps = entries.map((e) => e.sizes.map(() => Infinity));
  const sizesOf = (isTool: boolean) => {
    const out: number[] = [];
    entries.forEach((e) => e.blocks.forEach((b, j) => (b.kind === 'tool-result') === isTool && out.push(e.sizes[j]!)));
    return out;
  };
  const capAll = (isTool: boolean, level: number) => {
    entries.forEach((e, i) => e.blocks.forEach((b, j) => (b.kind === 'tool-result') === isTool && (caps[i]![j] = level)));
  };
  const freedAt = (isTool: boolean, level: number) => sizesOf(isTool).reduce((s, x) => s + Math.max(0, x - level), 0);

  const excess = before - available;
  const toolFloor = Math.max(MIN_BLOCK_TOKENS, floors.toolResult);
  const otherFloor = Math.max(MIN_BLOCK_TOKENS, floors.other);
  const toolLevel = waterLevel(sizesOf(true), excess, toolFloor);
  if (toolLevel !== undefined) capAll(true, toolLevel);
  else {
    capAll(true, toolFloor);
    const otherLevel = waterLevel(sizesOf(false), excess - freedAt(true, toolFloor), otherFloor);
    capAll(false, otherLevel ?? otherFloor);
  }

  const cuts: BlockCut[] = [];
  const out = entries.map((e, i) => {
    let changed = false;
    const texts = e.blocks.map((b, j) => {
      const cap = caps[i]![j]!;
      if (e.sizes[j]! <= cap) return b.text;
      const cut = b.kind === 'tool-arguments' ? truncateToolArguments(b.text, cap, count) : truncateMiddle(b.text, cap, count);
      if (cut === b.text) return b.text;
      changed = true;
      cuts.push({ message: i, kind: b.kind, tokensBefore: e.sizes[j]!, tokensAfter: count(cut) });
      return cut;
    });
    return changed ? withBlockTexts(e.message, e.blocks, texts) : e.message;
  });
  const tokens = out.reduce((sum, m) => sum + priceMessage(m, count), 0);
  return { messages: out, tokens, fits: tokens <= available, cuts };
}

// ── Units: the pieces a span is cut into ──
/*
 * Chunking a span that does not fit one summary request, even with its blocks cut: where it
 * may be cut (never between a tool call and its result), the units between those cuts, and
 * how many units fill a chunk. Pure planning; the loop that sends the chunks is in
 * `bounded.ts`.
 */

/**
 * Positions p (0 ≤ p ≤ messages.length) where the span may be cut before message p: every
 * tool call made in messages [0, p) has its result in [0, p). Matched by call id, so a
 * parallel batch and all its results stay together. 0 and the end are always included (a
 * span ending on an unanswered call can only end there).
 */
export function chunkCuts(messages: readonly ChatMessage[]): number[] {
  const pending = new Set<string>();
  const cuts = [0];
  messages.forEach((m, i) => {
    if (m.role === 'assistant') for (const c of m.tool_calls ?? []) pending.add(c.id);
    else if (m.role === 'tool') pending.delete(m.tool_call_id);
    if (pending.size === 0 || i === messages.length - 1) cuts.push(i + 1);
  });
  return [...new Set(cuts)];
}

/** The span grouped into units between consecutive cuts: the pieces a chunk is made of. */
export function unitsOf(messages: readonly ChatMessage[]): ChatMessage[][] {
  const cuts = chunkCuts(messages);
  const units: ChatMessage[][] = [];
  for (let k = 1; k < cuts.length; k++) units.push(messages.slice(cuts[k - 1], cuts[k]));
  return units;
}

/**
 * Units cut down to `capacity` tokens each where they are bigger (every block down to
 * {@link MIN_BLOCK_TOKENS} if need be), so no chunk has to hold a unit alone. A unit that
 * cannot get that small comes back as small as it got; `cuts` counts the blocks cut.
 */
export function fitUnits(units: readonly ChatMessage[][], capacity: number, count: CountTokens): { units: ChatMessage[][]; cuts: number } {
  let cuts = 0;
  const out = units.map((unit) => {
    if (priceMessages(unit, count) <= capacity) return unit;
    const fit = truncateToFit(unit, Math.max(0, capacity), { toolResult: MIN_BLOCK_TOKENS, other: MIN_BLOCK_TOKENS }, count);
    cuts += fit.cuts.length;
    return fit.messages;
  });
  return { units: out, cuts };
}

/**
 * How many units, from `from`, fit together in `capacity` tokens (greedy, in order). 0 when
 * even the first does not fit.
 */
export function takeUnits(unitPrices: readonly number[], from: number, capacity: number): number {
  let used = 0;
  let n = 0;
  for (let k = from; k < unitPrices.length; k++) {
    if (used + unitPrices[k]! > capacity) break;
    used += unitPrices[k]!;
    n++;
  }
  return n;
}

/**
 * A whole plan for fixed capacities: unit index ranges [start, end) per chunk, the first with
 * `firstCapacity`, the later ones with `laterCapacity` (which leaves room for the partial
 * summary each later request carries). A unit larger than the capacity of its chunk gets a
 * chunk of its own, marked `oversized` (the caller cuts it further or gives up).
 */
export function planChunks(
  unitPrices: readonly number[],
  firstCapacity: number,
  laterCapacity: number,
): Array<{ start: number; end: number; oversized: boolean }> {
  const plan: Array<{ start: number; end: number; oversized: boolean }> = [];
  let k = 0;
  while (k < unitPrices.length) {
    const capacity = plan.length === 0 ? firstCapacity : laterCapacity;
    const n = takeUnits(unitPrices, k, capacity);
    if (n === 0) {
      plan.push({ start: k, end: k + 1, oversized: true });
      k++;
    } else {
      plan.push({ start: k, end: k + n, oversized: false });
      k += n;
    }
  }
  return plan;
}

export interface BoundingOptions {
  /**
   * The summarizing model's context window in tokens. Default: the request's `contextWindow`
   * (the engine fills it from the model registry). With neither, requests pass through as is.
   */
  window?: number;
  /**
   * Counts a text's tokens with the summarizing model's tokenizer (a function, or a
   * `Tokenizer` from `getTokenizer`). Default: the request's `countTokens`. The inner
   * summarizer receives the same counter.
   */
  tokenizer?: CountTokens | { count(text: string): number };
  /** Tokens kept free below the window; default {@link defaultSafetyMargin}. */
  safetyMarginTokens?: number;
  /**
   * Before chunking, tool results are cut to at most this many tokens (default 1024), other
   * blocks to at most `textFloorTokens` (default 2048); both at most 1/8 of a chunk's room.
   */
  toolResultFloorTokens?: number;
  textFloorTokens?: number;
}

/**
 * `inner`, bounded. The wrapper keeps the inner summarizer's `name` (it is what records and
 * the CLI show). An inner summarizer that adds more to its model request than the compaction
 * instruction should be given a larger `safetyMarginTokens`. `OpenAISummarizer` is bounded
 * already: to bound it with other options, wrap one made with `bounding: false`.
 */
export class BoundedSummarizer implements Summarizer {
  readonly name: string;

  constructor(
    private readonly inner: Summarizer,
    private readonly options: BoundingOptions = {},
  ) {
    this.name = inner.name;
    for (const key of ['window', 'safetyMarginTokens', 'toolResultFloorTokens', 'textFloorTokens'] as const) {
      const v = options[key];
      if (v !== undefined && (!Number.isInteger(v) || v < 0 || (key === 'window' && v === 0))) {
        throw new XcompactError('config', `Bounding option ${key} must be a whole number of tokens${key === 'window' ? ' ≥ 1' : ' ≥ 0'}, got ${String(v)}.`);
      }
    }
  }

  async summarize(request: SummaryRequest, signal: AbortSignal): Promise<SummaryResult> {
    throwIfCancelled(signal);
    const window = this.options.window ?? request.contextWindow;
    const tokenizer = this.options.tokenizer;
    const count: CountTokens = tokenizer === undefined ? request.countTokens : typeof tokenizer === 'function' ? tokenizer : (text) => tokenizer.count(text);
    if (window === undefined) {
      return withReport(await this.inner.summarize(request, signal), { mode: 'as-is', cutBlocks: 0, chunks: 1 });
    }
    const base: SummaryRequest = { ...request, contextWindow: window, countTokens: count };

    const head: ChatMessage[] = request.system ? [request.system] : [];
    const instruction = buildInstruction({ keptCheckpoints: request.context.length, focus: request.focus });
    const asIs = [...head, ...request.context, ...request.messages, { role: 'user' as const, content: instruction }];
    const margin = this.options.safetyMarginTokens ?? defaultSafetyMargin(window);
    const budget = inputBudget(window, request.maxTokens, margin);
    // Chunk requests leave the kept checkpoints out, so their instruction has no paragraph about them.
    const chunkInstruction = { role: 'user' as const, content: buildInstruction({ focus: request.focus }) };
    const fixed = TEMPLATE_COST.perRequest + priceTools(request.tools, count) + priceMessages(head, count) + priceMessage(chunkInstruction, count);
    if (fixed >= budget) {
      throw new SummarizerError(
        'summary-input-too-large',
        `The summary request cannot fit the summarizer's window: the system prompt, tools and instruction alone cost ${fixed} tokens, ` +
          `and the input budget is ${budget} (window ${window} − max_tokens ${request.maxTokens} − safety margin ${margin}). ` +
          'Use a summarization model with a larger window, or lower maxTokens.',
      );
    }

    // 1. As the conversation sent it: the whole prefix is shared with the provider's cache.
    const asIsPrice = priceRequest(asIs, request.tools, count);
    if (asIsPrice <= budget) {
      return withReport(await this.inner.summarize(base, signal), { mode: 'as-is', budget, cutBlocks: 0, chunks: 1 });
    }

    // 2. Cut oversized blocks. The prefix stays shared up to the first cut message.
    const chunkRoom = budget - fixed;
    const floors: FitFloors = {
      toolResult: Math.min(this.options.toolResultFloorTokens ?? 1024, Math.floor(chunkRoom / 8)),
      other: Math.min(this.options.textFloorTokens ?? 2048, Math.floor(chunkRoom / 8)),
    };
    const singleRoom = budget - (asIsPrice - priceMessages(request.messages, count));
    const fit = truncateToFit(request.messages, Math.max(0, singleRoom), floors, count);
    if (fit.fits) {
      // The events stay whole: they are the span's structure, and bounding cuts only the texts sent.
      const result = await this.inner.summarize({ ...base, messages: fit.messages }, signal);
      return withReport(result, { mode: 'truncated', budget, cutBlocks: fit.cuts.length, chunks: 1 });
    }

    // 3. Chunks with a rolling merge. They share only system + tools with the conversation
    // (accepted: the span does not fit one request anyway). The kept checkpoints (`context`)
    // are left out: they stay in the conversation, and the only checkpoint a chunk carries
    // is the partial summary to merge. A unit (a tool-call batch with all its results) is
    // never split; one bigger than a chunk's room, less what a carried summary may take, is
    // cut down first.
    const eventsOf = pairEvents(request);
    const carriedReserve = Math.min(
      request.maxTokens + (request.userWordsTokens ?? 0) + priceMessage({ role: 'user', content: frameCheckpoint('') }, count),
      Math.floor(chunkRoom / 4),
    );
    const split = unitsOf(fit.messages);
    const { units, cuts: unitCuts } = fitUnits(split, chunkRoom - carriedReserve, count);
    const unitStarts = startsOf(split);
    const prices = units.map((u) => priceMessages(u, count));
    const results: SummaryResult[] = [];
    let partial: string | undefined;
    let lateCuts = 0;
    let k = 0;
    while (k < units.length) {
      throwIfCancelled(signal);
      const carried: ChatMessage[] = partial === undefined ? [] : [{ role: 'user', content: frameCheckpoint(partial) }];
      const room = chunkRoom - priceMessages(carried, count);
      let chunk: ChatMessage[];
      const from = k;
      const n = takeUnits(prices, k, room);
      if (n > 0) {
        chunk = units.slice(k, k + n).flat();
        k += n;
      } else {
        // The carried summary came out bigger than reserved: cut this unit to the room left.
        const unit = units[k]!;
        const small = truncateToFit(unit, room, { toolResult: MIN_BLOCK_TOKENS, other: MIN_BLOCK_TOKENS }, count);
        if (!small.fits) {
          throw new SummarizerError(
            'summary-input-too-large',
            `A unit of ${unit.length} message(s) (a tool-call batch with its results, or one message) costs ${small.tokens} tokens even with every block cut to ${MIN_BLOCK_TOKENS}, ` +
              `but a chunk has room for ${room} (input budget ${budget}, fixed part ${fixed}, carried summary ${chunkRoom - room}). ` +
              'Use a summarization model with a larger window, or lower maxTokens.',
          );
        }
        chunk = small.messages;
        lateCuts += small.cuts.length;
        k += 1;
      }
      const events = eventsOf(unitStarts[from]!, unitStarts[k]!, partial);
      const done = await this.inner.summarize({ ...base, context: [], messages: [...carried, ...chunk], events }, signal);
      results.push(done);
      partial = done.text;
    }
    const last = results[results.length - 1]!;
    const merged: SummaryResult = { ...last, requests: results.reduce((s, r) => s + r.requests, 0) };
    const usage = sumUsage(results.map((r) => r.usage));
    if (usage) merged.usage = usage;
    else delete merged.usage;
    return withReport(merged, { mode: 'chunked', budget, cutBlocks: fit.cuts.length + unitCuts + lateCuts, chunks: results.length });
  }
}

/** `inner` wrapped in a {@link BoundedSummarizer}. */
export function boundSummarizer(inner: Summarizer, options: BoundingOptions = {}): BoundedSummarizer {
  return new BoundedSummarizer(inner, options);
}

/** Usage summed over the requests that reported it; optional fields only when some request had them. */
export function sumUsage(list: ReadonlyArray<Usage | undefined>): Usage | undefined {
  const present = list.filter((u): u is Usage => u !== undefined);
  if (present.length === 0) return undefined;
  const total: Usage = { promptTokens: 0, completionTokens: 0 };
  for (const u of present) {
    total.promptTokens += u.promptTokens;
    total.completionTokens += u.completionTokens;
    for (const key of ['cachedTokens', 'cacheWriteTokens', 'reasoningTokens'] as const) {
      const v = u[key];
      if (v !== undefined) total[key] = (total[key] ?? 0) + v;
    }
  }
  return total;
}

function withReport(result: SummaryResult, bounding: BoundingReport): SummaryResult {
  return { ...result, bounding };
}

/** Index of each unit's first message, plus the end. */
function startsOf(units: readonly ChatMessage[][]): number[] {
  const out = [0];
  for (const u of units) out.push(out[out.length - 1]! + u.length);
  return out;
}

/**
 * The events for a chunk of messages [from, to). When the request's events pair one to one
 * with its messages (the engine's do), a chunk gets its own events, after the carried partial
 * summary as a checkpoint `user/message` (seq −1: it is not in the log), so a summarizer that
 * reads events sees what one that reads messages sees. Otherwise a chunk gets no events and
 * such a summarizer falls back to the messages.
 */
function pairEvents(request: SummaryRequest): (from: number, to: number, partial: string | undefined) => SurfaceEvent[] {
  if (request.events.length !== request.messages.length) return () => [];
  return (from, to, partial) => {
    const events = request.events.slice(from, to);
    if (partial === undefined) return events;
    const carried: SurfaceEvent = {
      seq: -1,
      type: 'user/message',
      time: new Date(0).toISOString(),
      data: { content: [{ type: 'text', text: frameCheckpoint(partial) }], source: COMPACTION_CHECKPOINT_SOURCE },
    };
    return [carried, ...events];
  };
}
