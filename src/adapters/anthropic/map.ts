/**
 * Anthropic Messages (`@anthropic-ai/sdk` `MessageParam`s and content blocks) ↔ the
 * conversation's messages (conversation/messages.ts): `messagesOfAnthropic` reads messages,
 * `anthropicMessagesOf` writes the surface back.
 *
 * A user message is its `tool_result` blocks (each one tool result, in order) and then, if any,
 * the rest of its blocks as one user message; consecutive user-side messages are merged back
 * into one (results first), as Anthropic wants them. An assistant message keeps its blocks in
 * order: `text`, `tool_use`, and `thinking` kept verbatim with its `signature`
 * (`providerOptions.anthropic.signature`, as the AI SDK keeps it) or `redacted_thinking` with its
 * data (`anthropic.redactedData`): a thinking block goes back unchanged with its turn, or not at
 * all when a checkpoint shadowed the turn; reasoning without a signature (another provider's) is
 * not sent. `cache_control` breakpoints are the caller's, per call: `CacheMarks` say where they
 * were, and the request built puts them back on the same blocks (module comment of
 * anthropic/client.ts).
 */
import { sendableArguments } from '../../session/derive';
import type { ImageBlock, ProviderOptions, ReasoningBlock, SurfaceEvent, TextBlock, ToolCallBlock, Usage } from '../../session/events';
import { chatTool, ConversationError, jsonCopy, joinedText, type ConversationMessage, type Reply } from '../conversation';

/** An Anthropic message / block as this mapping reads it (the SDK's `MessageParam` and `ContentBlock` are accepted as they are). */
export type AnthropicBlock = { type: string; [key: string]: unknown };
export type AnthropicMessage = { role: string; content: string | AnthropicBlock[] };

/** Where the caller's breakpoints are: per mapped message, the block index (−1: a tool result's own block) and its `cache_control`. */
export type CacheMarks = Map<number, Array<{ block: number; cacheControl: unknown }>>;

const unmappable = (where: string, what: string): ConversationError =>
  new ConversationError(
    'unmappable-part',
    `xcompact cannot record ${what} in ${where}: the session keeps text, images, tool_use / tool_result, and thinking blocks; nothing was recorded or sent`,
  );

/** The system prompt's text (a string, or text blocks joined). */
export function anthropicSystemText(system: unknown): string | undefined {
  if (system === undefined || system === null) return undefined;
  if (typeof system === 'string') return system;
  if (Array.isArray(system)) return joinedText(system as AnthropicBlock[] as Array<{ type: string; text?: string }>);
  throw unmappable('the system prompt', `a system of type ${typeof system}`);
}

function imageOf(b: AnthropicBlock, where: string): ImageBlock {
  const s = b['source'] as { type?: string; media_type?: string; data?: string; url?: string } | undefined;
  if (s?.type === 'base64' && typeof s.data === 'string') return { type: 'image', url: `data:${s.media_type ?? 'image/png'};base64,${s.data}` };
  if (s?.type === 'url' && typeof s.url === 'string') return { type: 'image', url: s.url };
  throw unmappable(where, `an image given as ${String(s?.type)} (a file the provider holds)`);
}

function contentBlocks(content: unknown, where: string): Array<TextBlock | ImageBlock> {
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return (content as AnthropicBlock[]).map((b) => {
    if (b.type === 'text' && typeof b['text'] === 'string') return { type: 'text', text: b['text'] } as TextBlock;
    if (b.type === 'image') return imageOf(b, where);
    throw unmappable(where, `a "${b.type}" block`);
  });
}

/** `tool_use.input` as the raw JSON the session keeps. */
const argumentsOf = (input: unknown): string => (typeof input === 'string' ? input : JSON.stringify(input ?? {}));

/** One assistant block as a session block; undefined for a block the session cannot hold. */
function assistantBlock(b: AnthropicBlock): TextBlock | ReasoningBlock | ToolCallBlock | undefined {
  switch (b.type) {
    case 'text':
      return typeof b['text'] === 'string' ? { type: 'text', text: b['text'] } : undefined;
    case 'tool_use':
      return typeof b['id'] === 'string' && typeof b['name'] === 'string'
        ? { type: 'tool-call', id: b['id'], name: b['name'], arguments: argumentsOf(b['input']) }
        : undefined;
    case 'thinking':
      return {
        type: 'reasoning',
        text: typeof b['thinking'] === 'string' ? b['thinking'] : '',
        ...(typeof b['signature'] === 'string' ? { providerOptions: { anthropic: { signature: b['signature'] } } } : {}),
      };
    case 'redacted_thinking':
      return typeof b['data'] === 'string' ? { type: 'reasoning', text: '', providerOptions: { anthropic: { redactedData: b['data'] } } } : undefined;
    default:
      return undefined;
  }
}

/**
 * The caller's messages as the session's, with where its `cache_control` breakpoints are; throws
 * `ConversationError('unmappable-part')` for a block the session cannot hold (documents, server tools).
 */
export function messagesOfAnthropic(messages: readonly AnthropicMessage[]): { messages: ConversationMessage[]; cache: CacheMarks } {
  const out: ConversationMessage[] = [];
  const cache: CacheMarks = new Map();
  const mark = (index: number, block: number, b: AnthropicBlock) => {
    if (b['cache_control'] === undefined || b['cache_control'] === null) return;
    const list = cache.get(index) ?? [];
    list.push({ block, cacheControl: jsonCopy(b['cache_control']) });
    cache.set(index, list);
  };
  messages.forEach((m, i) => {
    if (typeof m !== 'object' || m === null)
      throw new ConversationError('invalid-request', `message ${i} is ${m === null ? 'null' : typeof m}, not a message object; nothing was recorded or sent`);
    const where = `message ${i} (${String(m.role)})`;
    if (typeof m.content !== 'string' && !Array.isArray(m.content))
      throw new ConversationError(
        'invalid-request',
        `${where}: content is ${m.content === null ? 'null' : typeof m.content}; give a string or an array of content blocks. Nothing was recorded or sent`,
      );
    const blocks: AnthropicBlock[] = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
    if (m.role === 'assistant') {
      const mapped: Array<TextBlock | ReasoningBlock | ToolCallBlock> = [];
      const at = out.length;
      for (const b of blocks) {
        const s = assistantBlock(b);
        if (!s) throw unmappable(where, `a "${b.type}" block`);
        if (s.type === 'text' && s.text === '') continue;
        mark(at, mapped.length, b);
        mapped.push(s);
      }
      out.push({ role: 'assistant', blocks: mapped });
      return;
    }
    if (m.role !== 'user') throw unmappable(where, `a message of role "${m.role}"`);
    const rest: Array<TextBlock | ImageBlock> = [];
    const restBlocks: AnthropicBlock[] = [];
    for (const b of blocks) {
      if (b.type === 'tool_result') {
        if (typeof b['tool_use_id'] !== 'string') throw unmappable(where, 'a tool_result without tool_use_id');
        mark(out.length, -1, b);
        out.push({ role: 'tool', callId: b['tool_use_id'], content: contentBlocks(b['content'], where), ...(b['is_error'] === true ? { isError: true } : {}) });
      } else {
        rest.push(...contentBlocks([b], where));
        restBlocks.push(b);
      }
    }
    if (rest.length > 0) {
      restBlocks.forEach((b, k) => mark(out.length, k, b));
      out.push({ role: 'user', content: rest });
    }
  });
  return { messages: out, cache };
}

function imageParam(b: ImageBlock): AnthropicBlock {
  const m = /^data:([^;,]+);base64,(.*)$/is.exec(b.url);
  return m ? { type: 'image', source: { type: 'base64', media_type: m[1], data: m[2] } } : { type: 'image', source: { type: 'url', url: b.url } };
}

const anthropicOf = (b: { providerOptions?: ProviderOptions | undefined }): Record<string, unknown> | undefined => b.providerOptions?.['anthropic'];

/** A tool call's arguments as `tool_use.input`: an object (a cut call's, the session's repair: session/derive.ts). */
const inputOf = (args: string): unknown => JSON.parse(sendableArguments(args)) as unknown;

/**
 * The surface as Anthropic messages, and the system prompt apart. `marks` (by event seq) put the
 * caller's breakpoints back on their blocks; `checkpointMark`, when given, is put on the last
 * block of the newest checkpoint, so the summarized prefix is cached too.
 */
export function anthropicMessagesOf(
  events: Iterable<SurfaceEvent>,
  marks: Map<number, Array<{ block: number; cacheControl: unknown }>> = new Map(),
  checkpointMark?: unknown,
): { system: string | undefined; messages: AnthropicMessage[] } {
  let system: string | undefined;
  const messages: Array<{ role: string; content: AnthropicBlock[] }> = [];
  let checkpointBlock: AnthropicBlock | undefined;
  const push = (role: 'user' | 'assistant', blocks: AnthropicBlock[], toolResults = false) => {
    if (blocks.length === 0) return;
    const last = messages[messages.length - 1];
    if (last?.role === role) {
      // Results first in a user message: a result after text would answer nothing.
      if (toolResults) {
        const firstOther = last.content.findIndex((b) => b.type !== 'tool_result');
        if (firstOther >= 0) return void last.content.splice(firstOther, 0, ...blocks);
      }
      return void last.content.push(...blocks);
    }
    messages.push({ role, content: blocks });
  };
  const withMark = (seq: number, block: number, b: AnthropicBlock): AnthropicBlock => {
    const m = marks.get(seq)?.find((x) => x.block === block);
    return m ? { ...b, cache_control: jsonCopy(m.cacheControl) } : b;
  };
  for (const e of events) {
    switch (e.type) {
      case 'system/message':
        system = e.data.text;
        break;
      case 'user/message': {
        const blocks = e.data.content.map((b, k) => withMark(e.seq, k, b.type === 'text' ? { type: 'text', text: b.text } : imageParam(b)));
        if (e.data.source !== undefined) checkpointBlock = blocks[blocks.length - 1];
        push('user', blocks);
        break;
      }
      case 'assistant/message': {
        const blocks: AnthropicBlock[] = [];
        e.data.content.forEach((b, k) => {
          let out: AnthropicBlock | undefined;
          if (b.type === 'text') out = b.text === '' ? undefined : { type: 'text', text: b.text };
          else if (b.type === 'tool-call') out = { type: 'tool_use', id: b.id, name: b.name, input: inputOf(b.arguments) };
          else {
            const a = anthropicOf(b);
            if (typeof a?.['signature'] === 'string') out = { type: 'thinking', thinking: b.text, signature: a['signature'] };
            else if (typeof a?.['redactedData'] === 'string') out = { type: 'redacted_thinking', data: a['redactedData'] };
          }
          if (out) blocks.push(withMark(e.seq, k, out));
        });
        push('assistant', blocks);
        break;
      }
      case 'tool/result': {
        const content = e.data.content.map((b) => (b.type === 'text' ? { type: 'text', text: b.text } : imageParam(b)));
        const block: AnthropicBlock = {
          type: 'tool_result',
          tool_use_id: e.data.callId,
          content: content.length === 0 ? '' : content,
          ...(e.data.isError ? { is_error: true } : {}),
        };
        push('user', [withMark(e.seq, -1, block)], true);
        break;
      }
    }
  }
  if (checkpointMark !== undefined && checkpointBlock && checkpointBlock['cache_control'] === undefined)
    checkpointBlock['cache_control'] = jsonCopy(checkpointMark);
  return { system, messages };
}

/** Anthropic tools in the Chat Completions shape (what the session's request header keeps). */
export function chatToolsOfAnthropic(tools: unknown): Array<Record<string, unknown>> {
  if (!Array.isArray(tools)) return [];
  return (tools as Array<Record<string, unknown>>).map((t) =>
    typeof t['name'] === 'string' && t['input_schema'] !== undefined
      ? chatTool(t['name'], t['description'] as string | undefined, t['input_schema'])
      : jsonCopy(t),
  );
}

/** Chat Completions tools (a request header's) as Anthropic tools. */
export function anthropicToolsOfChat(tools: ReadonlyArray<Record<string, unknown>>): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const t of tools) {
    const fn = t['function'] as { name?: string; description?: string; parameters?: unknown } | undefined;
    if (t['type'] === 'function' && fn?.name)
      out.push({
        name: fn.name,
        ...(fn.description ? { description: fn.description } : {}),
        input_schema: fn.parameters ?? { type: 'object', properties: {} },
      });
  }
  return out;
}

/** Anthropic usage → the session's (prompt = input + cache reads + cache writes, as OpenAI counts it). */
export function usageOfAnthropic(u: unknown): Usage | undefined {
  if (typeof u !== 'object' || u === null) return undefined;
  const r = u as { input_tokens?: unknown; output_tokens?: unknown; cache_read_input_tokens?: unknown; cache_creation_input_tokens?: unknown };
  if (typeof r.input_tokens !== 'number') return undefined;
  const read = typeof r.cache_read_input_tokens === 'number' ? r.cache_read_input_tokens : 0;
  const write = typeof r.cache_creation_input_tokens === 'number' ? r.cache_creation_input_tokens : 0;
  const usage: Usage = { promptTokens: r.input_tokens + read + write, completionTokens: typeof r.output_tokens === 'number' ? r.output_tokens : 0 };
  if (typeof r.cache_read_input_tokens === 'number') usage.cachedTokens = read;
  if (typeof r.cache_creation_input_tokens === 'number') usage.cacheWriteTokens = write;
  return usage;
}

/** A stop reason in the Chat Completions vocabulary the session's other readers know. */
export function finishReasonOf(stop: unknown): string | undefined {
  if (typeof stop !== 'string') return undefined;
  return (
    (
      { end_turn: 'stop', stop_sequence: 'stop', tool_use: 'tool_calls', max_tokens: 'length', model_context_window_exceeded: 'length' } as Record<
        string,
        string
      >
    )[stop] ?? stop
  );
}

/** A reply (`messages.create`, or an accumulated stream) as the reply to record; throws for a block the session cannot hold. */
export function replyOfAnthropicMessage(message: { content?: unknown; usage?: unknown; model?: unknown; stop_reason?: unknown }): Reply {
  const blocks: Reply['blocks'] = [];
  for (const b of (Array.isArray(message.content) ? message.content : []) as AnthropicBlock[]) {
    const s = assistantBlock(b);
    if (!s) throw unmappable('the model reply', `a "${b.type}" block`);
    if (s.type === 'text' && s.text === '') continue;
    blocks.push(s);
  }
  const usage = usageOfAnthropic(message.usage);
  const finishReason = finishReasonOf(message.stop_reason);
  return {
    blocks,
    ...(usage ? { usage } : {}),
    ...(typeof message.model === 'string' && message.model !== '' ? { model: message.model } : {}),
    ...(finishReason ? { finishReason } : {}),
  };
}
