/**
 * A surface node's price: the tokens of the message actually sent for it (content, tool-call
 * names and arguments, images) plus the tokenizer's chat framing. A pure function of the
 * tokenizer and the node, which is what lets the meter save prices with the log
 * (meter-snapshot.ts) and a summary request reuse them.
 */
import { toChatMessage, type ChatMessage } from '../../session/derive';
import type { SurfaceEvent } from '../../session/events';
import type { Session } from '../../session/session';
import { messageOverhead, type Tokenizer } from './tokenizer';

/** OpenAI prices a 1024×1024 high-detail image at 765 tokens and any low-detail one at 85. */
export const IMAGE_TOKENS = { low: 85, high: 765 } as const;

/** The node's price with `t`; the count of each of its texts (`textsOfMessage` order) is pushed to `counts`. */
/**
 * Prices every current surface node folded so far (seq below `folded`) into `prices` and
 * `counts` (cleared first); returns their total. Nodes appended after the event being folded are
 * priced when their own append folds. Surface order is not seq order (a checkpoint has a high seq
 * at an old position), so they are skipped rather than stopped at.
 */
export function priceSurface(session: Session, t: Tokenizer, folded: number, prices: Map<number, number>, counts: Map<number, number[]>): number {
  prices.clear();
  counts.clear();
  let total = 0;
  for (const seq of session.surface.seqs()) {
    if (seq >= folded) continue;
    const c: number[] = [];
    const p = priceNode(t, session.event(seq) as SurfaceEvent, c);
    prices.set(seq, p);
    counts.set(seq, c);
    total += p;
  }
  return total;
}

export function priceNode(t: Tokenizer, event: Pick<SurfaceEvent, 'type' | 'data'>, counts?: number[]): number {
  return priceMessage(t, toChatMessage(event as SurfaceEvent), blockCount(event), counts);
}

function priceMessage(t: Tokenizer, message: ChatMessage, blocks: number, counts: number[] | undefined): number {
  let tokens = 0;
  for (const text of textsOfMessage(message)) {
    const n = t.count(text);
    counts?.push(n);
    tokens += n;
  }
  const content = message.content;
  if (Array.isArray(content)) {
    for (const part of content) {
      if (part.type === 'image_url') tokens += part.image_url.detail === 'low' ? IMAGE_TOKENS.low : IMAGE_TOKENS.high;
    }
  }
  let toolCalls = 0;
  if (message.role === 'assistant' && message.tool_calls) for (const call of message.tool_calls) if (call.type === 'function') toolCalls++;
  return tokens + messageOverhead(t.overhead, { role: message.role as 'system' | 'user' | 'assistant' | 'tool', toolCalls, blocks });
}

/** The texts the meter counts in a message, in order: its content (or text parts), then each function call's name and arguments. */
export function textsOfMessage(message: ChatMessage): string[] {
  const out: string[] = [];
  const content = message.content;
  if (typeof content === 'string') out.push(content);
  else if (Array.isArray(content)) for (const part of content) if (part.type === 'text') out.push(part.text);
  if (message.role === 'assistant' && message.tool_calls) {
    for (const call of message.tool_calls) if (call.type === 'function') out.push(call.function.name, call.function.arguments);
  }
  return out;
}

/**
 * Content blocks priced with `perBlock` (the reference heuristic only). The system prompt has
 * no block charge: docs/spec.md#2-token-measurement prices it `ceil(len/4) + 4`, the +4 being its message framing.
 */
function blockCount(event: Pick<SurfaceEvent, 'type' | 'data'>): number {
  if (event.type === 'system/message') return 0;
  return (event.data as { content: ReadonlyArray<{ type: string }> }).content.filter((b) => b.type !== 'tool-call' && b.type !== 'reasoning').length;
}
