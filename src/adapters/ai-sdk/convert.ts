/**
 * AI SDK provider prompt messages ↔ session content, one message at a time.
 *
 * The adapter sits at the model boundary (a language-model middleware), so it sees the
 * provider-level prompt (`LanguageModelV3Message`, what `ModelMessage`s become after the AI
 * SDK's own conversion) and writes it back in the same form. Anything this mapping cannot
 * represent faithfully is refused with an {@link AiSdkAdapterError} naming the part: a tool
 * result, a file or an approval silently dropped would make the compacted conversation lie.
 */
import type {
  LanguageModelV3Content,
  LanguageModelV3FilePart,
  LanguageModelV3Message,
  LanguageModelV3Prompt,
  LanguageModelV3ToolResultOutput,
  LanguageModelV3Usage,
} from '@ai-sdk/provider';
import { XcompactError } from '../../errors';
import type { ContentBlock, ImageBlock, SurfaceEvent, TextBlock, Usage } from '../../session/events';

export type AiSdkAdapterErrorCode =
  | 'unmappable-part' // a message part the session cannot represent (named in the message)
  | 'history-diverged'; // the app sent a conversation that does not continue the recorded one

export class AiSdkAdapterError extends XcompactError {
  declare readonly code: AiSdkAdapterErrorCode;
  constructor(code: AiSdkAdapterErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

const unmappable = (where: string, what: string, hint: string): AiSdkAdapterError =>
  new AiSdkAdapterError('unmappable-part', `xcompact/ai-sdk cannot record ${what} in ${where}: ${hint}`);

// ---------------------------------------------------------------------------------------
// Prompt → session

function base64Of(data: string | Uint8Array): string {
  return typeof data === 'string' ? data : Buffer.from(data).toString('base64');
}

/** Images become data/http URLs (what the session's ImageBlock holds); any other file is refused. */
function imageOf(part: LanguageModelV3FilePart, where: string): ImageBlock {
  if (!part.mediaType.startsWith('image/')) {
    throw unmappable(where, `a file part of type ${part.mediaType}`, 'only text and images can be recorded; send the file as text or drop it before the call');
  }
  const data = part.data;
  if (data instanceof URL) return { type: 'image', url: data.toString() };
  if (typeof data === 'string' && /^(https?|data):/i.test(data)) return { type: 'image', url: data };
  return { type: 'image', url: `data:${part.mediaType === 'image/*' ? 'image/png' : part.mediaType};base64,${base64Of(data)}` };
}

export function userBlocks(message: Extract<LanguageModelV3Message, { role: 'user' }>): Array<TextBlock | ImageBlock> {
  const out: Array<TextBlock | ImageBlock> = [];
  for (const part of message.content) {
    if (part.type === 'text') out.push({ type: 'text', text: part.text });
    else if (part.type === 'file') out.push(imageOf(part, 'a user message'));
    else throw unmappable('a user message', `a part of type "${(part as { type: string }).type}"`, 'it is not a text or image part');
  }
  if (out.length === 0) out.push({ type: 'text', text: '' });
  return out;
}

export interface AssistantFacts {
  text: string;
  reasoning: string;
  toolCalls: Array<{ id: string; name: string; arguments: string }>;
}

/** An assistant message of the app's history (one the adapter did not see come back from the model). */
export function assistantFacts(message: Extract<LanguageModelV3Message, { role: 'assistant' }>): AssistantFacts {
  const facts: AssistantFacts = { text: '', reasoning: '', toolCalls: [] };
  for (const part of message.content) {
    if (part.type === 'text') facts.text += part.text;
    else if (part.type === 'reasoning') facts.reasoning += part.text;
    else if (part.type === 'tool-call') {
      if (part.providerExecuted) throw providerExecuted('an assistant message', part.toolName);
      facts.toolCalls.push({ id: part.toolCallId, name: part.toolName, arguments: argumentsOf(part.input) });
    } else if (part.type === 'tool-result') throw providerExecuted('an assistant message', part.toolName);
    else throw unmappable('an assistant message', `a part of type "${part.type}"`, 'only text, reasoning and function tool calls can be recorded');
  }
  return facts;
}

const providerExecuted = (where: string, tool: string): AiSdkAdapterError =>
  unmappable(where, `the provider-executed tool "${tool}"`, 'its call and result live inside the provider; use function tools with an execute() the AI SDK runs');

/** Tool-call input as the raw JSON the provider sends (a string input is already that text). */
export function argumentsOf(input: unknown): string {
  return typeof input === 'string' ? input : JSON.stringify(input ?? {});
}

export interface ToolResultFacts {
  callId: string;
  toolName: string;
  content: Array<TextBlock | ImageBlock>;
  isError: boolean;
}

export function toolResults(message: Extract<LanguageModelV3Message, { role: 'tool' }>): ToolResultFacts[] {
  const out: ToolResultFacts[] = [];
  for (const part of message.content) {
    if (part.type !== 'tool-result') {
      throw unmappable('a tool message', `a part of type "${part.type}"`, 'only tool results can be recorded (tool approvals are not supported)');
    }
    out.push({ callId: part.toolCallId, toolName: part.toolName, ...resultContent(part.output, part.toolName) });
  }
  return out;
}

function resultContent(output: LanguageModelV3ToolResultOutput, tool: string): { content: Array<TextBlock | ImageBlock>; isError: boolean } {
  const text = (t: string): TextBlock => ({ type: 'text', text: t });
  switch (output.type) {
    case 'text':
      return { content: [text(output.value)], isError: false };
    case 'json':
      return { content: [text(JSON.stringify(output.value))], isError: false };
    case 'error-text':
      return { content: [text(output.value)], isError: true };
    case 'error-json':
      return { content: [text(JSON.stringify(output.value))], isError: true };
    case 'execution-denied':
      return { content: [text(output.reason ?? 'Tool execution was denied.')], isError: true };
    case 'content': {
      const content: Array<TextBlock | ImageBlock> = [];
      for (const item of output.value) {
        if (item.type === 'text') content.push(text(item.text));
        else if (item.type === 'image-data') content.push({ type: 'image', url: `data:${item.mediaType};base64,${item.data}` });
        else if (item.type === 'image-url') content.push({ type: 'image', url: item.url });
        else if (item.type === 'file-data' && item.mediaType.startsWith('image/')) content.push({ type: 'image', url: `data:${item.mediaType};base64,${item.data}` });
        else if (item.type === 'file-url' && /^image\//.test((item as { mediaType?: string }).mediaType ?? '')) content.push({ type: 'image', url: item.url });
        else throw unmappable(`the result of tool "${tool}"`, `a content item of type "${item.type}"`, 'only text and images can be recorded');
      }
      return { content, isError: false };
    }
    default:
      throw unmappable(`the result of tool "${tool}"`, `an output of type "${(output as { type: string }).type}"`, 'it is not a known tool output type');
  }
}

/** Provider usage (V3) → the session's usage; undefined when the provider reported no prompt size. */
export function usageOf(u: LanguageModelV3Usage | undefined): Usage | undefined {
  const prompt = u?.inputTokens.total;
  if (u === undefined || prompt === undefined) return undefined;
  const usage: Usage = { promptTokens: prompt, completionTokens: u.outputTokens.total ?? 0 };
  if (u.inputTokens.cacheRead !== undefined) usage.cachedTokens = u.inputTokens.cacheRead;
  if (u.inputTokens.cacheWrite !== undefined) usage.cacheWriteTokens = u.inputTokens.cacheWrite;
  if (u.outputTokens.reasoning !== undefined) usage.reasoningTokens = u.outputTokens.reasoning;
  return usage;
}

/** A model reply (generate result content, or the parts of a finished stream) as session facts. */
export function replyFacts(content: readonly LanguageModelV3Content[]): AssistantFacts {
  const facts: AssistantFacts = { text: '', reasoning: '', toolCalls: [] };
  for (const part of content) {
    if (part.type === 'text') facts.text += part.text;
    else if (part.type === 'reasoning') facts.reasoning += part.text;
    else if (part.type === 'tool-call') {
      if (part.providerExecuted) throw providerExecuted('the model reply', part.toolName);
      facts.toolCalls.push({ id: part.toolCallId, name: part.toolName, arguments: part.input });
    } else if (part.type === 'tool-result') throw providerExecuted('the model reply', part.toolName);
    // Citations are metadata of the reply; the AI SDK does not send them back either.
    else if (part.type === 'source') continue;
    else throw unmappable('the model reply', `a part of type "${part.type}"`, 'only text, reasoning and function tool calls can be recorded');
  }
  return facts;
}

/** Cheap identity of a prompt message: role, part types and call ids (enough to notice another conversation). */
export function fingerprint(message: LanguageModelV3Message): string {
  if (message.role === 'system') return 'system';
  const parts = (message.content as ReadonlyArray<{ type: string; toolCallId?: string }>).map((p) => (p.toolCallId ? `${p.type}:${p.toolCallId}` : p.type));
  return `${message.role}[${parts.join(',')}]`;
}

// ---------------------------------------------------------------------------------------
// Session → prompt

function parseArguments(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    // A pruned or malformed argument string goes back as it was recorded.
    return args;
  }
}

function filePartOf(block: ImageBlock): LanguageModelV3FilePart {
  const m = /^data:([^;,]+)[;,]/i.exec(block.url);
  if (m) {
    const comma = block.url.indexOf(',');
    return { type: 'file', mediaType: m[1]!, data: block.url.slice(comma + 1) };
  }
  return { type: 'file', mediaType: 'image/*', data: new URL(block.url) };
}

const textOfBlocks = (blocks: readonly ContentBlock[]): string =>
  blocks
    .filter((b): b is TextBlock => b.type === 'text')
    .map((b) => b.text)
    .join('\n\n');

/**
 * The surface as the prompt the provider receives. Reasoning is not replayed (like the
 * session's chat projection); tool names come from the calls when a result lacks one.
 */
export function promptOf(events: Iterable<SurfaceEvent>): LanguageModelV3Prompt {
  const prompt: LanguageModelV3Prompt = [];
  const names = new Map<string, string>();
  for (const e of events) {
    switch (e.type) {
      case 'system/message':
        prompt.push({ role: 'system', content: e.data.text });
        break;
      case 'user/message':
        prompt.push({ role: 'user', content: e.data.content.map((b) => (b.type === 'text' ? { type: 'text' as const, text: b.text } : filePartOf(b))) });
        break;
      case 'assistant/message': {
        const content: Extract<LanguageModelV3Message, { role: 'assistant' }>['content'] = [];
        const text = textOfBlocks(e.data.content);
        if (text !== '') content.push({ type: 'text', text });
        for (const b of e.data.content) {
          if (b.type !== 'tool-call') continue;
          names.set(b.id, b.name);
          content.push({ type: 'tool-call', toolCallId: b.id, toolName: b.name, input: parseArguments(b.arguments) });
        }
        prompt.push({ role: 'assistant', content });
        break;
      }
      case 'tool/result': {
        const images = e.data.content.filter((b): b is ImageBlock => b.type === 'image');
        const text = textOfBlocks(e.data.content);
        const value = images.length === 0 ? text : undefined;
        const output: LanguageModelV3ToolResultOutput =
          value !== undefined
            ? { type: e.data.isError ? 'error-text' : 'text', value }
            : {
                type: 'content',
                value: e.data.content.map((b) =>
                  b.type === 'text' ? { type: 'text' as const, text: b.text } : { type: 'image-url' as const, url: (b as ImageBlock).url },
                ),
              };
        const part = { type: 'tool-result' as const, toolCallId: e.data.callId, toolName: e.data.toolName ?? names.get(e.data.callId) ?? 'unknown', output };
        const last = prompt[prompt.length - 1];
        // Consecutive results share one tool message, as the AI SDK builds them.
        if (last?.role === 'tool') last.content.push(part);
        else prompt.push({ role: 'tool', content: [part] });
        break;
      }
    }
  }
  return prompt;
}
