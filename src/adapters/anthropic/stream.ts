/**
 * A streamed Anthropic reply accumulated as it passes through to the caller: `message_start`
 * (model, input usage), each content block by index (`text_delta`, `thinking_delta` and
 * `signature_delta`, `input_json_delta`), `message_delta` (stop reason, output usage).
 */
import type { AnthropicBlock } from './map';

export type AnthropicEvent = { type?: string; index?: number; [key: string]: unknown };

export interface AnthropicAccumulated {
  content: AnthropicBlock[];
  usage: Record<string, unknown>;
  model: string | undefined;
  stop_reason: unknown;
  /** `message_stop` arrived: the reply is complete. */
  complete: boolean;
}

export function anthropicAccumulator(): { add(event: AnthropicEvent): void; message(): AnthropicAccumulated } {
  const blocks: Array<AnthropicBlock & { json?: string }> = [];
  let usage: Record<string, unknown> = {};
  let model: string | undefined;
  let stop: unknown;
  let complete = false;
  return {
    add(e) {
      switch (e.type) {
        case 'message_start': {
          const m = e['message'] as { model?: string; usage?: Record<string, unknown> } | undefined;
          if (m?.model) model = m.model;
          if (m?.usage) usage = { ...m.usage };
          break;
        }
        case 'content_block_start': {
          const b = { ...(e['content_block'] as AnthropicBlock) };
          if (b.type === 'tool_use') b.json = '';
          blocks[e.index ?? blocks.length] = b;
          break;
        }
        case 'content_block_delta': {
          const b = blocks[e.index ?? -1];
          const d = e['delta'] as { type?: string; text?: string; thinking?: string; signature?: string; partial_json?: string } | undefined;
          if (!b || !d) break;
          if (d.type === 'text_delta') b['text'] = String(b['text'] ?? '') + (d.text ?? '');
          else if (d.type === 'thinking_delta') b['thinking'] = String(b['thinking'] ?? '') + (d.thinking ?? '');
          else if (d.type === 'signature_delta') b['signature'] = String(b['signature'] ?? '') + (d.signature ?? '');
          else if (d.type === 'input_json_delta') b.json = (b.json ?? '') + (d.partial_json ?? '');
          break;
        }
        case 'message_delta': {
          const d = e['delta'] as { stop_reason?: unknown } | undefined;
          if (d?.stop_reason !== undefined) stop = d.stop_reason;
          const u = e['usage'] as Record<string, unknown> | undefined;
          // The final counts: output tokens, and (on newer servers) the input counts again.
          if (u) for (const [k, v] of Object.entries(u)) if (v !== null && v !== undefined) usage[k] = v;
          break;
        }
        case 'message_stop':
          complete = true;
          break;
      }
    },
    message() {
      const content = blocks.filter(Boolean).map(({ json, ...b }) => {
        if (b.type !== 'tool_use') return b;
        let input: unknown = {};
        if (json) {
          try {
            input = JSON.parse(json);
          } catch {
            // Cut mid-call (max_tokens): the text as it came, so the call is recorded as made.
            input = json;
          }
        } else if (b['input'] !== undefined) input = b['input'];
        return { ...b, input };
      });
      return { content, usage, model, stop_reason: stop, complete };
    },
  };
}
