/**
 * Surface events → OpenAI chat-completions message params, one node at a time.
 * The projection is pure and deterministic, so each node's message is cached once.
 */
import type { ChatCompletionContentPart, ChatCompletionMessageParam, ChatCompletionMessageToolCall } from 'openai/resources/chat/completions';
import type { ContentBlock, SurfaceEvent } from './events';

export type ChatMessage = ChatCompletionMessageParam;

/** Text blocks of one message are joined with a blank line: the boundary stays visible to the model. */
const BLOCK_SEPARATOR = '\n\n';

function textOf(blocks: readonly ContentBlock[]): string {
  let out = '';
  let first = true;
  for (const b of blocks) {
    if (b.type !== 'text') continue;
    out += first ? b.text : BLOCK_SEPARATOR + b.text;
    first = false;
  }
  return out;
}

function hasImage(blocks: readonly ContentBlock[]): boolean {
  return blocks.some((b) => b.type === 'image');
}

function userContent(blocks: readonly ContentBlock[]): string | ChatCompletionContentPart[] {
  // Plain strings are what every OpenAI-compatible server accepts; parts only when an image needs them.
  if (!hasImage(blocks)) return textOf(blocks);
  const parts: ChatCompletionContentPart[] = [];
  for (const b of blocks) {
    if (b.type === 'text') parts.push({ type: 'text', text: b.text });
    else if (b.type === 'image') {
      parts.push({ type: 'image_url', image_url: b.detail ? { url: b.url, detail: b.detail } : { url: b.url } });
    }
  }
  return parts;
}

/**
 * Tool messages carry text only in the chat-completions API; an image in a tool result is
 * named in place so the model knows something was there.
 */
function toolContent(blocks: readonly ContentBlock[]): string {
  let out = '';
  let first = true;
  for (const b of blocks) {
    const piece = b.type === 'text' ? b.text : b.type === 'image' ? '[image omitted: tool messages carry text only]' : '';
    if (b.type !== 'text' && b.type !== 'image') continue;
    out += first ? piece : BLOCK_SEPARATOR + piece;
    first = false;
  }
  return out;
}

/**
 * A tool call whose `arguments` are not a JSON object's text: a reply cut inside the call (the
 * output cap or the context ran out mid-arguments, `finish_reason` `length`; llama.cpp then
 * returns `"{"`), or a model that wrote garbage. The log keeps it as it came (the fact, and
 * what a caller replaying its own messages passes back); it is never sent as it is, because a
 * strict server refuses every later request whose history holds it (llama.cpp: 500 "Failed to
 * parse tool call arguments as JSON", summaries included).
 */
export function isCutToolCall(args: string): boolean {
  try {
    const value: unknown = JSON.parse(args);
    return typeof value !== 'object' || value === null || Array.isArray(value);
  } catch {
    return true;
  }
}

/**
 * What a cut call's arguments are sent as: an empty object, so the history is valid for any
 * server. Its result (recorded by the agent: typically the error its own parse of the arguments
 * raised) stays paired with it, so the model sees its call failed and can make it again.
 */
export const CUT_CALL_ARGUMENTS = '{}';

/** A tool call's arguments as sent: the recorded text, or {@link CUT_CALL_ARGUMENTS} for a cut call. */
export function sendableArguments(args: string): string {
  return isCutToolCall(args) ? CUT_CALL_ARGUMENTS : args;
}

export function toChatMessage(event: SurfaceEvent): ChatMessage {
  switch (event.type) {
    case 'system/message':
      return { role: 'system', content: event.data.text };
    case 'user/message':
      return { role: 'user', content: userContent(event.data.content) };
    case 'assistant/message': {
      const toolCalls: ChatCompletionMessageToolCall[] = [];
      for (const b of event.data.content) {
        if (b.type === 'tool-call') {
          toolCalls.push({ id: b.id, type: 'function', function: { name: b.name, arguments: sendableArguments(b.arguments) } });
        }
      }
      const text = textOf(event.data.content);
      // Reasoning is never sent back: providers reject or ignore it in history.
      if (toolCalls.length === 0) return { role: 'assistant', content: text };
      return { role: 'assistant', content: text === '' ? null : text, tool_calls: toolCalls };
    }
    case 'tool/result':
      return { role: 'tool', tool_call_id: event.data.callId, content: toolContent(event.data.content) };
  }
}
