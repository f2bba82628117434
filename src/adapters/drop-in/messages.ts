/**
 * Chat Completions messages ↔ the conversation's messages (conversation/messages.ts): what
 * each of the caller's messages is as the session holds it (mapped before anything is written,
 * so a message the session cannot hold changes nothing), and the recorded conversation handed
 * back as messages. What else an SDK object carries (`refusal`, `annotations`, `audio`) is left
 * out, so the caller may push `choice.message` as it came back.
 */
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { toChatMessage } from '../../session/derive';
import type { ImageBlock, ReasoningBlock, SurfaceEvent, TextBlock, ToolCallBlock } from '../../session/events';
import { currentSystemPrompt, recordedMessages } from '../../session/recorded';
import type { Session } from '../../session/session';
import type { CompletionMessage } from '../../session/writer';
import { ConversationError, type ConversationMessage } from '../conversation';

type Part = { type?: unknown; text?: unknown; refusal?: unknown; image_url?: { url?: unknown; detail?: unknown } };

const isSystem = (m: ChatCompletionMessageParam): boolean => m.role === 'system' || m.role === 'developer';

/** The leading system (or developer) messages: the system prompt, as one text. */
export function splitSystem(messages: readonly ChatCompletionMessageParam[]): { system: string | undefined; rest: readonly ChatCompletionMessageParam[] } {
  let i = 0;
  const texts: string[] = [];
  for (; i < messages.length && isSystem(messages[i]!); i++) texts.push(textOf(messages[i]!.content, 'a system message'));
  return { system: i === 0 ? undefined : texts.join('\n\n'), rest: messages.slice(i) };
}

function textOf(content: unknown, where: string): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw unmappable(where, `content of type ${typeof content}`);
  return (content as Part[])
    .map((p) => {
      if (p.type === 'text' && typeof p.text === 'string') return p.text;
      if (p.type === 'refusal' && typeof p.refusal === 'string') return p.refusal;
      throw unmappable(where, `a "${String(p.type)}" part`);
    })
    .join('\n\n');
}

function blocksOf(content: unknown, where: string): Array<TextBlock | ImageBlock> {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content) || content.length === 0) throw unmappable(where, 'empty content');
  return (content as Part[]).map((p): TextBlock | ImageBlock => {
    if (p.type === 'text' && typeof p.text === 'string') return { type: 'text', text: p.text };
    if (p.type === 'image_url' && typeof p.image_url?.url === 'string') {
      const detail = p.image_url.detail;
      return detail === 'low' || detail === 'high' || detail === 'auto'
        ? { type: 'image', url: p.image_url.url, detail }
        : { type: 'image', url: p.image_url.url };
    }
    throw unmappable(where, `a "${String(p.type)}" part`);
  });
}

const unmappable = (where: string, what: string): ConversationError =>
  new ConversationError(
    'unmappable-part',
    `xcompact cannot record ${what} in ${where}: the session keeps text, images (image_url) and function tool calls; nothing was recorded or sent`,
  );

/** One of the caller's (non-system) messages as the session will record it; throws ConversationError('unmappable-part'). */
export function mapMessage(m: ChatCompletionMessageParam, index: number): ConversationMessage {
  const where = `message ${index} (${String((m as { role?: unknown } | null)?.role)})`;
  if (typeof m !== 'object' || m === null) throw invalid(`message ${index} is ${m === null ? 'null' : typeof m}, not a message object`);
  switch (m.role) {
    case 'user':
      return { role: 'user', content: blocksOf(m.content, where) };
    case 'assistant': {
      const calls: unknown = m.tool_calls ?? [];
      if (!Array.isArray(calls)) throw invalid(`${where}: tool_calls is ${typeof calls}, not an array`);
      const blocks: Array<TextBlock | ReasoningBlock | ToolCallBlock> = [];
      const text = textOf(m.content, where);
      if (text !== '') blocks.push({ type: 'text', text });
      for (const c of calls as Array<{ id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } }>) {
        if (c?.type !== 'function' || typeof c.function !== 'object' || c.function === null)
          throw unmappable(where, `tool call "${String(c?.id)}" of type "${String(c?.type)}"`);
        if (typeof c.id !== 'string' || c.id === '' || typeof c.function.name !== 'string' || c.function.name === '')
          throw invalid(`${where}: a tool call needs a non-empty id and function.name`);
        if (typeof c.function.arguments !== 'string')
          throw invalid(`${where}: tool call "${c.id}" has arguments of type ${typeof c.function.arguments}, not a JSON text`);
        blocks.push({ type: 'tool-call', id: c.id, name: c.function.name, arguments: c.function.arguments });
      }
      return { role: 'assistant', blocks };
    }
    case 'tool':
      if (typeof m.tool_call_id !== 'string' || m.tool_call_id === '') throw invalid(`${where}: a tool message needs its tool_call_id`);
      return {
        role: 'tool',
        callId: m.tool_call_id,
        content: typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : blocksOf(m.content, where),
      };
    case 'system':
    case 'developer':
      throw new ConversationError(
        'unmappable-part',
        `xcompact cannot record a ${m.role} message in the middle of the conversation (${where}): only leading system messages are kept, as the system prompt; send later instructions as a user message. Nothing was recorded or sent`,
      );
    default:
      throw unmappable(where, `a message of role "${String((m as { role: unknown }).role)}"`);
  }
}

const invalid = (what: string): ConversationError => new ConversationError('invalid-request', `${what}; nothing was recorded or sent`);

/** A chat-completions reply (a non-streamed message, or an accumulated stream) as the conversation records it. */
export function replyBlocks(message: CompletionMessage): Array<TextBlock | ReasoningBlock | ToolCallBlock> {
  const blocks: Array<TextBlock | ReasoningBlock | ToolCallBlock> = [];
  if (message.reasoning_content) blocks.push({ type: 'reasoning', text: message.reasoning_content });
  if (message.content) blocks.push({ type: 'text', text: message.content });
  const calls: unknown = message.tool_calls ?? [];
  if (!Array.isArray(calls)) throw invalid(`the reply's tool_calls is ${typeof calls}, not an array`);
  for (const c of calls as Array<{ id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } }>) {
    // Dropping it would leave the agent answering a call the log never saw.
    if (c?.type !== 'function' || typeof c.function !== 'object' || c.function === null)
      throw unmappable('the reply', `tool call "${String(c?.id)}" of type "${String(c?.type)}"`);
    blocks.push({ type: 'tool-call', id: String(c.id), name: String(c.function.name), arguments: String(c.function.arguments ?? '') });
  }
  return blocks;
}

/**
 * The messages to continue a recorded conversation with (e.g. after a restart): the current
 * system prompt, then every message as it was recorded. Pass them, plus what is new, to the
 * wrapped client's `create`, as before.
 */
export function sessionMessages(session: Session): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  const system = currentSystemPrompt(session);
  if (system !== undefined) out.push({ role: 'system', content: system });
  for (const e of recordedMessages(session)) out.push(asRecorded(e, toChatMessage(e)));
  return out;
}

/** A cut tool call is sent repaired (derive.ts), but handed back as recorded: what the caller passed, so it is matched again. */
function asRecorded(e: SurfaceEvent, m: ChatCompletionMessageParam): ChatCompletionMessageParam {
  if (m.role !== 'assistant' || !m.tool_calls || e.type !== 'assistant/message') return m;
  const recorded = new Map(e.data.content.flatMap((b) => (b.type === 'tool-call' ? [[b.id, b.arguments] as const] : [])));
  return {
    ...m,
    tool_calls: m.tool_calls.map((c) =>
      c.type === 'function' && recorded.has(c.id) ? { ...c, function: { ...c.function, arguments: recorded.get(c.id)! } } : c,
    ),
  };
}
