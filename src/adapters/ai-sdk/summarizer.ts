/**
 * AiSdkSummarizer: summaries written by an AI SDK model through `generateText`.
 *
 * The default summarizer of the AI SDK adapter, because an AI SDK app has a model object,
 * not an OpenAI client: the summary goes through the same provider package, credentials,
 * base URL, headers and retries the app already configured, works for any provider the AI
 * SDK supports (not only OpenAI-compatible ones), and replays the conversation's system
 * prompt and tools first so the provider's prompt cache stays warm. It makes one request
 * (as-is); bounding an oversized span is the job of a wrapper around any Summarizer.
 */
import type { LanguageModelV3 } from '@ai-sdk/provider';
import { generateText, jsonSchema, tool, type LanguageModel, type ModelMessage, type ToolSet } from 'ai';
import type { ChatMessage } from '../../session/derive';
import type { Usage } from '../../session/events';
import { SummarizerError, type Summarizer, type SummaryRequest, type SummaryResult } from '../../services/summarizer';
import { buildInstruction } from '../../services/summarizers/instruction';
import { promptOf } from './convert';

export interface AiSdkSummarizerOptions {
  /** Any AI SDK language model (use the unwrapped one: a summary must not be compacted itself). */
  model: LanguageModel | LanguageModelV3;
  /** generateText's own retries of transient errors (429, 5xx). Default 0: the engine's retry policy decides. */
  maxRetries?: number;
}

export class AiSdkSummarizer implements Summarizer {
  readonly name = 'ai-sdk';
  constructor(private readonly options: AiSdkSummarizerOptions) {}

  async summarize(request: SummaryRequest, signal: AbortSignal): Promise<SummaryResult> {
    if (signal.aborted) throw new SummarizerError('summary-cancelled', 'The summary request was cancelled before it was sent.');
    const messages: ModelMessage[] = [
      ...request.context.map(modelMessageOf),
      ...(promptOf(request.events) as ModelMessage[]),
      { role: 'user', content: buildInstruction({ keptCheckpoints: request.context.length, focus: request.focus }) },
    ];
    const system = request.system && typeof request.system.content === 'string' ? request.system.content : undefined;
    let result;
    try {
      result = await generateText({
        model: this.options.model as LanguageModel,
        ...(system !== undefined ? { system } : {}),
        messages,
        // No execute(): a tool call ends the request and is reported below, never run.
        ...(request.tools.length > 0 ? { tools: toolsOf(request.tools) } : {}),
        maxOutputTokens: request.maxTokens,
        maxRetries: this.options.maxRetries ?? 0,
        abortSignal: signal,
      });
    } catch (err) {
      if (signal.aborted) throw new SummarizerError('summary-cancelled', 'The summary request was cancelled.', { cause: err });
      throw new SummarizerError('summary-request', `The summary request failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    const text = result.text.trim();
    const got = `(${result.text.length} characters of text, ${result.toolCalls.length} tool call(s))`;
    if (result.finishReason === 'length') {
      throw new SummarizerError('summary-truncated', `The summary was cut off at ${request.maxTokens} output tokens (finish reason "length") ${got}; a truncated checkpoint is never used.`);
    }
    if (result.finishReason === 'content-filter') {
      throw new SummarizerError('summary-truncated', `The provider's content filter stopped the summary ${got}.`);
    }
    if (text === '') {
      if (result.toolCalls.length > 0) throw new SummarizerError('summary-tool-calls', `The summarization model called ${result.toolCalls.length} tool(s) instead of writing the summary.`);
      throw new SummarizerError('summary-empty', `The summarization model returned ${result.text.length === 0 ? 'no text' : 'only whitespace'}.`);
    }
    const out: SummaryResult = { text, provider: request.target.provider, model: result.response.modelId || request.target.model, requests: 1 };
    const usage = usageOf(result.usage);
    if (usage) out.usage = usage;
    return out;
  }
}

function usageOf(u: { inputTokens: number | undefined; outputTokens: number | undefined; inputTokenDetails?: { cacheReadTokens?: number | undefined; cacheWriteTokens?: number | undefined } }): Usage | undefined {
  if (u.inputTokens === undefined) return undefined;
  const usage: Usage = { promptTokens: u.inputTokens, completionTokens: u.outputTokens ?? 0 };
  if (u.inputTokenDetails?.cacheReadTokens !== undefined) usage.cachedTokens = u.inputTokenDetails.cacheReadTokens;
  if (u.inputTokenDetails?.cacheWriteTokens !== undefined) usage.cacheWriteTokens = u.inputTokenDetails.cacheWriteTokens;
  return usage;
}

/** The recorded tool definitions (chat-completions shape) as AI SDK tools without execute. */
function toolsOf(defs: ReadonlyArray<Record<string, unknown>>): ToolSet {
  const set: ToolSet = {};
  for (const def of defs) {
    const fn = def['function'] as { name?: string; description?: string; parameters?: unknown } | undefined;
    if (def['type'] !== 'function' || !fn?.name) continue;
    set[fn.name] = tool({
      ...(fn.description ? { description: fn.description } : {}),
      inputSchema: jsonSchema((fn.parameters ?? { type: 'object', properties: {} }) as Parameters<typeof jsonSchema>[0]),
    });
  }
  return set;
}

/** The engine's context messages (earlier checkpoints: user text) as ModelMessages. */
function modelMessageOf(m: ChatMessage): ModelMessage {
  const text = (c: unknown): string =>
    typeof c === 'string' ? c : Array.isArray(c) ? c.map((p: { text?: string }) => p.text ?? '').join('\n\n') : '';
  switch (m.role) {
    case 'assistant':
      return { role: 'assistant', content: text(m.content) };
    case 'system':
    case 'developer':
      return { role: 'user', content: text(m.content) };
    default:
      return { role: 'user', content: text(m.content) };
  }
}
