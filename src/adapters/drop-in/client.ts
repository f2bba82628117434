/**
 * withCompaction(): an `openai` client whose `chat.completions.create` (and `responses.create`,
 * responses/create.ts) records the conversation in a session and sends its compacted form, with
 * nothing else changed for the caller; given an `@anthropic-ai/sdk` client, its
 * `messages.create` (anthropic/client.ts). The steps of a call are the conversation's
 * (conversation/conversation.ts); this face maps Chat Completions messages (messages.ts) and
 * accumulates a streamed reply (stream.ts).
 *
 * One wrapped client is one conversation; its calls must not overlap.
 */
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionCreateParams, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { CompactionEngine, CompactionEngineOptions } from '../../engine/facade';
import type { Session } from '../../session/session';
import { usageFromOpenAI } from '../../session/writer';
import type { ModelInfo } from '../../services/config';
import { withErrorBodyRecovery, type OpenAIClient } from '../../services/overflow';
import { ConversationError, forward, openConversation, type ConversationMessage, type Face } from '../conversation';
import { mapMessage, replyBlocks, sessionMessages, splitSystem } from './messages';
import { recordingStream, type StreamedReply } from './stream';
import { wrapResponses } from '../responses/create';
import { isAnthropicClient, withAnthropicCompaction, type AnthropicClientLike, type AnthropicCompactingClient } from '../anthropic/client';

export interface WithCompactionOptions extends Omit<CompactionEngineOptions, 'session' | 'client' | 'models'> {
  /** Where the conversation is recorded: `Session.inMemory()`, or a store's `Session.open(store, id)`. */
  session: Session;
  /**
   * Windows of models xcompact does not know, keyed `provider/model` or by the model name alone
   * (then under `provider`): `{ 'my-model': { contextWindow: 32_768 } }`.
   */
  models?: Record<string, Partial<ModelInfo>>;
  /** The registry's provider name. Default: from the client's `baseURL` (`openai`, `deepseek`, else `local`). */
  provider?: string;
}

/** What `client.compaction` holds: the conversation's session and engine. */
export interface Compaction {
  readonly session: Session;
  readonly engine: CompactionEngine;
  /** The provider name the models are looked up under (`provider/model`). */
  readonly provider: string;
  /** The conversation so far, to continue it with (after a restart): the system prompt, then every message as recorded. */
  messages(): ChatCompletionMessageParam[];
  /** Stops the engine, closes an open step and turn, and flushes the session; `{ session: true }` closes it too (its store released). */
  close(options?: { session?: boolean }): Promise<void>;
}

export type CompactingClient<C> = C & { readonly compaction: Compaction };

/** The provider name of an endpoint, for the registry key `provider/model`. */
export function providerOfBaseURL(baseURL: string | undefined): string {
  if (!baseURL) return 'openai';
  let host: string;
  try {
    host = new URL(baseURL).hostname;
  } catch {
    return 'local';
  }
  if (host === 'api.deepseek.com' || host.endsWith('.deepseek.com')) return 'deepseek';
  if (host === 'api.openai.com' || host.endsWith('.openai.com')) return 'openai';
  return 'local';
}

type CreateOptions = { signal?: AbortSignal } & Record<string, unknown>;
type RawCreate = (body: ChatCompletionCreateParams, options?: CreateOptions) => Promise<unknown>;

/** How Chat Completions callers are told what to fix. */
export const CHAT_FACE: Face = {
  entry: 'withCompaction',
  list: 'messages',
  resultHint: 'append a { role: "tool", tool_call_id, content } message for every tool call',
};

/** An `@anthropic-ai/sdk` client: its `messages.create` is wrapped (anthropic/client.ts). */
export function withCompaction<C extends AnthropicClientLike>(client: C, options: WithCompactionOptions): AnthropicCompactingClient<C>;
export function withCompaction<C extends OpenAIClient>(client: C, options: WithCompactionOptions): CompactingClient<C>;
export function withCompaction<C extends OpenAIClient>(client: C, options: WithCompactionOptions): CompactingClient<C> {
  if (isAnthropicClient(client)) return withAnthropicCompaction(client, options) as unknown as CompactingClient<C>;
  const { session, models, provider: _p, ...engineOptions } = options;
  const provider = options.provider ?? providerOfBaseURL((client as { baseURL?: string }).baseURL);
  // vLLM's and Mistral's flat error bodies reach the classifier with their text: nothing to remember.
  withErrorBodyRecovery(client);
  // The caller's client, unwrapped: summary requests go through it and are not recorded.
  const conversation = openConversation({ ...engineOptions, session, client, provider, face: CHAT_FACE, ...(models ? { models } : {}) });
  const { engine } = conversation;
  const rawCreate = (client.chat.completions.create as unknown as RawCreate).bind(client.chat.completions);
  /** The caller's message objects are usually the same from call to call: each is mapped once. */
  const mapped = new WeakMap<object, ConversationMessage>();

  const create = async (params: ChatCompletionCreateParams, requestOptions?: CreateOptions): Promise<unknown> => {
    const signal = requestOptions?.signal;
    if (typeof params !== 'object' || params === null || !Array.isArray(params.messages)) {
      throw new ConversationError('invalid-request', 'chat.completions.create needs { model, messages: [...] }; nothing was recorded or sent');
    }
    const { system, rest } = splitSystem(params.messages);
    const messages = rest.map((m, i) => {
      let known = typeof m === 'object' && m !== null ? mapped.get(m) : undefined;
      if (!known) {
        known = mapMessage(m, i + (params.messages.length - rest.length));
        if (typeof m === 'object' && m !== null) mapped.set(m, known);
      }
      return known;
    });
    const maxTokens = params.max_completion_tokens ?? params.max_tokens;
    const step = await conversation.begin(
      {
        system,
        messages,
        model: String(params.model),
        tools: (params.tools ?? []) as unknown as Array<Record<string, unknown>>,
        ...(typeof maxTokens === 'number' ? { maxTokens } : {}),
      },
      signal,
    );
    const streaming = params.stream === true;
    const showUsage = streaming && params.stream_options?.include_usage === true;
    const body: ChatCompletionCreateParams =
      streaming && !showUsage ? { ...params, stream_options: { ...params.stream_options, include_usage: true } } : params;
    const result = await step.send(() => rawCreate({ ...body, messages: [...session.deriveMessages()] }, requestOptions));
    const read = (reply: StreamedReply) => () => ({
      blocks: replyBlocks(reply.message),
      ...(reply.usage ? { usage: usageFromOpenAI(reply.usage) } : {}),
      ...(reply.model ? { model: reply.model } : {}),
      ...(reply.finishReason ? { finishReason: reply.finishReason } : {}),
    });
    if (streaming) {
      const source = result as AsyncIterable<ChatCompletionChunk> & { controller: AbortController };
      return recordingStream(
        source,
        {
          showUsage,
          done: async (reply, aborted) => {
            if (aborted || signal?.aborted) return step.abandon('aborted');
            await step.finish(read(reply));
          },
          failed: async () => step.abandon('aborted'),
        },
        client,
      );
    }
    const completion = result as ChatCompletion;
    const choice = completion.choices?.[0];
    if (!choice) {
      step.abandon();
      return completion;
    }
    await step.finish(
      read({ message: choice.message, usage: completion.usage ?? undefined, model: completion.model, finishReason: choice.finish_reason ?? undefined }),
    );
    return completion;
  };

  const compaction: Compaction = {
    session,
    engine,
    provider,
    messages: () => sessionMessages(session),
    close: (opts) => conversation.close(opts),
  };

  const completions = forward(client.chat.completions, { create });
  const chat = forward(client.chat, { completions });
  // The Responses API, stateless, over the same conversation (responses/create.ts).
  const responses = wrapResponses(client, conversation);
  return forward(client, { chat, compaction, ...(responses ? { responses } : {}) }) as CompactingClient<C>;
}
