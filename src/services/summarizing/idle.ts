/**
 * The idle limit of a model summarizer's stream: the provider must send something — the
 * response's first byte, then each chunk — within `idleTimeoutMs` of the last sign of life.
 * An SDK's own timeout covers the wait for the headers at most, never a stream body that
 * stops: without this a stalled summary holds the compaction lock forever.
 *
 * This only reads a stream and stops reading it; whether and when the compaction gives up as
 * a whole (summaryTimeoutMs) is the transaction chart's `after` delay.
 */
import { SummarizerError } from './contract';

export interface IdleWatch {
  /** Pass this to the request: it aborts with the caller's signal, or when the stream idles. */
  readonly signal: AbortSignal;
  /** A sign of life: the idle clock starts again. */
  alive(): void;
  /** True once the idle limit ended the request. */
  readonly timedOut: boolean;
  /** The `summary-timeout` error to throw once `timedOut`. */
  error(cause?: unknown): SummarizerError;
  /** Stops the clock and detaches from the caller's signal. */
  done(): void;
}

/** Starts the idle clock for one request (no limit when `idleTimeoutMs` is undefined). */
export function watchIdle(signal: AbortSignal, idleTimeoutMs: number | undefined, what = 'the summarizer'): IdleWatch {
  const controller = new AbortController();
  const forward = () => controller.abort(signal.reason);
  if (signal.aborted) forward();
  else signal.addEventListener('abort', forward, { once: true });
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    if (idleTimeoutMs === undefined) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new SummarizerError('summary-timeout', idleMessage(what, idleTimeoutMs)));
    }, idleTimeoutMs);
  };
  arm();
  return {
    signal: controller.signal,
    alive: () => {
      if (!timedOut && !controller.signal.aborted) arm();
    },
    get timedOut() {
      return timedOut;
    },
    error: (cause?: unknown) => new SummarizerError('summary-timeout', idleMessage(what, idleTimeoutMs ?? 0), cause === undefined ? undefined : { cause }),
    done: () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', forward);
    },
  };
}

function idleMessage(what: string, ms: number): string {
  return `${what} sent nothing for ${ms} ms (summaryIdleTimeoutMs): the provider stalled, so the summary was abandoned and nothing was committed. Raise summaryIdleTimeoutMs for a slow model.`;
}
