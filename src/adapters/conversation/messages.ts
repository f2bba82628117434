/**
 * The conversation as the session holds it, whatever face carried it: Chat Completions
 * messages, OpenAI Responses input items, Anthropic Messages content blocks, AI SDK prompt
 * messages. Each face maps its own input to these messages (drop-in/messages.ts,
 * responses/map.ts, anthropic/map.ts, ai-sdk/convert.ts) and builds its request from the
 * session's surface events, so a session recorded through one face continues through another:
 * the log holds no shape, only user messages, assistant messages (text, reasoning, tool calls,
 * each with the provider data it must carry back) and tool results.
 *
 * Provider data rides on the block's `providerOptions`, under the keys the AI SDK uses, so the
 * AI SDK adapter reads the same log: `openai.itemId` / `openai.reasoningEncryptedContent` on a
 * Responses reasoning item, `anthropic.signature` on a signed thinking block,
 * `anthropic.redactedData` on a redacted one. A shape that cannot send a block back (a signed
 * thinking block to OpenAI, an encrypted reasoning item to Anthropic) leaves it out whole; no
 * shape sends part of one.
 */
import { createHash } from 'node:crypto';
import type { ImageBlock, ProviderOptions, ReasoningBlock, SurfaceEvent, TextBlock, ToolCallBlock } from '../../session/events';

/** A message of any face, as the session records it. */
export type ConversationMessage =
  | { role: 'user'; content: Array<TextBlock | ImageBlock> }
  | { role: 'assistant'; blocks: Array<TextBlock | ReasoningBlock | ToolCallBlock> }
  | { role: 'tool'; callId: string; content: Array<TextBlock | ImageBlock>; isError?: boolean; toolName?: string; providerOptions?: ProviderOptions };

/** The tool calls of an assistant message. */
export const callsOf = (m: ConversationMessage): ToolCallBlock[] =>
  m.role === 'assistant' ? m.blocks.filter((b): b is ToolCallBlock => b.type === 'tool-call') : [];

/**
 * Tool-call arguments as one canonical JSON text: `{"a": 1}` and `{"a":1}` are one call (a shape
 * whose calls carry parsed input, Anthropic's `tool_use.input`, cannot give the bytes back).
 */
export function canonicalArguments(args: string): string {
  try {
    return JSON.stringify(JSON.parse(args));
  } catch {
    return args;
  }
}

/** Adjacent texts as one, joined as the session joins them; images by URL. */
function contentKey(content: ReadonlyArray<TextBlock | ImageBlock>): unknown[] {
  const out: unknown[] = [];
  for (const b of content) {
    const last = out[out.length - 1];
    if (b.type !== 'text') out.push(['image', b.url]);
    else if (typeof last === 'string') out[out.length - 1] = `${last}\n\n${b.text}`;
    else out.push(b.text);
  }
  return out;
}

/**
 * What identifies a message across faces and across a restart: role, text, images, tool calls
 * (id and name) and a result's call id and content. Reasoning, provider data and empty text
 * parts are left out: a caller may drop a reasoning item when passing a reply back (the
 * recorded one stays), and SDKs differ in the empty text parts they keep.
 */
export function fingerprint(m: ConversationMessage): string {
  let key: unknown[];
  switch (m.role) {
    case 'user':
      key = ['user', contentKey(m.content)];
      break;
    case 'assistant': {
      const text = m.blocks
        .filter((b): b is TextBlock => b.type === 'text' && b.text !== '')
        .map((b) => b.text)
        .join('\n\n');
      // A call is its id (unique in a session) and name: its arguments may come back re-serialized
      // (Anthropic's parsed `input`), or as a caller could read a call cut mid-arguments.
      key = ['assistant', text, callsOf(m).map((c) => [c.id, c.name])];
      break;
    }
    case 'tool':
      key = ['tool', m.callId, contentKey(m.content)];
      break;
  }
  return createHash('sha1').update(JSON.stringify(key)).digest('base64');
}

/** A reply with neither text nor tool calls: a caller may well not pass it back (a Responses reply with no output items). */
export const isEmptyReply = (m: ConversationMessage): boolean =>
  m.role === 'assistant' && !m.blocks.some((b) => b.type === 'tool-call' || (b.type === 'text' && b.text !== ''));

/** A recorded message event as a conversation message (the inverse of recording it). */
export function messageOf(e: SurfaceEvent): ConversationMessage {
  switch (e.type) {
    case 'user/message':
      return { role: 'user', content: e.data.content };
    case 'assistant/message':
      return { role: 'assistant', blocks: e.data.content };
    case 'tool/result':
      return {
        role: 'tool',
        callId: e.data.callId,
        content: e.data.content.filter((b): b is TextBlock | ImageBlock => b.type === 'text' || b.type === 'image'),
        ...(e.data.isError ? { isError: true } : {}),
        ...(e.data.toolName ? { toolName: e.data.toolName } : {}),
        ...(e.data.providerOptions ? { providerOptions: e.data.providerOptions } : {}),
      };
    case 'system/message':
      throw new Error('unreachable: a system prompt is not a conversation message');
  }
}

/** A tool definition in the Chat Completions shape (what the session's request header keeps, whatever face sent it). */
export function chatTool(name: string, description: string | undefined, parameters: unknown): Record<string, unknown> {
  return { type: 'function', function: { name, ...(description ? { description } : {}), parameters: parameters ?? { type: 'object', properties: {} } } };
}

/** JSON copy: the session freezes what it records, and the caller's objects stay the caller's. */
export const jsonCopy = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/** Text of text blocks, joined as the session joins them. */
export const joinedText = (blocks: ReadonlyArray<{ type: string; text?: string }>): string =>
  blocks
    .filter((b) => b.type === 'text')
    .map((b) => b.text ?? '')
    .join('\n\n');
