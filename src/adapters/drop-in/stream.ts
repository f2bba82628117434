/**
 * A streamed reply, passed through to the caller chunk by chunk and accumulated on the way so
 * it can be recorded when the stream ends: content, reasoning, tool calls (by index), finish
 * reason, model and usage of the first choice.
 *
 * The stream handed back is a new instance of the SDK's own `Stream` class (taken from the
 * stream the SDK returned, so xcompact imports no SDK code): `for await`, `tee()`,
 * `toReadableStream()` and `controller` work as before. The usage chunk xcompact asked for
 * (`stream_options.include_usage`) is not shown to a caller that did not ask for it.
 */
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { CompletionMessage, CompletionUsage } from '../../session/writer';

export interface StreamedReply {
  message: CompletionMessage;
  usage: CompletionUsage | undefined;
  model: string | undefined;
  finishReason: string | undefined;
}

export function accumulator(): { add(chunk: ChatCompletionChunk): void; reply(): StreamedReply } {
  let content = '';
  let reasoning = '';
  let model: string | undefined;
  let usage: CompletionUsage | undefined;
  let finishReason: string | undefined;
  const calls: Array<{ id: string; type: string; function: { name: string; arguments: string } }> = [];
  return {
    add(chunk) {
      if (chunk.model) model = chunk.model;
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices ?? []) {
        if (choice.index !== 0) continue;
        const delta = choice.delta as (ChatCompletionChunk.Choice.Delta & { reasoning_content?: string | null }) | undefined;
        if (typeof delta?.content === 'string') content += delta.content;
        if (typeof delta?.reasoning_content === 'string') reasoning += delta.reasoning_content;
        for (const c of delta?.tool_calls ?? []) {
          const call = (calls[c.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
          if (c.id) call.id = c.id;
          if (c.type) call.type = c.type;
          if (c.function?.name) call.function.name += c.function.name;
          if (c.function?.arguments) call.function.arguments += c.function.arguments;
        }
        if (choice.finish_reason) finishReason = choice.finish_reason;
      }
    },
    reply() {
      const message: CompletionMessage = { content, tool_calls: calls.filter(Boolean) };
      if (reasoning) message.reasoning_content = reasoning;
      return { message, usage, model, finishReason };
    },
  };
}

/** What the SDK's `Stream` is built from (its constructor, in openai 6 and 7). */
type StreamCtor<S> = new (iterator: () => AsyncIterator<ChatCompletionChunk>, controller: AbortController, client?: unknown) => S;

/**
 * The caller's stream: the SDK's stream re-made over an iterator that records as it goes.
 * `done` runs once the source ended (the reply complete, unless aborted: the SDK ends an
 * aborted stream silently); `failed` when it threw or the caller stopped reading early.
 */
export function recordingStream<S extends AsyncIterable<ChatCompletionChunk> & { controller: AbortController }>(
  source: S,
  hooks: { showUsage: boolean; done(reply: StreamedReply, aborted: boolean): Promise<void>; failed(): Promise<void> },
  client: unknown,
): S {
  const acc = accumulator();
  async function* iterate(): AsyncGenerator<ChatCompletionChunk> {
    let finished = false;
    try {
      for await (const chunk of source) {
        acc.add(chunk);
        // The usage-only chunk xcompact asked for: a caller that did not ask reads choices[0] of every chunk.
        if (!hooks.showUsage && chunk.choices.length === 0 && chunk.usage) continue;
        yield hooks.showUsage || !chunk.usage ? chunk : { ...chunk, usage: null };
      }
      finished = true;
      await hooks.done(acc.reply(), source.controller.signal.aborted);
    } finally {
      if (!finished) await hooks.failed();
    }
  }
  const Ctor = (source as unknown as { constructor: StreamCtor<S> }).constructor;
  return new Ctor(() => iterate(), source.controller, client);
}
