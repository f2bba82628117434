/**
 * The model summarizer: asks an OpenAI-compatible chat-completions endpoint (through the
 * `openai` SDK) to condense a span into the checkpoint sections of docs/spec.md#8-the-summarizer.
 *
 * The request replays the conversation's own prefix — system prompt, tools, kept checkpoints,
 * then the span's messages, byte for byte as the conversation sent them — and appends one
 * instruction, so the provider's prompt cache serves everything but the instruction.
 * When that request would not fit the summarizer's window, the input is bounded first (a
 * `BoundedSummarizer` around the single request): oversized blocks are cut, then the span is
 * summarized chunk by chunk.
 */
import { XcompactError } from '../../errors';
import type { OpenAIClient } from '../overflow';
import type { ChatCompletionChunk, ChatCompletionCreateParamsStreaming, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { CompletionUsage } from 'openai/resources/completions';
import type { ChatMessage } from '../../session/derive';
import type { Usage } from '../../session/events';
import { usageFromOpenAI } from '../../session/writer';
import { classifyRequestError, withErrorBodyRecovery } from '../overflow';
import { SummarizerError, type Summarizer, type SummaryRequest, type SummaryResult } from './contract';
import { priceRequest } from './bounded';
import { BoundedSummarizer, sumUsage, type BoundingOptions } from './bounded';
import { buildInstruction } from './instruction';
import { checkSummaryReply, stopOf, summaryCancelled, throwIfCancelled } from './reply';
import { watchIdle } from './idle';
import { withCheckpointLedger } from './ledger';

export { sumUsage, type BoundingOptions } from './bounded';
export type { BoundingReport } from './contract';

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
  /**
   * How the input is fitted to the summarizer's window (a {@link BoundedSummarizer} around the
   * single request). `false`: one request per call, as is; for a caller that bounds itself.
   */
  bounding?: BoundingOptions | false;
  /**
   * Append the checkpoint ledger (files read and modified, unresolved errors, merged with the
   * span's earlier checkpoints) to every summary. Default true; false sends and returns
   * exactly what the model wrote, at the full cap.
   */
  ledger?: boolean;
}

export class OpenAISummarizer implements Summarizer {
  readonly name = 'openai';
  private readonly client: OpenAIClient;
  private readonly maxRetries: number;
  private readonly outputCapField: 'max_tokens' | 'max_completion_tokens';
  private readonly outer: Summarizer;

  constructor(options: OpenAISummarizerOptions) {
    if (!Number.isInteger(options.maxRetries ?? 0) || (options.maxRetries ?? 0) < 0) {
      throw new XcompactError(
        'config',
        `OpenAISummarizer maxRetries must be an integer ≥ 0, got ${String(options.maxRetries)}: pass 0 (the default) or a small whole number`,
      );
    }
    // A copy, so the caller's own client is not patched behind its back.
    this.client = withErrorBodyRecovery(options.client.withOptions({}));
    this.maxRetries = options.maxRetries ?? 0;
    this.outputCapField = options.outputCapField ?? 'max_tokens';
    const single: Summarizer = { name: this.name, summarize: (request, signal) => this.summarizeOnce(request, signal) };
    const bounded = options.bounding === false ? single : new BoundedSummarizer(single, options.bounding ?? {});
    this.outer = (options.ledger ?? true) ? withCheckpointLedger(bounded) : bounded;
  }

  /** The model writes the prose; the checkpoint ledger is derived from the span (withCheckpointLedger). */
  async summarize(request: SummaryRequest, signal: AbortSignal): Promise<SummaryResult> {
    return this.outer.summarize(request, signal);
  }

  /**
   * One request: the conversation's prefix as it was sent (system, tools, kept checkpoints),
   * the span, one instruction. Refused before sending when it cannot fit the window at all.
   */
  private async summarizeOnce(request: SummaryRequest, signal: AbortSignal): Promise<SummaryResult> {
    throwIfCancelled(signal);
    const head: ChatMessage[] = request.system ? [request.system] : [];
    const instruction = buildInstruction({ keptCheckpoints: request.context.length, focus: request.focus });
    const messages = [...head, ...request.context, ...request.messages, { role: 'user' as const, content: instruction }];
    if (request.contextWindow !== undefined) {
      // The bounding wrapper plans with a safety margin; this is the hard limit behind it.
      const price = priceRequest(messages, request.tools, request.countTokens);
      const room = request.contextWindow - request.maxTokens;
      if (price > room) {
        throw new SummarizerError(
          'summary-input-too-large',
          `Refusing to send a summary request of ${price} tokens: with max_tokens ${request.maxTokens} it cannot fit the summarizer's window of ${request.contextWindow} (room ${room}). ` +
            'Bound the input (OpenAISummarizer bounding, or boundSummarizer), summarize a smaller span, or lower maxTokens.',
        );
      }
    }
    return this.finish(request, [await this.complete(request, messages, signal)]);
  }

  private finish(request: SummaryRequest, results: readonly Completion[]): SummaryResult {
    const last = results[results.length - 1]!;
    // The route's own model name: a local server reports its weights' file path (llama.cpp:
    // "/models/qwen2.gguf"), which would make checkpoints name a model no route knows.
    const result: SummaryResult = { text: last.text, provider: request.target.provider, model: request.target.model, requests: results.length };
    const usage = sumUsage(results.map((r) => r.usage));
    if (usage) result.usage = usage;
    return result;
  }

  /** One streamed request; resolves only with a complete, usable summary text. */
  private async complete(request: SummaryRequest, messages: ChatMessage[], signal: AbortSignal): Promise<Completion> {
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
    // From the request on: a provider that answers nothing, stops after the headers or stops
    // mid-stream is given up on after idleTimeoutMs of silence.
    const idle = watchIdle(signal, request.idleTimeoutMs, 'the summary provider');
    try {
      const stream = await this.client.chat.completions.create(body, { signal: idle.signal, maxRetries: this.maxRetries });
      idle.alive();
      for await (const chunk of stream as AsyncIterable<ChatCompletionChunk>) {
        idle.alive();
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
      if (idle.timedOut) throw idle.error(err);
      if (signal.aborted || classifyRequestError(err).kind === 'cancelled') throw summaryCancelled(signal, err);
      throw new SummarizerError('summary-request', `The summary request failed: ${messageOf(err)}`, { cause: err });
    } finally {
      idle.done();
    }
    // The SDK ends the iteration silently when the signal aborts mid-stream: what arrived is
    // a partial summary and must never be used.
    if (idle.timedOut) throw idle.error();
    if (signal.aborted) throw summaryCancelled(signal, signal.reason);

    const done: Completion = {
      text: checkSummaryReply(request, {
        text,
        toolCalls: toolCalls.size,
        stop: stopOf(finish),
        ...(finish !== null ? { finishReason: finish } : {}),
        ...(usage ? { usage: { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens } } : {}),
      }),
    };
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

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
