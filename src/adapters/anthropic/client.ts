/**
 * withCompaction(new Anthropic(), …): an `@anthropic-ai/sdk` client whose `messages.create`
 * records the conversation in a session and sends its compacted form, as the openai drop-in
 * does for `chat.completions.create` (conversation/conversation.ts holds the steps; this face
 * maps Messages, map.ts, and accumulates a streamed reply, stream.ts). The SDK is the
 * caller's: xcompact imports none of it (structural types only), so it is never loaded unless
 * the caller loads it.
 *
 * What the Messages shape adds:
 * - the top-level `system` (a string or text blocks) is the system prompt; it is sent as the
 *   caller gave it (its `cache_control` too);
 * - content blocks `text`, `image`, `tool_use`, `tool_result`, `thinking` / `redacted_thinking`
 *   (kept verbatim with their signature and sent back with their turn, never split from it);
 * - `cache_control` breakpoints: the caller's, on the blocks it put them on (a block shadowed by
 *   a checkpoint takes its breakpoint with it), plus one on the newest checkpoint when the caller
 *   uses prompt caching at all, so the summarized prefix is cached too; at most four in all
 *   (Anthropic's limit): the newest message breakpoints are kept;
 * - the overflow error ("prompt is too long: N tokens > M maximum") is classified with its counts
 *   and recovered inside the call, like any provider's;
 * - summaries go through the same client (`AnthropicSummarizer`), unrecorded.
 */
import type { CompactionEngine, CompactionEngineOptions } from '../../engine/facade';
import type { ModelInfo } from '../../services/config';
import { boundSummarizer, withCheckpointLedger } from '../../services/summarizing';
import { currentSystemPrompt, recordedMessages } from '../../session/recorded';
import type { Session } from '../../session/session';
import { ConversationError, forward, openConversation, recordStream, type Face } from '../conversation';
import {
  anthropicMessagesOf,
  anthropicSystemText,
  chatToolsOfAnthropic,
  messagesOfAnthropic,
  replyOfAnthropicMessage,
  type AnthropicBlock,
  type AnthropicMessage,
} from './map';
import { anthropicAccumulator, type AnthropicEvent } from './stream';
import { AnthropicSummarizer, type AnthropicCreate } from './summarizer';

/** The client xcompact accepts: anything with the `@anthropic-ai/sdk` client's `messages.create` (described, not imported). */
export interface AnthropicClientLike {
  messages: { create(body: never, options?: never): unknown; countTokens?(body: never, options?: never): unknown };
  baseURL?: string;
}

export interface AnthropicCompactionOptions extends Omit<CompactionEngineOptions, 'session' | 'client' | 'models'> {
  session: Session;
  /** Windows of models xcompact does not know, keyed `provider/model` or by the model name alone. */
  models?: Record<string, Partial<ModelInfo>>;
  /** The registry's provider name. Default: `anthropic` for api.anthropic.com, else `local`. */
  provider?: string;
}

/** What `client.compaction` holds on a wrapped Anthropic client. */
export interface AnthropicCompaction {
  readonly session: Session;
  readonly engine: CompactionEngine;
  readonly provider: string;
  /** The conversation so far as Anthropic messages (every message as recorded; the system prompt is `system()`). */
  messages(): AnthropicMessage[];
  /** The current system prompt, as recorded. */
  system(): string | undefined;
  close(options?: { session?: boolean }): Promise<void>;
}

export type AnthropicCompactingClient<C> = C & { readonly compaction: AnthropicCompaction };

/** A client with `messages.create` and no `chat`: the Anthropic SDK's, not openai's. */
export function isAnthropicClient(client: unknown): client is AnthropicClientLike {
  const c = client as { messages?: { create?: unknown }; chat?: unknown } | null;
  return typeof c === 'object' && c !== null && typeof c.messages?.create === 'function' && c.chat === undefined;
}

export function anthropicProvider(baseURL: string | undefined): string {
  if (!baseURL) return 'anthropic';
  try {
    const host = new URL(baseURL).hostname;
    return host === 'api.anthropic.com' || host.endsWith('.anthropic.com') ? 'anthropic' : 'local';
  } catch {
    return 'local';
  }
}

type Params = Record<string, unknown> & { model?: unknown; messages?: unknown; system?: unknown; tools?: unknown; max_tokens?: unknown; stream?: unknown };
type CreateOptions = { signal?: AbortSignal } & Record<string, unknown>;
/** Anthropic's limit of cache_control breakpoints per request. */
const MAX_BREAKPOINTS = 4;

/** How Anthropic Messages callers are told what to fix. */
export const ANTHROPIC_FACE: Face = {
  entry: 'withCompaction',
  list: 'messages',
  resultHint: 'put a { type: "tool_result", tool_use_id, content } block for every tool_use in the next user message',
};

export function withAnthropicCompaction<C extends AnthropicClientLike>(client: C, options: AnthropicCompactionOptions): AnthropicCompactingClient<C> {
  const { session, models, provider: _p, ...engineOptions } = options;
  const provider = options.provider ?? anthropicProvider(client.baseURL);
  const rawCreate = (client.messages.create as unknown as AnthropicCreate).bind(client.messages);
  const summarizer = options.summarizer ?? withCheckpointLedger(boundSummarizer(new AnthropicSummarizer(rawCreate)));
  // The model's server for tokenizer 'server': the Anthropic client's base URL (it has no /v1).
  const server =
    typeof client.baseURL === 'string' ? { baseURL: client.baseURL, apiKey: (client as { apiKey?: string | null }).apiKey ?? undefined } : undefined;
  const conversation = openConversation({
    ...engineOptions,
    session,
    provider,
    face: ANTHROPIC_FACE,
    summarizer,
    ...(models ? { models } : {}),
    ...(server && !engineOptions.server ? { server } : {}),
  });
  const { engine } = conversation;

  const create = async (params: Params, requestOptions?: CreateOptions): Promise<unknown> => {
    if (typeof params !== 'object' || params === null || !Array.isArray(params.messages))
      throw new ConversationError('invalid-request', 'messages.create needs { model, max_tokens, messages: [...] }; nothing was recorded or sent');
    const signal = requestOptions?.signal;
    const { messages, cache } = messagesOfAnthropic(params.messages as AnthropicMessage[]);
    const step = await conversation.begin(
      {
        system: anthropicSystemText(params.system),
        messages,
        model: String(params.model),
        tools: chatToolsOfAnthropic(params.tools),
        ...(typeof params.max_tokens === 'number' ? { maxTokens: params.max_tokens } : {}),
      },
      signal,
    );
    const marks = new Map<number, Array<{ block: number; cacheControl: unknown }>>();
    for (const [i, list] of cache) marks.set(step.seqs[i]!, list);
    const fixed = breakpointsIn(params.system) + breakpointsIn(params.tools);
    const caching = cache.size > 0 || fixed > 0;
    const result = await step.send(() => {
      const built = anthropicMessagesOf(step.surface(), marks, caching ? { type: 'ephemeral' } : undefined);
      capBreakpoints(built.messages, MAX_BREAKPOINTS - fixed);
      const body: Params = { ...params, messages: built.messages };
      if (params.system === undefined && built.system !== undefined) body['system'] = built.system;
      return rawCreate(body, requestOptions);
    }, errorView);
    if (params.stream === true) {
      const source = result as AsyncIterable<AnthropicEvent> & { controller: AbortController };
      const acc = anthropicAccumulator();
      return recordStream<AnthropicEvent, typeof source>(
        step,
        source,
        {
          see: (event) => {
            acc.add(event);
            return event;
          },
          outcome: () => (acc.message().complete ? 'complete' : 'aborted'),
          reply: () => replyOfAnthropicMessage(acc.message()),
        },
        client,
        signal,
      );
    }
    await step.finish(() => replyOfAnthropicMessage(result as Parameters<typeof replyOfAnthropicMessage>[0]));
    return result;
  };

  const compaction: AnthropicCompaction = {
    session,
    engine,
    provider,
    messages: () => anthropicMessagesOf(recordedMessages(session)).messages,
    system: () => currentSystemPrompt(session),
    close: (opts) => conversation.close(opts),
  };
  const messagesApi = forward(client.messages, { create });
  return forward(client, { messages: messagesApi, compaction }) as AnthropicCompactingClient<C>;
}

/** Anthropic's SDK keeps the whole body on `err.error` (`{type:'error', error:{message}}`): the classifier reads the inner error. */
export function errorView(err: unknown): unknown {
  const body = (err as { error?: unknown } | null)?.error;
  const inner = typeof body === 'object' && body !== null ? (body as { error?: unknown }).error : undefined;
  if (typeof err !== 'object' || err === null || typeof inner !== 'object' || inner === null) return err;
  return new Proxy(err, { get: (t, k) => (k === 'error' ? inner : Reflect.get(t, k, t)) });
}

function breakpointsIn(value: unknown): number {
  if (!Array.isArray(value)) return 0;
  return (value as Array<{ cache_control?: unknown }>).filter(
    (b) => typeof b === 'object' && b !== null && b.cache_control !== undefined && b.cache_control !== null,
  ).length;
}

/** At most `room` breakpoints in the messages: the oldest go first. */
function capBreakpoints(messages: AnthropicMessage[], room: number): void {
  const marked: AnthropicBlock[] = [];
  for (const m of messages) if (Array.isArray(m.content)) for (const b of m.content) if (b['cache_control'] !== undefined) marked.push(b);
  for (let i = 0; i < marked.length - Math.max(0, room); i++) delete marked[i]!['cache_control'];
}
