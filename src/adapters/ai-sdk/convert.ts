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
  SharedV3ProviderOptions,
  LanguageModelV3FilePart,
  LanguageModelV3Message,
  LanguageModelV3Prompt,
  LanguageModelV3ToolResultOutput,
  LanguageModelV3Usage,
} from '@ai-sdk/provider';
import type { ImageBlock, ProviderOptions, ReasoningBlock, SurfaceEvent, TextBlock, ToolCallBlock, Usage } from '../../session/events';
import { sendableArguments } from '../../session/derive';
import { ConversationError, type ConversationErrorCode } from '../conversation';

/** The conversation's error (conversation/errors.ts), under the name this entry point always had. */
export const AiSdkAdapterError = ConversationError;
export type AiSdkAdapterError = ConversationError;
export type AiSdkAdapterErrorCode = ConversationErrorCode;

const unmappable = (where: string, what: string, hint: string): AiSdkAdapterError =>
  new AiSdkAdapterError('unmappable-part', `xcompact/ai-sdk cannot record ${what} in ${where}: ${hint}`);

const hasOptions = (o: SharedV3ProviderOptions | undefined): o is SharedV3ProviderOptions => o !== undefined && Object.keys(o).length > 0;

/**
 * A part's provider options onto its block, as a JSON copy: the session freezes what it
 * records, and the SDK's own objects must stay the SDK's.
 */
function withOptions<B extends object>(block: B, options: SharedV3ProviderOptions | undefined): B & { providerOptions?: ProviderOptions } {
  return hasOptions(options) ? { ...block, providerOptions: JSON.parse(JSON.stringify(options)) as ProviderOptions } : block;
}

/**
 * Provider options where the session keeps none (a whole message, a tool result): refused
 * rather than dropped, since the provider would then get a request the app did not make.
 */
export function refuseOptions(options: SharedV3ProviderOptions | undefined, where: string): void {
  if (!hasOptions(options)) return;
  throw unmappable(
    where,
    `providerOptions (${Object.keys(options).join(', ')})`,
    'only message parts (text, file, reasoning, tool-call, tool-result) keep them; set them on the parts instead',
  );
}

// ---------------------------------------------------------------------------------------
// Prompt → session

function base64Of(data: string | Uint8Array): string {
  return typeof data === 'string' ? data : Buffer.from(data).toString('base64');
}

/**
 * The provider spec a prompt is written for: `v3` (`ai` 6) or `v4` (`ai` 7). Their prompts differ
 * only in files: v3 holds a file's data bare (base64 text, bytes or a URL), v4 wraps it
 * (`{ type: 'data' | 'url' | 'reference' | 'text', … }`), and v4 tool outputs have one `file`
 * item where v3 has `image-url`, `image-data`, `file-url`, `file-data`.
 */
export type SpecVersion = 'v3' | 'v4';

/** A v4 file's wrapped data. */
type WrappedFileData = { type: 'data'; data: string | Uint8Array } | { type: 'url'; url: URL } | { type: 'reference' } | { type: 'text' };

const isWrapped = (data: unknown): data is WrappedFileData =>
  typeof data === 'object' && data !== null && !(data instanceof URL) && !(data instanceof Uint8Array) && typeof (data as { type?: unknown }).type === 'string';

/** An image media type; `exact`: one that names the format (not `image` or `image/*`, which v4 and v3 use for "some image"). */
const isImage = (mediaType: string, exact = false): boolean =>
  exact ? mediaType.startsWith('image/') && mediaType !== 'image/*' : mediaType === 'image' || mediaType.startsWith('image/');

/** The format of an image given only as "some image", from its first bytes (PNG when unknown, as before). */
function sniffImage(base64: string): string {
  if (base64.startsWith('/9j/')) return 'image/jpeg';
  if (base64.startsWith('R0lGOD')) return 'image/gif';
  if (base64.startsWith('UklGR')) return 'image/webp';
  return 'image/png';
}

/** Images become data/http URLs (what the session's ImageBlock holds); any other file is refused. */
function imageOf(part: { mediaType: string; data: unknown }, where: string): ImageBlock {
  if (!isImage(part.mediaType)) {
    throw unmappable(where, `a file part of type ${part.mediaType}`, 'only text and images can be recorded; send the file as text or drop it before the call');
  }
  let data = part.data as string | Uint8Array | URL | WrappedFileData;
  if (isWrapped(data)) {
    if (data.type === 'reference' || data.type === 'text') {
      throw unmappable(
        where,
        `an image given as ${data.type === 'reference' ? 'a provider file reference' : 'text'}`,
        'only images with their bytes or a URL can be recorded',
      );
    }
    data = data.type === 'url' ? data.url : data.data;
  }
  if (data instanceof URL) return { type: 'image', url: data.toString() };
  if (typeof data === 'string' && /^(https?|data):/i.test(data)) return { type: 'image', url: data };
  const base64 = base64Of(data);
  return { type: 'image', url: `data:${isImage(part.mediaType, true) ? part.mediaType : sniffImage(base64)};base64,${base64}` };
}

export function userBlocks(message: Extract<LanguageModelV3Message, { role: 'user' }>): Array<TextBlock | ImageBlock> {
  refuseOptions(message.providerOptions, 'a user message');
  const out: Array<TextBlock | ImageBlock> = [];
  for (const part of message.content) {
    if (part.type === 'text') out.push(withOptions({ type: 'text', text: part.text }, part.providerOptions));
    else if (part.type === 'file') out.push(withOptions(imageOf(part, 'a user message'), part.providerOptions));
    else throw unmappable('a user message', `a part of type "${(part as { type: string }).type}"`, 'it is not a text or image part');
  }
  if (out.length === 0) out.push({ type: 'text', text: '' });
  return out;
}

/**
 * An assistant message as the session keeps it: its parts in order, each with its provider
 * options (a thinking signature belongs to its reasoning part, a thought signature to its
 * call), and the calls among them.
 */
export interface AssistantFacts {
  blocks: Array<TextBlock | ReasoningBlock | ToolCallBlock>;
  toolCalls: ToolCallBlock[];
}

class FactsBuilder {
  readonly facts: AssistantFacts = { blocks: [], toolCalls: [] };
  /** An empty text part is dropped, as the AI SDK drops it from the messages it sends back. */
  text(text: string, options: SharedV3ProviderOptions | undefined): void {
    if (text !== '') this.facts.blocks.push(withOptions({ type: 'text', text }, options));
  }
  /** Reasoning goes back to the provider, empty or not when it carries options (a redacted thinking block). */
  reasoning(text: string, options: SharedV3ProviderOptions | undefined): void {
    if (text !== '' || hasOptions(options)) this.facts.blocks.push(withOptions({ type: 'reasoning', text }, options));
  }
  call(id: string, name: string, args: string, options: SharedV3ProviderOptions | undefined): void {
    const block = withOptions({ type: 'tool-call' as const, id, name, arguments: args }, options);
    this.facts.blocks.push(block);
    this.facts.toolCalls.push(block);
  }
}

/** An assistant message of the app's history (one the adapter did not see come back from the model). */
export function assistantFacts(message: Extract<LanguageModelV3Message, { role: 'assistant' }>): AssistantFacts {
  refuseOptions(message.providerOptions, 'an assistant message');
  const b = new FactsBuilder();
  for (const part of message.content) {
    if (part.type === 'text') b.text(part.text, part.providerOptions);
    else if (part.type === 'reasoning') b.reasoning(part.text, part.providerOptions);
    else if (part.type === 'tool-call') {
      if (part.providerExecuted) throw providerExecuted('an assistant message', part.toolName);
      b.call(part.toolCallId, part.toolName, argumentsOf(part.input), part.providerOptions);
    } else if (part.type === 'tool-result') throw providerExecuted('an assistant message', part.toolName);
    else throw unmappable('an assistant message', `a part of type "${part.type}"`, 'only text, reasoning and function tool calls can be recorded');
  }
  return b.facts;
}

const providerExecuted = (where: string, tool: string): AiSdkAdapterError =>
  unmappable(
    where,
    `the provider-executed tool "${tool}"`,
    'its call and result live inside the provider; use function tools with an execute() the AI SDK runs',
  );

/** Tool-call input as the raw JSON the provider sends (a string input is already that text). */
export function argumentsOf(input: unknown): string {
  return typeof input === 'string' ? input : JSON.stringify(input ?? {});
}

export interface ToolResultFacts {
  callId: string;
  toolName: string;
  content: Array<TextBlock | ImageBlock>;
  isError: boolean;
  providerOptions?: ProviderOptions;
}

export function toolResults(message: Extract<LanguageModelV3Message, { role: 'tool' }>): ToolResultFacts[] {
  refuseOptions(message.providerOptions, 'a tool message');
  const out: ToolResultFacts[] = [];
  for (const part of message.content) {
    if (part.type !== 'tool-result') {
      throw unmappable('a tool message', `a part of type "${part.type}"`, 'only tool results can be recorded (tool approvals are not supported)');
    }
    refuseOptions((part.output as { providerOptions?: SharedV3ProviderOptions }).providerOptions, `the output of tool "${part.toolName}"`);
    out.push(withOptions({ callId: part.toolCallId, toolName: part.toolName, ...resultContent(part.output, part.toolName) }, part.providerOptions));
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
        refuseOptions((item as { providerOptions?: SharedV3ProviderOptions }).providerOptions, `a content item of tool "${tool}"`);
        if (item.type === 'text') content.push(text(item.text));
        else if (item.type === 'image-data') content.push({ type: 'image', url: `data:${item.mediaType};base64,${item.data}` });
        else if (item.type === 'image-url') content.push({ type: 'image', url: item.url });
        else if (item.type === 'file-data' && item.mediaType.startsWith('image/'))
          content.push({ type: 'image', url: `data:${item.mediaType};base64,${item.data}` });
        else if (item.type === 'file-url' && /^image\//.test((item as { mediaType?: string }).mediaType ?? '')) content.push({ type: 'image', url: item.url });
        // v4 (ai 7): one `file` item, its data wrapped.
        else if ((item as { type: string }).type === 'file' && isImage((item as { mediaType?: string }).mediaType ?? ''))
          content.push(imageOf(item as unknown as { mediaType: string; data: unknown }, `the result of tool "${tool}"`));
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
  // A reply's `providerMetadata` is what the AI SDK sends back as the part's `providerOptions`.
  const b = new FactsBuilder();
  for (const part of content) {
    if (part.type === 'text') b.text(part.text, part.providerMetadata);
    else if (part.type === 'reasoning') b.reasoning(part.text, part.providerMetadata);
    else if (part.type === 'tool-call') {
      if (part.providerExecuted) throw providerExecuted('the model reply', part.toolName);
      b.call(part.toolCallId, part.toolName, part.input, part.providerMetadata);
    } else if (part.type === 'tool-result') throw providerExecuted('the model reply', part.toolName);
    // Citations are metadata of the reply; the AI SDK does not send them back either.
    else if (part.type === 'source') continue;
    else throw unmappable('the model reply', `a part of type "${part.type}"`, 'only text, reasoning and function tool calls can be recorded');
  }
  return b.facts;
}

// ---------------------------------------------------------------------------------------
// Session → prompt

export function parseArguments(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    // A pruned or malformed argument string goes back as it was recorded.
    return args;
  }
}

/**
 * An image URL a model can fetch. The session accepts any string (an imported transcript may
 * hold `screenshots/a.png`); a model cannot, so such an image is refused with a typed error
 * before the request is sent rather than a TypeError from `new URL`.
 */
function absoluteUrl(url: string): URL {
  try {
    return new URL(url);
  } catch (err) {
    throw new AiSdkAdapterError(
      'unmappable-part',
      `xcompact/ai-sdk cannot send an image whose URL is neither a data URL nor an absolute URL: ${JSON.stringify(url.slice(0, 120))}`,
      { cause: err },
    );
  }
}

/** An image as a file: its media type, and its base64 data (a data URL) or its URL; wrapped for v4. */
function filePartOf(block: ImageBlock, spec: SpecVersion): LanguageModelV3FilePart {
  const m = /^data:([^;,]+)[;,]/i.exec(block.url);
  const mediaType = m ? m[1]! : 'image/*';
  const data = m ? block.url.slice(block.url.indexOf(',') + 1) : absoluteUrl(block.url);
  if (spec === 'v3') return { type: 'file', mediaType, data };
  const wrapped: WrappedFileData = typeof data === 'string' ? { type: 'data', data } : { type: 'url', url: data };
  return { type: 'file', mediaType, data: wrapped as unknown as LanguageModelV3FilePart['data'] };
}

const textOfBlocks = (blocks: ReadonlyArray<{ type: string }>): string =>
  blocks
    .filter((b): b is TextBlock => b.type === 'text')
    .map((b) => b.text)
    .join('\n\n');

/** A recorded block's provider options, back on its part (a copy: the log is frozen, providers may not expect that). */
const optionsOf = (b: { providerOptions?: ProviderOptions | undefined }): { providerOptions?: SharedV3ProviderOptions } =>
  b.providerOptions ? { providerOptions: JSON.parse(JSON.stringify(b.providerOptions)) as SharedV3ProviderOptions } : {};

/**
 * The surface as the prompt the provider receives, as the AI SDK itself would send the
 * messages back: each assistant part in its order, reasoning included, with its provider
 * options (thought and thinking signatures); tool names come from the calls when a result
 * lacks one.
 */
export function promptOf(events: Iterable<SurfaceEvent>, spec: SpecVersion = 'v3'): LanguageModelV3Prompt {
  const prompt: LanguageModelV3Prompt = [];
  const names = new Map<string, string>();
  for (const e of events) {
    switch (e.type) {
      case 'system/message':
        prompt.push({ role: 'system', content: e.data.text });
        break;
      case 'user/message':
        prompt.push({
          role: 'user',
          content: e.data.content.map((b) =>
            b.type === 'text' ? { type: 'text' as const, text: b.text, ...optionsOf(b) } : { ...filePartOf(b, spec), ...optionsOf(b) },
          ),
        });
        break;
      case 'assistant/message': {
        const content: Extract<LanguageModelV3Message, { role: 'assistant' }>['content'] = [];
        for (const b of e.data.content) {
          if (b.type === 'tool-call') {
            names.set(b.id, b.name);
            content.push({ type: 'tool-call', toolCallId: b.id, toolName: b.name, input: parseArguments(sendableArguments(b.arguments)), ...optionsOf(b) });
          } else if (b.text !== '' || b.providerOptions) content.push({ type: b.type, text: b.text, ...optionsOf(b) });
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
                  b.type === 'text'
                    ? { type: 'text' as const, text: b.text }
                    : spec === 'v3'
                      ? { type: 'image-url' as const, url: /^data:/i.test(b.url) ? b.url : (absoluteUrl(b.url), b.url) }
                      : // v4's one file item (the shape differs from v3's file part only in name)
                        (filePartOf(b, spec) as unknown as { type: 'image-url'; url: string }),
                ),
              };
        const part = {
          type: 'tool-result' as const,
          toolCallId: e.data.callId,
          toolName: e.data.toolName ?? names.get(e.data.callId) ?? 'unknown',
          output,
          ...optionsOf(e.data),
        };
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
