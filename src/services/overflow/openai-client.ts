/**
 * The client xcompact accepts: any `openai` SDK client, version 6 or 7, described by the calls
 * xcompact makes on it rather than by the SDK's class. The class carries `#private` members,
 * which make one major version's `OpenAI` unassignable to the other's even where every call
 * is the same; the user's copy of the SDK (a peer dependency) need not be the one xcompact's
 * types were built against. Type-only: importing this loads no SDK.
 */
import type { ChatCompletionCreateParamsStreaming } from 'openai/resources/chat/completions';

export interface OpenAIClient {
  chat: {
    completions: {
      /** The streamed chat-completions call (the chunks are read as `ChatCompletionChunk`). */
      create(body: ChatCompletionCreateParamsStreaming, options?: { signal?: AbortSignal; maxRetries?: number }): PromiseLike<AsyncIterable<unknown>>;
    };
  };
  /** A copy with changed options (the summarizer patches a copy, never the caller's client). */
  withOptions(options: { maxRetries?: number }): OpenAIClient;
}
