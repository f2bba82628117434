/**
 * What one off-surface message contributes to recall: its original text, and where it was
 * (turn, tool call, how it left the context). Pure functions over logged events.
 */
import { isCheckpoint, toolCallsOf, type SessionEvent, type ToolCallBlock } from '../../session/events';
import { RECALL_TOOL_NAME } from './handles';

export type RecallSource = 'tool-result' | 'assistant' | 'user';

export interface RecallEntry {
  /** The seq of the original event (never a replacement's). */
  readonly seq: number;
  readonly source: RecallSource;
  /** The original text: what recall searches and returns. */
  readonly text: string;
  readonly turn: number | null;
  /** A tool result's call id. */
  readonly callId?: string;
  /** A tool result's tool name (from the result, else from its call). */
  readonly toolName?: string;
  /** The arguments of the call a tool result answers, when the call was found. */
  readonly callArguments?: string;
  /** `pr-N` when a prune took it off the surface. */
  readonly pruned?: string;
  /** `cp-N` of the checkpoint that shadowed it (or shadowed its pruned rewrite). */
  checkpoint?: string;
}

/** How far back a tool result's call is looked for (a call and its result are close in any real log). */
const CALL_LOOKBACK = 2_000;

function blockText(blocks: readonly { type: string; text?: string }[]): string {
  // One text block (the usual tool output): its own string, not a copy.
  if (blocks.length === 1 && blocks[0]!.type === 'text') return blocks[0]!.text ?? '';
  const parts: string[] = [];
  for (const b of blocks) {
    if (b.type === 'text' && b.text !== undefined) parts.push(b.text);
    else if (b.type === 'image') parts.push('[image]');
  }
  return parts.join('\n');
}

/**
 * A call as the model reads it back: its JSON arguments as sent when they hold no escapes;
 * otherwise one `key: value` per field with strings decoded, so a written file or a quoted
 * command is found (and shown) as the text it is, not as `\n`- and `\"`-escaped JSON.
 */
function callText(call: ToolCallBlock): string {
  if (!call.arguments.includes('\\')) return `→ ${call.name} ${call.arguments}`;
  let args: unknown;
  try {
    args = JSON.parse(call.arguments);
  } catch {
    return `→ ${call.name} ${call.arguments}`;
  }
  const lines = [`→ ${call.name}`];
  const walk = (v: unknown, key: string): void => {
    if (typeof v === 'string') lines.push(v.includes('\n') ? `${key}:\n${v}` : `${key}: ${v}`);
    else if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${key}[${i}]`));
    else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, key === '' ? k : `${key}.${k}`);
    else lines.push(`${key}: ${JSON.stringify(v)}`);
  };
  walk(args, '');
  return lines.join('\n');
}

/** Renders an assistant message's text and calls (recall's own calls left out: they hold nothing to recall). */
function assistantText(event: SessionEvent<'assistant/message'>): string {
  const parts: string[] = [];
  for (const b of event.data.content) {
    if (b.type === 'text') parts.push(b.text);
    else if (b.type === 'tool-call' && b.name !== RECALL_TOOL_NAME) parts.push(callText(b));
  }
  return parts.join('\n');
}

/** The call a tool result answers, looked for backwards from the result. */
export function findCall(events: readonly SessionEvent[], resultSeq: number, callId: string): ToolCallBlock | undefined {
  const stop = Math.max(0, resultSeq - CALL_LOOKBACK);
  for (let s = resultSeq - 1; s >= stop; s--) {
    const e = events[s]!;
    if (e.type !== 'assistant/message') continue;
    for (const call of toolCallsOf(e)) if (call.id === callId) return call;
  }
  return undefined;
}

/**
 * The entry for an original event, or undefined when it holds nothing to recall: a checkpoint
 * (its text is a summary; its originals are entries of their own), a recall result (its text
 * is copies of other entries: recalling it again gives those originals, never nested frames),
 * a system prompt, an empty message.
 */
export function entryOf(events: readonly SessionEvent[], event: SessionEvent, turn: number | null): Omit<RecallEntry, 'pruned' | 'checkpoint'> | undefined {
  switch (event.type) {
    case 'tool/result': {
      const call = findCall(events, event.seq, event.data.callId);
      const toolName = event.data.toolName ?? call?.name;
      if (toolName === RECALL_TOOL_NAME) return undefined;
      const text = blockText(event.data.content);
      if (text.length === 0) return undefined;
      return {
        seq: event.seq,
        source: 'tool-result',
        text,
        turn,
        callId: event.data.callId,
        ...(toolName !== undefined ? { toolName } : {}),
        ...(call ? { callArguments: call.arguments } : {}),
      };
    }
    case 'assistant/message': {
      const text = assistantText(event);
      return text.length === 0 ? undefined : { seq: event.seq, source: 'assistant', text, turn };
    }
    case 'user/message': {
      if (isCheckpoint(event)) return undefined;
      const text = blockText(event.data.content);
      return text.length === 0 ? undefined : { seq: event.seq, source: 'user', text, turn };
    }
    default:
      return undefined;
  }
}
