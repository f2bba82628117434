/**
 * OpenAI Responses API items ↔ the conversation's messages (conversation/messages.ts):
 * `messagesOfResponsesItems` reads a list of input or output items, `responsesInputOf` writes
 * the surface back as input items.
 *
 * Items: `message` (user / assistant; leading system / developer messages and `instructions`
 * are the system prompt), `function_call`, `function_call_output`, `reasoning`. Consecutive
 * assistant-side items (a reply's reasoning, message and calls) are one assistant message, so a
 * reasoning item always travels with the call it led to: a checkpoint shadows them together.
 * Items carry no mark of the reply they came in: two replies in a row (a caller that pushes
 * `response.output` after a reply without calls and asks again) read as one assistant message,
 * and the conversation matches them against the recording the same way (Face.mergeReplies). A
 * reasoning item is kept whole on its block (`providerOptions.openai.item`, plus the AI SDK's
 * `itemId` / `reasoningEncryptedContent`) and sent back byte for byte, never summarized: only
 * a Responses request gets it back (another shape leaves it out, whole).
 */
import { sendableArguments } from '../../session/derive';
import type { ImageBlock, ProviderOptions, ReasoningBlock, SurfaceEvent, TextBlock, ToolCallBlock, Usage } from '../../session/events';
import { chatTool, ConversationError, jsonCopy, joinedText, serverState, type ConversationMessage, type Reply } from '../conversation';

/** A Responses item as this mapping reads it (the SDK's `ResponseInputItem` and `ResponseOutputItem` are accepted as they are). */
export type ResponsesItem = { type?: string; role?: string; [key: string]: unknown };

type Part = { type?: unknown; text?: unknown; refusal?: unknown; image_url?: unknown; file_id?: unknown; detail?: unknown };

const unmappable = (where: string, what: string): ConversationError =>
  new ConversationError(
    'unmappable-part',
    `xcompact cannot record ${what} in ${where}: the session keeps text, images (image_url), function calls and their outputs, and reasoning items; nothing was recorded or sent`,
  );

function textOf(content: unknown, where: string): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw unmappable(where, `content of type ${typeof content}`);
  return (content as Part[])
    .map((p) => {
      if ((p.type === 'input_text' || p.type === 'output_text' || p.type === 'text') && typeof p.text === 'string') return p.text;
      if (p.type === 'refusal' && typeof p.refusal === 'string') return p.refusal;
      throw unmappable(where, `a "${String(p.type)}" part`);
    })
    .join('\n\n');
}

function blocksOf(content: unknown, where: string): Array<TextBlock | ImageBlock> {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content) || content.length === 0) throw unmappable(where, 'empty content');
  return (content as Part[]).map((p): TextBlock | ImageBlock => {
    if ((p.type === 'input_text' || p.type === 'output_text') && typeof p.text === 'string') return { type: 'text', text: p.text };
    if (p.type === 'input_image' && typeof p.image_url === 'string') {
      const d = p.detail;
      return d === 'low' || d === 'high' || d === 'auto' ? { type: 'image', url: p.image_url, detail: d } : { type: 'image', url: p.image_url };
    }
    if (p.type === 'input_image') throw unmappable(where, 'an image given by file_id (a file the provider holds)');
    throw unmappable(where, `a "${String(p.type)}" part`);
  });
}

const isSystem = (item: ResponsesItem): boolean =>
  (item.type === undefined || item.type === 'message') && (item.role === 'system' || item.role === 'developer');

/** The system prompt (`instructions`, then the leading system / developer messages) and the rest. */
export function splitResponsesSystem(instructions: unknown, input: readonly ResponsesItem[]): { system: string | undefined; rest: readonly ResponsesItem[] } {
  const texts: string[] = [];
  if (typeof instructions === 'string' && instructions !== '') texts.push(instructions);
  let i = 0;
  for (; i < input.length && isSystem(input[i]!); i++) texts.push(textOf(input[i]!.content, 'a system message'));
  return { system: texts.length === 0 ? undefined : texts.join('\n\n'), rest: input.slice(i) };
}

/** A reasoning item as a block: its readable text, the item itself kept whole. */
export function reasoningBlockOf(item: ResponsesItem): ReasoningBlock {
  const parts = [...((item.summary as Part[] | undefined) ?? []), ...((item.content as Part[] | undefined) ?? [])];
  const text = parts
    .map((p) => (typeof p.text === 'string' ? p.text : ''))
    .filter((t) => t !== '')
    .join('\n\n');
  const { status: _status, ...kept } = item;
  const openai: Record<string, unknown> = { item: jsonCopy(kept) };
  if (typeof item.id === 'string') openai['itemId'] = item.id;
  if (typeof item.encrypted_content === 'string') openai['reasoningEncryptedContent'] = item.encrypted_content;
  return { type: 'reasoning', text, providerOptions: { openai } };
}

function callBlockOf(item: ResponsesItem, where: string): ToolCallBlock {
  const id = item.call_id;
  if (typeof id !== 'string' || id === '' || typeof item.name !== 'string' || item.name === '')
    throw unmappable(where, 'a function_call without call_id or name');
  const args = typeof item.arguments === 'string' ? item.arguments : JSON.stringify(item.arguments ?? {});
  return {
    type: 'tool-call',
    id,
    name: item.name,
    arguments: args,
    ...(typeof item.id === 'string' ? { providerOptions: { openai: { itemId: item.id } } } : {}),
  };
}

function outputBlocks(output: unknown, where: string): Array<TextBlock | ImageBlock> {
  if (typeof output === 'string') return [{ type: 'text', text: output }];
  return blocksOf(output, where);
}

/**
 * Input or output items as the conversation's messages, in order; throws
 * `ConversationError('unmappable-part')` for an item the session cannot hold and `'server-state'`
 * for an `item_reference`. `offset`: the index of `items[0]` in the caller's input, for errors.
 */
export function messagesOfResponsesItems(items: readonly ResponsesItem[], offset = 0): ConversationMessage[] {
  const out: ConversationMessage[] = [];
  let assistant: Extract<ConversationMessage, { role: 'assistant' }> | undefined;
  const side = () => {
    if (!assistant) out.push((assistant = { role: 'assistant', blocks: [] }));
    return assistant.blocks;
  };
  items.forEach((raw, k) => {
    const i = k + offset;
    if (typeof raw !== 'object' || raw === null)
      throw new ConversationError(
        'invalid-request',
        `input item ${i} is ${raw === null ? 'null' : typeof raw}, not an item object; nothing was recorded or sent`,
      );
    const item = raw;
    const where = `input item ${i} (${String(item.type ?? item.role)})`;
    const type = item.type ?? 'message';
    if (type === 'message' && item.role === 'assistant') {
      const text = textOf(item.content, where);
      if (text !== '') side().push({ type: 'text', text, ...(typeof item.id === 'string' ? { providerOptions: { openai: { itemId: item.id } } } : {}) });
      else side();
      return;
    }
    if (type === 'reasoning') return void side().push(reasoningBlockOf(item));
    if (type === 'function_call') return void side().push(callBlockOf(item, where));
    assistant = undefined;
    if (type === 'message' && item.role === 'user') return void out.push({ role: 'user', content: blocksOf(item.content, where) });
    if (type === 'function_call_output') {
      if (typeof item.call_id !== 'string' || item.call_id === '') throw unmappable(where, 'a function_call_output without call_id');
      return void out.push({ role: 'tool', callId: item.call_id, content: outputBlocks(item.output, where) });
    }
    if (type === 'message' && (item.role === 'system' || item.role === 'developer')) {
      throw new ConversationError(
        'unmappable-part',
        `xcompact cannot record a ${item.role} message in the middle of the conversation (${where}): only leading system messages and \`instructions\` are kept, as the system prompt; send later instructions as a user message. Nothing was recorded or sent`,
      );
    }
    if (type === 'item_reference') throw serverState([`input[${i}] item_reference`]);
    throw unmappable(where, `an item of type "${String(type)}"${type === 'message' ? ` with role "${String(item.role)}"` : ''}`);
  });
  return out;
}

const openaiOf = (b: { providerOptions?: ProviderOptions | undefined }): Record<string, unknown> | undefined => b.providerOptions?.['openai'];

/**
 * The surface as Responses input items: the system prompt apart (as `instructions`),
 * checkpoints as user messages, each assistant message as its
 * items in order. Reasoning goes back only when it came from a Responses reply (kept whole).
 */
export function responsesInputOf(events: Iterable<SurfaceEvent>): { instructions: string | undefined; input: ResponsesItem[] } {
  let instructions: string | undefined;
  const input: ResponsesItem[] = [];
  for (const e of events) {
    switch (e.type) {
      case 'system/message':
        instructions = e.data.text;
        break;
      case 'user/message':
        input.push({ role: 'user', content: userContent(e.data.content) });
        break;
      case 'assistant/message': {
        let text: string[] = [];
        const flush = () => {
          if (text.length > 0) input.push({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: text.join('\n\n'), annotations: [] }] });
          text = [];
        };
        for (const b of e.data.content) {
          if (b.type === 'text') text.push(b.text);
          else if (b.type === 'reasoning') {
            const item = openaiOf(b)?.['item'];
            if (item && typeof item === 'object') {
              flush();
              input.push(jsonCopy(item as ResponsesItem));
            }
          } else {
            flush();
            input.push({ type: 'function_call', call_id: b.id, name: b.name, arguments: sendableArguments(b.arguments) });
          }
        }
        flush();
        break;
      }
      case 'tool/result': {
        const images = e.data.content.some((b) => b.type === 'image');
        input.push({ type: 'function_call_output', call_id: e.data.callId, output: images ? userContent(e.data.content) : joinedText(e.data.content) });
        break;
      }
    }
  }
  return { instructions, input };
}

function userContent(blocks: ReadonlyArray<{ type: string }>): string | Array<Record<string, unknown>> {
  if (!blocks.some((b) => b.type === 'image')) return joinedText(blocks as TextBlock[]);
  return (blocks as Array<TextBlock | ImageBlock>).map((b) =>
    b.type === 'text' ? { type: 'input_text', text: b.text } : { type: 'input_image', image_url: b.url, detail: b.detail ?? 'auto' },
  );
}

/** Responses function tools in the Chat Completions shape; other tool types are kept as given. */
export function chatToolsOfResponses(tools: unknown): Array<Record<string, unknown>> {
  if (!Array.isArray(tools)) return [];
  return (tools as Array<Record<string, unknown>>).map((t) =>
    t['type'] === 'function' && typeof t['name'] === 'string' ? chatTool(t['name'], t['description'] as string | undefined, t['parameters']) : jsonCopy(t),
  );
}

/** Responses usage → the session's usage. */
export function usageOfResponses(u: unknown): Usage | undefined {
  if (typeof u !== 'object' || u === null) return undefined;
  const r = u as {
    input_tokens?: unknown;
    output_tokens?: unknown;
    input_tokens_details?: { cached_tokens?: unknown } | null;
    output_tokens_details?: { reasoning_tokens?: unknown } | null;
  };
  if (typeof r.input_tokens !== 'number') return undefined;
  const usage: Usage = { promptTokens: r.input_tokens, completionTokens: typeof r.output_tokens === 'number' ? r.output_tokens : 0 };
  if (typeof r.input_tokens_details?.cached_tokens === 'number') usage.cachedTokens = r.input_tokens_details.cached_tokens;
  if (typeof r.output_tokens_details?.reasoning_tokens === 'number') usage.reasoningTokens = r.output_tokens_details.reasoning_tokens;
  return usage;
}

/** A Response (`responses.create`, or a stream's `response.completed`) as the reply to record. */
export function replyOfResponse(response: {
  output?: unknown;
  usage?: unknown;
  model?: unknown;
  status?: unknown;
  incomplete_details?: { reason?: unknown } | null;
}): Reply {
  const items = Array.isArray(response.output) ? (response.output as ResponsesItem[]) : [];
  const blocks: Reply['blocks'] = [];
  for (const m of messagesOfResponsesItems(items)) if (m.role === 'assistant') blocks.push(...m.blocks);
  const usage = usageOfResponses(response.usage);
  const reason =
    response.status === 'incomplete'
      ? response.incomplete_details?.reason === 'max_output_tokens'
        ? 'length'
        : String(response.incomplete_details?.reason ?? 'incomplete')
      : blocks.some((b) => b.type === 'tool-call')
        ? 'tool_calls'
        : 'stop';
  return {
    blocks,
    ...(usage ? { usage } : {}),
    ...(typeof response.model === 'string' && response.model !== '' ? { model: response.model } : {}),
    finishReason: reason,
  };
}
