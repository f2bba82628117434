/**
 * What every summarizer checks of a model's reply before it may become a checkpoint, and the
 * typed errors it throws: one place, so the OpenAI and AI SDK summarizers (and the bounding
 * wrapper around either) refuse the same reply with the same `SummarizerError` code. A
 * truncated, filtered, incomplete, empty or tool-calling reply is never used.
 */
import type { Usage } from '../../session/events';
import { SummarizerError, type SummaryRequest } from './contract';

/** A reply in provider-neutral terms. */
export interface SummaryReply {
  /** The text as received (untrimmed). */
  text: string;
  /** How many tool calls the reply made. */
  toolCalls: number;
  /** Why generation stopped: cut at a token limit, stopped by a filter, anything else; undefined when the reply gave no reason (it is incomplete). */
  stop: 'length' | 'content-filter' | 'failed' | 'other' | undefined;
  /** The provider's own name of the reason, quoted in errors (`length`, `content_filter`, `stop`). */
  finishReason?: string;
  usage?: Pick<Usage, 'promptTokens' | 'completionTokens'>;
}

/**
 * How a provider's finish reason reads for a summary: either SDK's spelling (`content_filter`,
 * `content-filter`); no reason at all means an incomplete response.
 */
export function stopOf(finishReason: string | null | undefined): SummaryReply['stop'] {
  if (finishReason === null || finishReason === undefined) return undefined;
  if (finishReason === 'length') return 'length';
  if (finishReason === 'content_filter' || finishReason === 'content-filter') return 'content-filter';
  if (finishReason === 'error' || finishReason === 'interrupted') return 'failed';
  return 'other';
}

/** The reply's summary text, trimmed; a reply that cannot be used throws the SummarizerError saying why. */
export function checkSummaryReply(request: Pick<SummaryRequest, 'maxTokens' | 'contextWindow'>, reply: SummaryReply): string {
  const got = `(${reply.text.length} characters of text, ${reply.toolCalls} tool call(s))`;
  const reason = reply.finishReason !== undefined ? ` (finish reason "${reply.finishReason}")` : '';
  if (reply.stop === 'length') throw new SummarizerError('summary-truncated', lengthMessage(request, reply.usage, got, reply.finishReason ?? 'length'));
  if (reply.stop === 'content-filter') throw new SummarizerError('summary-truncated', `The provider's content filter stopped the summary${reason} ${got}.`);
  if (reply.stop === undefined)
    throw new SummarizerError('summary-request', `The summary reply ended without a finish reason ${got}: the response is incomplete.`);
  // The AI SDK reports a generation the provider broke off as `error` (ai 6/7) or `interrupted`
  // (ai 7), with the partial text: a summary cut short must never replace the span.
  if (reply.stop === 'failed') throw new SummarizerError('summary-request', `The summary reply ended in an error${reason} ${got}: the response is incomplete.`);
  const text = reply.text.trim();
  if (text === '') {
    if (reply.toolCalls > 0)
      throw new SummarizerError('summary-tool-calls', `The summarization model called ${reply.toolCalls} tool(s) instead of writing the summary${reason}.`);
    throw new SummarizerError('summary-empty', `The summarization model returned ${reply.text.length === 0 ? 'no text' : 'only whitespace'}${reason}.`);
  }
  return text;
}

/**
 * Why a reply stopped at a length limit. The reason alone does not say: OpenAI sends it at
 * max_tokens, llama.cpp also when prompt + generated fills its own context window (`-c`,
 * divided by `--parallel`), and raising max_tokens cannot help there. The usage tells:
 * generation that stopped short of max_tokens, or prompt + completion at the known window,
 * hit the window.
 */
export function lengthMessage(
  request: Pick<SummaryRequest, 'maxTokens' | 'contextWindow'>,
  usage: Pick<Usage, 'promptTokens' | 'completionTokens'> | undefined,
  got: string,
  finishReason = 'length',
): string {
  const never = 'a truncated checkpoint is never used';
  const reason = `(finish reason "${finishReason}")`;
  if (!usage) {
    return (
      `The summary was cut off ${reason} ${got}; ${never}. The server reported no usage, so it is unknown whether max_tokens ${request.maxTokens} ` +
      "or the server's own context window was reached: raise maxTokens, or summarize a smaller span."
    );
  }
  const used = usage.promptTokens + usage.completionTokens;
  const atWindow = request.contextWindow !== undefined && used >= request.contextWindow;
  if (atWindow || usage.completionTokens < request.maxTokens) {
    const where = atWindow ? `the model's window of ${request.contextWindow}` : `the server's window (before max_tokens ${request.maxTokens})`;
    return (
      `The summary was cut off by the server's context window, not by max_tokens: prompt ${usage.promptTokens} + generated ${usage.completionTokens} = ${used} tokens reached ${where} ` +
      `${reason} ${got}; ${never}. Raising maxTokens cannot help: give the summarizer a smaller input (set the summarization model's contextWindow ` +
      "to the server's real window — llama.cpp: -c divided by --parallel — so the input is bounded to leave room for the summary, or summarize a smaller span), or start the server with a larger context."
    );
  }
  return `The summary was cut off at max_tokens ${request.maxTokens} ${reason} ${got}; ${never}. Raise maxTokens or summarize a smaller span.`;
}

/** The error of a summary the caller cancelled (before, during or after its request): no partial summary is kept. */
export function summaryCancelled(signal: AbortSignal, cause: unknown = signal.reason): SummarizerError {
  const reason = signal.reason instanceof Error ? `: ${signal.reason.message}` : '';
  return new SummarizerError('summary-cancelled', `The summary request was cancelled${reason}; no partial summary is kept.`, { cause });
}

export function throwIfCancelled(signal: AbortSignal): void {
  if (signal.aborted) throw summaryCancelled(signal);
}
