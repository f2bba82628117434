/**
 * The caller's chat-completions messages and the session's record of them: what each message
 * is as the session holds it (mapped before anything is written, so a message the session
 * cannot hold changes nothing), and one fingerprint per message, equal for a message the
 * caller passes and the same message read back from the log.
 *
 * A fingerprint reads only what the session keeps and sends: the role, the text (parts joined
 * as the session joins them), images by URL, tool calls by id, name and arguments, and a tool
 * result's call id. Everything else an SDK object carries (`refusal`, `annotations`, `audio`,
 * reasoning) is left out, so the caller may push `choice.message` as it came back.
 */
import { createHash } from 'node:crypto';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { toChatMessage } from '../../session/derive';
import type { ImageBlock, SurfaceEvent, TextBlock } from '../../session/events';
import { currentSystemPrompt, recordedMessages } from '../../session/recorded';
import type { Session } from '../../session/session';
import { DropInError } from './errors';

/** A caller's message as the session records it. */
export type MappedMessage =
  | { role: 'user'; content: Array<TextBlock | ImageBlock> }
  | { role: 'assistant'; text: string; toolCalls: Array<{ id: string; name: string; arguments: string }> }
  | { role: 'tool'; callId: string; content: Array<TextBlock | ImageBlock> };

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

const unmappable = (where: string, what: string): DropInError =>
  new DropInError(
    'unmappable-part',
    `xcompact cannot record ${what} in ${where}: the session keeps text, images (image_url) and function tool calls; nothing was recorded or sent`,
  );

/** One of the caller's (non-system) messages as the session will record it; throws DropInError('unmappable-part'). */
export function mapMessage(m: ChatCompletionMessageParam, index: number): MappedMessage {
  const where = `message ${index} (${m.role})`;
  switch (m.role) {
    case 'user':
      return { role: 'user', content: blocksOf(m.content, where) };
    case 'assistant': {
      const toolCalls = (m.tool_calls ?? []).map((c) => {
        if (c.type !== 'function' || !('function' in c)) throw unmappable(where, `tool call "${c.id}" of type "${c.type}"`);
        return { id: c.id, name: c.function.name, arguments: c.function.arguments };
      });
      return { role: 'assistant', text: textOf(m.content, where), toolCalls };
    }
    case 'tool':
      return {
        role: 'tool',
        callId: m.tool_call_id,
        content: typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : blocksOf(m.content, where),
      };
    case 'system':
    case 'developer':
      throw new DropInError(
        'unmappable-part',
        `xcompact cannot record a ${m.role} message in the middle of the conversation (${where}): only leading system messages are kept, as the system prompt; send later instructions as a user message. Nothing was recorded or sent`,
      );
    default:
      throw unmappable(where, `a message of role "${(m as { role: string }).role}"`);
  }
}

/** What identifies a mapped message: what the session keeps of it and sends. */
function keyOf(m: MappedMessage): unknown[] {
  // Adjacent texts as one, joined as the session joins them: "a" + "b" parts and the string "a\n\nb" are one message.
  const blocks = (content: Array<TextBlock | ImageBlock>) => {
    const out: unknown[] = [];
    for (const b of content) {
      const last = out[out.length - 1];
      if (b.type !== 'text') out.push(['image', b.url]);
      else if (typeof last === 'string') out[out.length - 1] = `${last}\n\n${b.text}`;
      else out.push(b.text);
    }
    return out;
  };
  switch (m.role) {
    case 'user':
      return ['user', blocks(m.content)];
    case 'assistant':
      return ['assistant', m.text, m.toolCalls.map((c) => [c.id, c.name, c.arguments])];
    case 'tool':
      return ['tool', m.callId, blocks(m.content)];
  }
}

export function fingerprint(m: MappedMessage): string {
  return createHash('sha1')
    .update(JSON.stringify(keyOf(m)))
    .digest('base64');
}

/** A recorded message event as the caller would have passed it. */
function mappedOf(e: SurfaceEvent): MappedMessage {
  switch (e.type) {
    case 'user/message':
      return { role: 'user', content: e.data.content };
    case 'assistant/message': {
      const text = e.data.content
        .filter((b): b is TextBlock => b.type === 'text')
        .map((b) => b.text)
        .join('\n\n');
      const toolCalls = e.data.content.flatMap((b) => (b.type === 'tool-call' ? [{ id: b.id, name: b.name, arguments: b.arguments }] : []));
      return { role: 'assistant', text, toolCalls };
    }
    case 'tool/result':
      return {
        role: 'tool',
        callId: e.data.callId,
        content: e.data.content.filter((b): b is TextBlock | ImageBlock => b.type === 'text' || b.type === 'image'),
      };
    case 'system/message':
      throw new Error('unreachable: system messages are not conversation messages');
  }
}

export const recordedFingerprint = (e: SurfaceEvent): string => fingerprint(mappedOf(e));

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
