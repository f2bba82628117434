/**
 * A provider SDK's stream, re-made over an iterator that records as it goes. The stream handed
 * back is a new instance of the SDK's own class, taken from the stream the SDK returned (the
 * openai and @anthropic-ai/sdk `Stream`s share the constructor `(iterator, controller, client)`),
 * so xcompact imports no SDK code and `for await`, `tee()`, `toReadableStream()` and
 * `controller` work as before.
 */
import type { Reply, Step } from './conversation';

type StreamCtor<S> = new (iterator: () => AsyncIterator<unknown>, controller: AbortController, client?: unknown) => S;

export interface StreamHooks<E> {
  /** Each event, before the caller sees it; returns what the caller sees (undefined: hidden). */
  see(event: E): E | undefined;
  /** The source ended (aborted: the SDK ends an aborted stream silently). */
  done(aborted: boolean): Promise<void>;
  /** The source threw, or the caller stopped reading early. */
  failed(): Promise<void>;
}

export function recordingStream<E, S extends AsyncIterable<E> & { controller: AbortController }>(source: S, hooks: StreamHooks<E>, client: unknown): S {
  async function* iterate(): AsyncGenerator<E> {
    let finished = false;
    try {
      for await (const event of source) {
        const shown = hooks.see(event);
        if (shown !== undefined) yield shown;
      }
      finished = true;
      await hooks.done(source.controller.signal.aborted);
    } finally {
      if (!finished) await hooks.failed();
    }
  }
  const Ctor = (source as unknown as { constructor: StreamCtor<S> }).constructor;
  return new Ctor(() => iterate(), source.controller, client);
}

/** The caller's object with some members replaced; every other member read from (and bound to) the object itself. */
export function forward<T extends object>(target: T, replaced: Record<string, unknown>): T {
  return new Proxy(target, {
    get(t, key) {
      if (typeof key === 'string' && Object.hasOwn(replaced, key)) return replaced[key];
      const value: unknown = Reflect.get(t, key, t);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(t) : value;
    },
    has(t, key) {
      return (typeof key === 'string' && Object.hasOwn(replaced, key)) || Reflect.has(t, key);
    },
  });
}

/**
 * A face's streamed reply, recorded into its step when the stream ends: `outcome()` says whether
 * the events `see` was shown make a whole reply (or the provider's own failure event came:
 * `error`; the stream ended before its last event: `aborted`), and `reply()` reads it. A stream
 * the caller stopped reading, or that threw, ends the step as `aborted`.
 */
export function recordStream<E, S extends AsyncIterable<E> & { controller: AbortController }>(
  step: Step,
  source: S,
  hooks: { see(event: E): E | undefined; outcome(): 'complete' | 'error' | 'aborted'; reply(): Reply },
  client: unknown,
  signal: AbortSignal | undefined,
): S {
  return recordingStream<E, S>(
    source,
    {
      see: hooks.see,
      done: async (aborted) => {
        if (!step.current) return;
        const outcome = aborted || signal?.aborted ? 'aborted' : hooks.outcome();
        if (outcome !== 'complete') return step.abandon(outcome);
        await step.finish(hooks.reply);
      },
      failed: async () => step.abandon('aborted'),
    },
    client,
  );
}
