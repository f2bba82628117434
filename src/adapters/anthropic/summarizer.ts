/**
 * AnthropicSummarizer: summaries written through the caller's own `@anthropic-ai/sdk` client
 * (`messages.create`, unrecorded), the default of the Anthropic drop-in: same credentials, base
 * URL and model as the conversation. The request replays the conversation's system prompt, tools
 * and kept checkpoints, then the span, then the compaction instruction as a user message; the
 * drop-in wears `boundSummarizer`, so a span larger than the window is sent in chunks that fit.
 */
import type { ChatMessage } from '../../session/derive';
import type { TextBlock } from '../../session/events';
import {
  buildInstruction,
  checkSummaryReply,
  stopOf,
  summaryCancelled,
  SummarizerError,
  throwIfCancelled,
  type Summarizer,
  type SummaryRequest,
  type SummaryResult,
} from '../../services/summarizing';
import { anthropicToolsOfChat, finishReasonOf, usageOfAnthropic, type AnthropicBlock, type AnthropicMessage } from './map';
import { canonicalArguments } from '../conversation';

/** What the summarizer calls: `client.messages.create`, unwrapped. */
export type AnthropicCreate = (body: Record<string, unknown>, options?: { signal?: AbortSignal }) => Promise<unknown>;

export class AnthropicSummarizer implements Summarizer {
  readonly name = 'anthropic';
  constructor(private readonly create: AnthropicCreate) {}

  async summarize(request: SummaryRequest, signal: AbortSignal): Promise<SummaryResult> {
    throwIfCancelled(signal);
    const messages = anthropicOfChat([
      ...request.context,
      ...request.messages,
      {
        role: 'user',
        content: buildInstruction({ keptCheckpoints: request.context.length, ...(request.focus !== undefined ? { focus: request.focus } : {}) }),
      },
    ]);
    const system = request.system && typeof request.system.content === 'string' ? request.system.content : undefined;
    const tools = anthropicToolsOfChat(request.tools);
    let reply: { content?: AnthropicBlock[]; usage?: unknown; stop_reason?: unknown };
    try {
      reply = (await this.create(
        {
          model: request.target.model,
          max_tokens: request.maxTokens,
          messages,
          ...(system !== undefined ? { system } : {}),
          ...(tools.length > 0 ? { tools } : {}),
        },
        { signal },
      )) as typeof reply;
    } catch (err) {
      if (signal.aborted) throw summaryCancelled(signal, err);
      throw new SummarizerError('summary-request', `The summary request failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    const blocks = reply.content ?? [];
    const text = blocks
      .filter((b) => b.type === 'text')
      .map((b) => String(b['text'] ?? ''))
      .join('');
    const usage = usageOfAnthropic(reply.usage);
    const finishReason = finishReasonOf(reply.stop_reason);
    const checked = checkSummaryReply(request, {
      text,
      toolCalls: blocks.filter((b) => b.type === 'tool_use').length,
      stop: finishReason === undefined ? undefined : stopOf(finishReason),
      ...(finishReason !== undefined ? { finishReason } : {}),
      ...(usage ? { usage } : {}),
    });
    return { text: checked, provider: request.target.provider, model: request.target.model, requests: 1, ...(usage ? { usage } : {}) };
  }
}

const textOf = (content: unknown): string =>
  typeof content === 'string'
    ? content
    : Array.isArray(content)
      ? (content as Array<{ type?: string; text?: string }>)
          .filter((p) => p.type === 'text')
          .map((p) => p.text ?? '')
          .join('\n\n')
      : '';

/** Chat messages (what a summary request carries) as Anthropic messages: tool results in user messages, same roles merged. */
export function anthropicOfChat(chat: readonly ChatMessage[]): AnthropicMessage[] {
  const out: Array<{ role: string; content: AnthropicBlock[] }> = [];
  const push = (role: string, blocks: AnthropicBlock[]) => {
    if (blocks.length === 0) return;
    const last = out[out.length - 1];
    if (last?.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of chat) {
    if (m.role === 'assistant') {
      const blocks: AnthropicBlock[] = [];
      const text = textOf(m.content);
      if (text !== '') blocks.push({ type: 'text', text });
      for (const c of m.tool_calls ?? []) {
        if (c.type !== 'function') continue;
        let input: unknown;
        try {
          input = JSON.parse(canonicalArguments(c.function.arguments));
        } catch {
          input = { arguments: c.function.arguments };
        }
        blocks.push({
          type: 'tool_use',
          id: c.id,
          name: c.function.name,
          input: typeof input === 'object' && input !== null && !Array.isArray(input) ? input : { arguments: c.function.arguments },
        });
      }
      push('assistant', blocks);
    } else if (m.role === 'tool') {
      push('user', [{ type: 'tool_result', tool_use_id: m.tool_call_id, content: textOf(m.content) }]);
    } else {
      const text = textOf(m.content);
      push('user', [{ type: 'text', text: text === '' ? '(empty)' : text } satisfies Pick<TextBlock, 'type' | 'text'>]);
    }
  }
  return out;
}
