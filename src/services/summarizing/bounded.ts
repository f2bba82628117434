/**
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
 *    the loop lives in `bounded-summarizer.ts`).
 */
import type { ChatCompletionContentPart } from 'openai/resources/chat/completions';
import type { ChatMessage } from '../../session/derive';

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
