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
import { XcompactError } from '../../errors';
import { frameCheckpoint } from './checkpoint';
import type { ChatMessage } from '../../session/derive';
import { COMPACTION_CHECKPOINT_SOURCE, type SurfaceEvent, type Usage } from '../../session/events';
import { SummarizerError, type BoundingReport, type Summarizer, type SummaryRequest, type SummaryResult } from './contract';
import { throwIfCancelled } from './reply';
import {
  MIN_BLOCK_TOKENS,
  TEMPLATE_COST,
  defaultSafetyMargin,
  inputBudget,
  priceMessage,
  priceMessages,
  priceRequest,
  priceTools,
  truncateToFit,
  type CountTokens,
  type FitFloors,
} from './bounded';
import { fitUnits, takeUnits, unitsOf } from './chunks';
import { buildInstruction } from './instruction';

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
    const carriedReserve = Math.min(request.maxTokens + (request.userWordsTokens ?? 0) + priceMessage({ role: 'user', content: frameCheckpoint('') }, count), Math.floor(chunkRoom / 4));
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
