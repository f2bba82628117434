/**
 * The model summarizer: asks an OpenAI-compatible chat-completions endpoint (through the
 * `openai` SDK) to condense a span into the checkpoint sections of SPEC §8.
 *
 * The request replays the conversation's own prefix — system prompt, tools, kept checkpoints,
 * then the span's messages, byte for byte as the conversation sent them — and appends one
 * instruction, so the provider's prompt cache serves everything but the instruction.
 * When that request would not fit the summarizer's window, the input is bounded first
 * (`bounded.ts`): oversized blocks are cut, then the span is summarized chunk by chunk.
 */
import { XcompactError } from '../../errors.js';
import type { OpenAIClient } from '../openai-client';
import { APIUserAbortError } from 'openai';
import type { ChatCompletionChunk, ChatCompletionCreateParamsStreaming, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { CompletionUsage } from 'openai/resources/completions';
import type { ChatMessage } from '../../session/derive';
import type { Usage } from '../../session/events';
import { usageFromOpenAI } from '../../session/writer';
import { frameCheckpoint } from '../checkpoint';
import { withErrorBodyRecovery } from '../overflow';
import { SummarizerError, type Summarizer, type SummaryRequest, type SummaryResult } from '../summarizer';
import {
  MIN_BLOCK_TOKENS,
  TEMPLATE_COST,
  defaultSafetyMargin,
  inputBudget,
  priceMessage,
  priceMessages,
  priceRequest,
  priceTools,
  fitUnits,
  takeUnits,
  truncateToFit,
  unitsOf,
  type CountTokens,
  type FitFloors,
} from './bounded';
import { buildInstruction } from './instruction';

export interface BoundingOptions {
  /** Tokens kept free below the window; default {@link defaultSafetyMargin}. */
  safetyMarginTokens?: number;
  /**
   * Before chunking, tool results are cut to at most this many tokens (default 1024), other
   * blocks to at most `textFloorTokens` (default 2048); both at most 1/8 of a chunk's room.
   */
  toolResultFloorTokens?: number;
  textFloorTokens?: number;
}

export interface OpenAISummarizerOptions {
  /** An `openai` SDK client (version 6 or 7) for any OpenAI-compatible endpoint. A copy of it is patched with `withErrorBodyRecovery`. */
  client: OpenAIClient;
  /**
   * The request field that carries the summary's output cap when the request does not name one
   * (the engine names it from the model registry). `max_tokens` (default) is what DeepSeek,
   * vLLM, llama.cpp and Ollama read; OpenAI's reasoning models want `max_completion_tokens`.
   */
  outputCapField?: 'max_tokens' | 'max_completion_tokens';
  /**
   * SDK retries per request. Default 0: whether to retry a 429/5xx, and after how long, is a
   * lifecycle decision the engine's charts make from the classified error; an SDK retry
   * inside the cancellable summary step would spend time (with backoff up to a minute) the
   * chart cannot see or bound. The client's own setting is left alone, for its other users.
   */
  maxRetries?: number;
  bounding?: BoundingOptions;
}

/** How a request was bounded, for logs and tests. */
export interface BoundingReport {
  mode: 'as-is' | 'truncated' | 'chunked';
  budget?: number;
  /** Blocks cut, in the single request or before chunking. */
  cutBlocks: number;
  chunks: number;
}

export class OpenAISummarizer implements Summarizer {
  readonly name = 'openai';
  private readonly client: OpenAIClient;
  private readonly maxRetries: number;
  private readonly bounding: BoundingOptions;
  private readonly outputCapField: 'max_tokens' | 'max_completion_tokens';
  /** The last summarize() call's bounding decision. */
  lastBounding: BoundingReport | undefined;

  constructor(options: OpenAISummarizerOptions) {
    if (!Number.isInteger(options.maxRetries ?? 0) || (options.maxRetries ?? 0) < 0) {
      throw new XcompactError('config', `OpenAISummarizer maxRetries must be an integer ≥ 0, got ${String(options.maxRetries)}: pass 0 (the default) or a small whole number`);
    }
    // A copy, so the caller's own client is not patched behind its back.
    this.client = withErrorBodyRecovery(options.client.withOptions({}));
    this.maxRetries = options.maxRetries ?? 0;
    this.bounding = options.bounding ?? {};
    this.outputCapField = options.outputCapField ?? 'max_tokens';
  }

  async summarize(request: SummaryRequest, signal: AbortSignal): Promise<SummaryResult> {
    throwIfCancelled(signal);
    const count: CountTokens = request.countTokens;
    const head: ChatMessage[] = request.system ? [request.system] : [];
    const instruction = buildInstruction({ keptCheckpoints: request.context.length, focus: request.focus });
    const asIs = [...head, ...request.context, ...request.messages, { role: 'user' as const, content: instruction }];

    if (request.contextWindow === undefined) {
      this.lastBounding = { mode: 'as-is', cutBlocks: 0, chunks: 1 };
      return this.finish(request, [await this.complete(request, asIs, signal)]);
    }

    const margin = this.bounding.safetyMarginTokens ?? defaultSafetyMargin(request.contextWindow);
    const budget = inputBudget(request.contextWindow, request.maxTokens, margin);
    const chunkInstruction = buildInstruction({ focus: request.focus });
    const instructionMessage = { role: 'user' as const, content: chunkInstruction };
    const fixed = TEMPLATE_COST.perRequest + priceTools(request.tools, count) + priceMessages(head, count) + priceMessage(instructionMessage, count);
    if (fixed >= budget) {
      throw new SummarizerError(
        'summary-input-too-large',
        `The summary request cannot fit the summarizer's window: the system prompt, tools and instruction alone cost ${fixed} tokens, ` +
          `and the input budget is ${budget} (window ${request.contextWindow} − max_tokens ${request.maxTokens} − safety margin ${margin}). ` +
          'Use a summarization model with a larger window, or lower maxTokens.',
      );
    }

    // 1. As the conversation sent it: the whole prefix is shared with the provider's cache.
    const asIsPrice = priceRequest(asIs, request.tools, count);
    if (asIsPrice <= budget) {
      this.lastBounding = { mode: 'as-is', budget, cutBlocks: 0, chunks: 1 };
      return this.finish(request, [await this.complete(request, asIs, signal, budget)]);
    }

    // 2. Cut oversized blocks. The prefix stays shared up to the first cut message.
    const chunkRoom = budget - fixed;
    const floors: FitFloors = {
      toolResult: Math.min(this.bounding.toolResultFloorTokens ?? 1024, Math.floor(chunkRoom / 8)),
      other: Math.min(this.bounding.textFloorTokens ?? 2048, Math.floor(chunkRoom / 8)),
    };
    const singleRoom = budget - (asIsPrice - priceMessages(request.messages, count));
    const fit = truncateToFit(request.messages, Math.max(0, singleRoom), floors, count);
    if (fit.fits) {
      const messages = [...head, ...request.context, ...fit.messages, { role: 'user' as const, content: instruction }];
      this.lastBounding = { mode: 'truncated', budget, cutBlocks: fit.cuts.length, chunks: 1 };
      return this.finish(request, [await this.complete(request, messages, signal, budget)]);
    }

    // 3. Chunks with a rolling merge. These requests share only system + tools with the
    // conversation (accepted: the span does not fit one request anyway). The kept
    // checkpoints (`context`) are left out: they stay in the conversation, and the only
    // <compacted-summary> a chunk request carries is the partial summary to merge.
    // A unit (a tool-call batch with all its results) is never split; one bigger than a
    // chunk's room, less what a carried partial summary may take, is cut down first.
    const carriedReserve = Math.min(request.maxTokens + priceMessage({ role: 'user', content: frameCheckpoint('') }, count), Math.floor(chunkRoom / 4));
    const { units, cuts: unitCuts } = fitUnits(unitsOf(fit.messages), chunkRoom - carriedReserve, count);
    const prices = units.map((u) => priceMessages(u, count));
    const results: Completion[] = [];
    let partial: string | undefined;
    let lateCuts = 0;
    let k = 0;
    while (k < units.length) {
      throwIfCancelled(signal);
      const carried: ChatMessage[] = partial === undefined ? [] : [{ role: 'user', content: frameCheckpoint(partial) }];
      const room = chunkRoom - priceMessages(carried, count);
      let chunk: ChatMessage[];
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
      const messages = [...head, ...carried, ...chunk, instructionMessage];
      const done = await this.complete(request, messages, signal, budget);
      results.push(done);
      partial = done.text;
    }
    this.lastBounding = { mode: 'chunked', budget, cutBlocks: fit.cuts.length + unitCuts + lateCuts, chunks: results.length };
    return this.finish(request, results);
  }

  private finish(request: SummaryRequest, results: readonly Completion[]): SummaryResult {
    const last = results[results.length - 1]!;
    const result: SummaryResult = { text: last.text, provider: request.target.provider, model: last.model ?? request.target.model, requests: results.length };
    const usage = sumUsage(results.map((r) => r.usage));
    if (usage) result.usage = usage;
    return result;
  }

  /** One streamed request; resolves only with a complete, usable summary text. */
  private async complete(request: SummaryRequest, messages: ChatMessage[], signal: AbortSignal, budget?: number): Promise<Completion> {
    if (budget !== undefined) {
      // The invariant the bounding exists for; a failure here is a bug in the planning above.
      const price = priceRequest(messages, request.tools, request.countTokens);
      if (price > budget) {
        throw new SummarizerError('summary-input-too-large', `Refusing to send a summary request of ${price} tokens over the input budget of ${budget}.`);
      }
    }
    // `tools` exactly as the conversation sent them. No `tool_choice: 'none'`: it is not part
    // of OpenAI's cached prefix, but vLLM (--exclude-tools-when-tool-choice-none, on by
    // default in some deployments) then drops the tools from the rendered prompt, llama.cpp
    // switches to its content-only template path (which can render the tools differently),
    // and some gateways reject tool_choice outright: each would turn a warm cache cold from
    // the system prompt on. The instruction forbids tool calls, and a reply made only of tool
    // calls is rejected below ('summary-tool-calls').
    const body: ChatCompletionCreateParamsStreaming = {
      model: request.target.model,
      messages,
      ...(request.tools.length > 0 ? { tools: request.tools as unknown as ChatCompletionTool[] } : {}),
      [request.outputCapField ?? this.outputCapField]: request.maxTokens,
      stream: true,
      stream_options: { include_usage: true },
    };

    let text = '';
    let finish: string | null = null;
    const toolCalls = new Set<number>();
    let usage: CompletionUsage | undefined;
    let model: string | undefined;
    try {
      const stream = await this.client.chat.completions.create(body, { signal, maxRetries: this.maxRetries });
      for await (const chunk of stream as AsyncIterable<ChatCompletionChunk>) {
        if (chunk.model) model = chunk.model;
        if (chunk.usage) usage = chunk.usage;
        for (const choice of chunk.choices ?? []) {
          if (choice.index !== 0) continue;
          // Only `content` is kept: DeepSeek's `reasoning_content` (and any other field) is dropped.
          if (typeof choice.delta?.content === 'string') text += choice.delta.content;
          for (const call of choice.delta?.tool_calls ?? []) toolCalls.add(call.index);
          if (choice.finish_reason) finish = choice.finish_reason;
        }
      }
    } catch (err) {
      if (signal.aborted || err instanceof APIUserAbortError) throw cancelled(signal, err);
      throw new SummarizerError('summary-request', `The summary request failed: ${messageOf(err)}`, { cause: err });
    }
    // The SDK ends the iteration silently when the signal aborts mid-stream: what arrived is
    // a partial summary and must never be used.
    if (signal.aborted) throw cancelled(signal, signal.reason);

    const got = `(${text.length} characters of text, ${toolCalls.size} tool call(s))`;
    if (finish === 'length') {
      throw new SummarizerError(
        'summary-truncated',
        `The summary was cut off at max_tokens ${request.maxTokens} (finish reason "length") ${got}; a truncated checkpoint is never used. Raise maxTokens or summarize a smaller span.`,
      );
    }
    if (finish === 'content_filter') {
      throw new SummarizerError('summary-truncated', `The provider's content filter stopped the summary (finish reason "content_filter") ${got}.`);
    }
    if (finish === null) {
      throw new SummarizerError('summary-request', `The summary stream ended without a finish reason ${got}: the response is incomplete.`);
    }
    if (text.trim() === '') {
      if (toolCalls.size > 0) {
        throw new SummarizerError('summary-tool-calls', `The summarization model called ${toolCalls.size} tool(s) instead of writing the summary (finish reason "${finish}").`);
      }
      throw new SummarizerError('summary-empty', `The summarization model returned ${text.length === 0 ? 'no text' : 'only whitespace'} (finish reason "${finish}").`);
    }
    const done: Completion = { text: text.trim() };
    if (model) done.model = model;
    if (usage) done.usage = usageOf(usage);
    return done;
  }
}

interface Completion {
  text: string;
  model?: string;
  usage?: Usage;
}

/** openai usage → session Usage; DeepSeek reports cache hits as `prompt_cache_hit_tokens`. */
function usageOf(u: CompletionUsage): Usage {
  const usage = usageFromOpenAI(u);
  const hit = (u as CompletionUsage & { prompt_cache_hit_tokens?: unknown }).prompt_cache_hit_tokens;
  if (usage.cachedTokens === undefined && typeof hit === 'number') usage.cachedTokens = hit;
  return usage;
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

function throwIfCancelled(signal: AbortSignal): void {
  if (signal.aborted) throw cancelled(signal, signal.reason);
}

function cancelled(signal: AbortSignal, cause: unknown): SummarizerError {
  const reason = signal.reason instanceof Error ? `: ${signal.reason.message}` : '';
  return new SummarizerError('summary-cancelled', `The summary request was cancelled${reason}; no partial summary is kept.`, { cause });
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
