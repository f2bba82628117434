/**
 * AiSdkSummarizer: summaries written by an AI SDK model through `streamText`.
 *
 * The default summarizer of the AI SDK adapter, because an AI SDK app has a model object,
 * not an OpenAI client: the summary goes through the same provider package, credentials,
 * base URL, headers and retries the app already configured, works for any provider the AI
 * SDK supports (not only OpenAI-compatible ones), and replays the conversation's system
 * prompt and tools first so the provider's prompt cache stays warm. It makes one request
 * from `request.messages`, the texts a bounding wrapper may have cut or chunked (the events
 * stay whole and are read only for what chat messages do not carry: a result's error flag).
 * The adapter's default wears `boundSummarizer`, so a span larger than the window is sent in
 * chunks that fit.
 */
import { jsonSchema, streamText, tool, type LanguageModel, type ModelMessage, type ToolSet } from 'ai';
import type { ChatCompletionContentPart } from 'openai/resources/chat/completions';
import type { ChatMessage } from '../../session/derive';
import type { SurfaceEvent, Usage } from '../../session/events';
import { SummarizerError, type Summarizer, type SummaryRequest, type SummaryResult } from '../../services/summarizing';
import { buildInstruction } from '../../services/summarizing';
import { checkSummaryReply, stopOf, summaryCancelled, throwIfCancelled, watchIdle } from '../../services/summarizing';
import type { AiSdkLanguageModel } from './model';
import { parseArguments } from './convert';

export interface AiSdkSummarizerOptions {
  /**
   * Any AI SDK language model the installed `ai` takes (use the unwrapped one: a summary must not
   * be compacted itself): spec v3 for `ai` 6, v3 or v4 for `ai` 7.
   */
  model: LanguageModel | AiSdkLanguageModel;
  /** generateText's own retries of transient errors (429, 5xx). Default 0: the engine's retry policy decides. */
  maxRetries?: number;
}

export class AiSdkSummarizer implements Summarizer {
  readonly name = 'ai-sdk';
  constructor(private readonly options: AiSdkSummarizerOptions) {}

  async summarize(request: SummaryRequest, signal: AbortSignal): Promise<SummaryResult> {
    throwIfCancelled(signal);
    const messages: ModelMessage[] = [
      ...modelMessagesOf(request.context, []),
      ...modelMessagesOf(request.messages, request.events),
      { role: 'user', content: buildInstruction({ keptCheckpoints: request.context.length, focus: request.focus }) },
    ];
    const system = request.system && typeof request.system.content === 'string' ? request.system.content : undefined;
    // Streamed, so that silence can be told from a slow summary: the provider must send the
    // first part and each next one within idleTimeoutMs (generateText cannot tell a stalled
    // body from a long one).
    const idle = watchIdle(signal, request.idleTimeoutMs, 'the summary model');
    let text = '';
    let toolCalls = 0;
    let finishReason: string | undefined;
    let totalUsage: Parameters<typeof usageOf>[0] | undefined;
    let failure: unknown;
    let modelId: string | undefined;
    try {
      const result = streamText({
        model: this.options.model as LanguageModel,
        ...(system !== undefined ? { system } : {}),
        messages,
        // No execute(): a tool call ends the request and is reported below, never run.
        ...(request.tools.length > 0 ? { tools: toolsOf(request.tools) } : {}),
        maxOutputTokens: request.maxTokens,
        maxRetries: this.options.maxRetries ?? 0,
        abortSignal: idle.signal,
        // Errors arrive as stream parts (read below), not on the console.
        onError: () => undefined,
      });
      for await (const part of result.fullStream) {
        idle.alive();
        if (part.type === 'text-delta') text += part.text;
        else if (part.type === 'tool-call') toolCalls++;
        else if (part.type === 'finish') {
          finishReason = part.finishReason;
          totalUsage = part.totalUsage;
        } else if (part.type === 'error') failure ??= part.error;
      }
      if (failure === undefined && !idle.signal.aborted) modelId = (await result.response).modelId;
    } catch (err) {
      failure ??= err;
    } finally {
      idle.done();
    }
    if (idle.timedOut) throw idle.error(failure);
    if (signal.aborted) throw summaryCancelled(signal, failure);
    if (failure !== undefined) {
      throw new SummarizerError('summary-request', `The summary request failed: ${failure instanceof Error ? failure.message : String(failure)}`, {
        cause: failure,
      });
    }
    const usage = totalUsage ? usageOf(totalUsage) : undefined;
    const checked = checkSummaryReply(request, {
      text,
      toolCalls,
      // The AI SDK always reports a reason (`other` or `unknown` when the provider gave none).
      stop: stopOf(finishReason ?? 'unknown'),
      ...(finishReason !== undefined ? { finishReason } : {}),
      ...(usage ? { usage } : {}),
    });
    const out: SummaryResult = { text: checked, provider: request.target.provider, model: request.target.model, requests: 1 }; // the route's name, not a server's file path
    if (usage) out.usage = usage;
    return out;
  }
}

function usageOf(u: {
  inputTokens: number | undefined;
  outputTokens: number | undefined;
  inputTokenDetails?: { cacheReadTokens?: number | undefined; cacheWriteTokens?: number | undefined };
}): Usage | undefined {
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
      inputSchema: jsonSchema(fn.parameters ?? { type: 'object', properties: {} }),
    });
  }
  return set;
}

/**
 * Chat-completions messages as AI SDK ModelMessages. A system message inside the span becomes
 * user text (only the request's own system prompt leads). When the events pair one to one with
 * the messages, a tool result's error flag comes from its event.
 */
export function modelMessagesOf(messages: readonly ChatMessage[], events: readonly SurfaceEvent[]): ModelMessage[] {
  const paired = events.length === messages.length;
  const names = new Map<string, string>();
  return messages.map((m, i): ModelMessage => {
    switch (m.role) {
      case 'assistant': {
        const parts: Array<{ type: 'text'; text: string } | { type: 'tool-call'; toolCallId: string; toolName: string; input: unknown }> = [];
        const text = textOf(m.content);
        if (text !== '') parts.push({ type: 'text', text });
        for (const c of m.tool_calls ?? []) {
          if (c.type !== 'function') continue;
          names.set(c.id, c.function.name);
          parts.push({ type: 'tool-call', toolCallId: c.id, toolName: c.function.name, input: parseArguments(c.function.arguments) });
        }
        return { role: 'assistant', content: parts.length === 1 && parts[0]!.type === 'text' ? text : parts };
      }
      case 'tool': {
        const event = paired ? events[i] : undefined;
        const isError = event?.type === 'tool/result' && event.data.callId === m.tool_call_id && event.data.isError === true;
        const fromEvent = event?.type === 'tool/result' ? event.data.toolName : undefined;
        const toolName = names.get(m.tool_call_id) ?? fromEvent ?? 'unknown';
        const parts = typeof m.content === 'string' ? undefined : (m.content as ChatCompletionContentPart[]);
        const images = parts?.some((p) => p.type === 'image_url') ?? false;
        const output = images
          ? {
              type: 'content' as const,
              value: parts!.map((p) =>
                p.type === 'image_url'
                  ? { type: 'image-url' as const, url: p.image_url.url }
                  : { type: 'text' as const, text: p.type === 'text' ? p.text : '' },
              ),
            }
          : { type: isError ? ('error-text' as const) : ('text' as const), value: textOf(m.content) };
        return { role: 'tool', content: [{ type: 'tool-result', toolCallId: m.tool_call_id, toolName, output }] };
      }
      case 'user': {
        if (typeof m.content === 'string') return { role: 'user', content: m.content };
        return {
          role: 'user',
          content: m.content.map((p) =>
            p.type === 'image_url' ? { type: 'image' as const, image: p.image_url.url } : { type: 'text' as const, text: p.type === 'text' ? p.text : '' },
          ),
        };
      }
      default:
        return { role: 'user', content: textOf(m.content) };
    }
  });
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as Array<{ type?: string; text?: string }>)
    .filter((p) => p.type === 'text')
    .map((p) => p.text ?? '')
    .join('\n\n');
}
