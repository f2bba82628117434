/**
 * SessionWriter: the few calls an agent loop needs to record its work correctly —
 * turns and steps numbered and nested, the request envelope, the model's reply with its
 * tool calls and usage, and the tool results. Every call is one synchronous append (or a
 * few), so the rules of the log apply unchanged.
 */
import { SessionRuleError } from './errors';
import type { ContentBlock, EventData, ImageBlock, SessionEvent, TextBlock, ToolCallBlock, Usage } from './events';
import type { Session } from './session';

export type UserContent = string | Array<TextBlock | ImageBlock>;

// The few fields of a chat-completions reply this writer reads, as plain structural types: the
// session layer depends on no provider SDK, and an OpenAI SDK object (ChatCompletionMessage,
// CompletionUsage, ChatCompletionTool) is accepted as it is (test/session/writer-types.test.ts).

/** A tool call of a completion message; only `function` calls can be recorded. */
export interface CompletionToolCall {
  id: string;
  type: string;
  function?: { name: string; arguments: string };
}

/** What `assistantFromCompletion` reads of a completion message (non-streamed, or an accumulated stream). */
export interface CompletionMessage {
  content?: string | null;
  tool_calls?: ReadonlyArray<CompletionToolCall> | null;
  /** Reasoning text, as DeepSeek, vLLM and llama.cpp return it. */
  reasoning_content?: string | null;
}

/** Chat-completions usage, as the API reports it. */
export interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number | null } | null;
  completion_tokens_details?: { reasoning_tokens?: number | null } | null;
}

export interface RequestEnvelope {
  provider: string;
  model: string;
  /** The system prompt; kept as surface node 0. Omit to leave the surface as it is. */
  systemPrompt?: string;
  /** Tool definitions as sent (OpenAI `tools` entries, or any plain JSON objects). */
  tools?: ReadonlyArray<object>;
  /** The request's output cap (`max_tokens`), part of the budget's output reservation. */
  maxTokens?: number;
  /** The model's window, when the writer knows it: kept in the header so a reader of the log knows it too. */
  contextWindow?: number;
}

export interface AssistantReply {
  text?: string;
  reasoning?: string;
  toolCalls?: ReadonlyArray<{ id: string; name: string; arguments: string }>;
  usage?: Usage;
  provider?: string;
  model?: string;
  finishReason?: string;
}

/** OpenAI usage → the session's normalised usage (prompt includes cached tokens). */
export function usageFromOpenAI(u: CompletionUsage): Usage {
  const usage: Usage = { promptTokens: u.prompt_tokens, completionTokens: u.completion_tokens };
  const cached = u.prompt_tokens_details?.cached_tokens;
  if (typeof cached === 'number') usage.cachedTokens = cached;
  const reasoning = u.completion_tokens_details?.reasoning_tokens;
  if (typeof reasoning === 'number') usage.reasoningTokens = reasoning;
  return usage;
}

/** Bad input is a rule error naming the call, never a TypeError from inside it. */
function objectArgument(call: string, what: string, value: unknown): void {
  if (typeof value !== 'object' || value === null) {
    throw new SessionRuleError('invalid-input', `${call} takes ${what}; got ${value === null ? 'null' : typeof value}.`);
  }
}

function toBlocks(content: UserContent): Array<TextBlock | ImageBlock> {
  return typeof content === 'string' ? [{ type: 'text', text: content }] : content;
}

export class SessionWriter {
  constructor(readonly session: Session) {}

  startTurn(): number {
    const turn = this.session.lastTurn + 1;
    this.session.append({ type: 'turn/start', data: { turn } });
    return turn;
  }

  endTurn(reason?: EventData<'turn/end'>['reason']): void {
    const turn = this.requireTurn('endTurn');
    this.session.append({ type: 'turn/end', data: reason ? { turn, reason } : { turn } });
  }

  startStep(): { turn: number; step: number } {
    const turn = this.requireTurn('startStep');
    const step = this.session.lastStep + 1;
    this.session.append({ type: 'step/start', data: { turn, step } });
    return { turn, step };
  }

  endStep(reason?: EventData<'step/end'>['reason']): void {
    const open = this.session.openStep;
    if (!open) throw new SessionRuleError('step-not-open', 'endStep: no step is open.');
    this.session.append({ type: 'step/end', data: reason ? { ...open, reason } : { ...open } });
  }

  /**
   * Makes surface node 0 the given system prompt: appended on an empty surface, replaced
   * in place when the text changed (a content-only rewrite), untouched when equal.
   */
  system(text: string): SessionEvent<'system/message'> | undefined {
    const surface = this.session.surface;
    if (surface.length === 0) {
      return this.session.append({ type: 'system/message', data: { text }, surfaceOp: 'append' });
    }
    const head = this.session.event(surface.seqAt(0));
    if (head.type !== 'system/message') {
      throw new SessionRuleError(
        'system-prompt-late',
        'the system prompt must be surface node 0: record it (with request() or system()) before the first message.',
      );
    }
    if (head.data.text === text) return undefined;
    return this.session.append({
      type: 'system/message',
      data: { text },
      surfaceOp: { op: 'replace', start: head.seq, end: head.seq },
      sourceEventSeqs: [head.seq],
    });
  }

  user(content: UserContent, source?: string): SessionEvent<'user/message'> {
    const data: EventData<'user/message'> = { content: toBlocks(content) };
    if (source) data.source = source;
    return this.session.append({ type: 'user/message', data, surfaceOp: 'append' });
  }

  /** Records what the next request is routed to and built with (system prompt as node 0). */
  request(envelope: RequestEnvelope): SessionEvent<'request/header'> {
    objectArgument('request', 'a request envelope {provider, model, systemPrompt?, tools?, maxTokens?}', envelope);
    if (envelope.systemPrompt !== undefined) this.system(envelope.systemPrompt);
    const data: EventData<'request/header'> = {
      provider: envelope.provider,
      model: envelope.model,
      tools: (envelope.tools ?? []) as Record<string, unknown>[],
    };
    if (envelope.maxTokens !== undefined) data.maxTokens = envelope.maxTokens;
    if (envelope.contextWindow !== undefined) data.contextWindow = envelope.contextWindow;
    return this.session.append({ type: 'request/header', data });
  }

  assistant(reply: AssistantReply): SessionEvent<'assistant/message'> {
    objectArgument('assistant', 'a reply {text?, reasoning?, toolCalls?, usage?, …}', reply);
    const content: ContentBlock[] = [];
    if (reply.reasoning) content.push({ type: 'reasoning', text: reply.reasoning });
    if (reply.text) content.push({ type: 'text', text: reply.text });
    for (const c of reply.toolCalls ?? []) content.push({ type: 'tool-call', id: c.id, name: c.name, arguments: c.arguments });
    const data: EventData<'assistant/message'> = { content: content as EventData<'assistant/message'>['content'] };
    if (reply.provider) data.provider = reply.provider;
    if (reply.model) data.model = reply.model;
    if (reply.usage) data.usage = reply.usage;
    if (reply.finishReason) data.finishReason = reply.finishReason;
    return this.session.append({ type: 'assistant/message', data, surfaceOp: 'append' });
  }

  /** Records an OpenAI chat-completions reply (a non-streamed message or an accumulated stream). */
  assistantFromCompletion(
    message: CompletionMessage,
    given: { usage?: CompletionUsage | null; provider?: string; model?: string; finishReason?: string | null } | null = {},
  ): SessionEvent<'assistant/message'> {
    const meta = given ?? {};
    objectArgument('assistantFromCompletion', 'a completion message (choices[0].message)', message);
    const calls: unknown = message.tool_calls ?? [];
    if (!Array.isArray(calls)) {
      // A string would otherwise be walked character by character.
      throw new SessionRuleError('invalid-input', `assistantFromCompletion: message.tool_calls must be an array (or null); got ${typeof calls}.`);
    }
    const toolCalls: ToolCallBlock[] = [];
    for (const c of calls as CompletionToolCall[]) {
      if (typeof c !== 'object' || c === null) {
        throw new SessionRuleError(
          'invalid-input',
          `assistantFromCompletion: each tool call must be an object {id, type, function}; got ${c === null ? 'null' : typeof c}.`,
        );
      }
      if (c.type !== 'function' || c.function === undefined) {
        // Dropping it would leave the agent answering a call the log never saw.
        throw new SessionRuleError('unsupported-tool-call', `tool call "${c.id}" is of type "${c.type}": only function tool calls can be recorded.`);
      }
      toolCalls.push({ type: 'tool-call', id: c.id, name: c.function.name, arguments: c.function.arguments });
    }
    const reply: AssistantReply = { toolCalls };
    if (message.content) reply.text = message.content;
    if (message.reasoning_content) reply.reasoning = message.reasoning_content;
    if (meta.usage) reply.usage = usageFromOpenAI(meta.usage);
    if (meta.provider) reply.provider = meta.provider;
    if (meta.model) reply.model = meta.model;
    if (meta.finishReason) reply.finishReason = meta.finishReason;
    return this.assistant(reply);
  }

  toolResult(callId: string, content: UserContent, options: { isError?: boolean; toolName?: string } = {}): SessionEvent<'tool/result'> {
    const data: EventData<'tool/result'> = { callId, content: toBlocks(content) };
    if (options.toolName) data.toolName = options.toolName;
    if (options.isError) data.isError = true;
    return this.session.append({ type: 'tool/result', data, surfaceOp: 'append' });
  }

  private requireTurn(what: string): number {
    const turn = this.session.openTurn;
    if (turn === null) throw new SessionRuleError('turn-not-open', `${what}: no turn is open; call startTurn() first.`);
    return turn;
  }
}
