/**
 * The contract every summarizer meets. A summarizer does one thing: turn a span of the
 * conversation into summary text. It never retries, waits or decides whether to compact;
 * the charts do.
 */
import { XcompactError } from '../../errors';
import type { ChatMessage } from '../../session/derive';
import type { SurfaceEvent, Usage } from '../../session/events';

export interface SummaryRequest {
  /** The conversation's system prompt (surface node 0), replayed byte for byte. */
  system: ChatMessage | undefined;
  /** Tool definitions of the conversation's last request, byte for byte. */
  tools: ReadonlyArray<Record<string, unknown>>;
  /**
   * Messages between the system prompt and the span that stay on the surface (earlier
   * checkpoints). They are replayed so the request is a prefix of the conversation's own
   * (warm prompt cache) and must not be summarized again.
   */
  context: readonly ChatMessage[];
  /** The span being condensed, as derived messages, in surface order. */
  messages: readonly ChatMessage[];
  /** The span's events, for summarizers that read structure (tool names, errors). */
  events: readonly SurfaceEvent[];
  /** What the user asked the summary to focus on (`/compact <focus>`). */
  focus?: string;
  /** The model that writes the summary. */
  target: { provider: string; model: string };
  /** Summary output cap. */
  maxTokens: number;
  /**
   * Tokens the user's own messages may take beyond `maxTokens` (config `userWordsTokens`): a
   * summarizer that keeps them verbatim (the checkpoint ledger's `<user-messages>`) fits them in
   * this budget of their own, so they never compete with the summary for its cap, and the
   * model writes no more for them. Absent or 0: they share the cap.
   */
  userWordsTokens?: number;
  /** The request field that carries the cap, when the target model needs a particular one. */
  outputCapField?: 'max_tokens' | 'max_completion_tokens';
  /** The summarizer model's context window, when known: the request must fit inside it. */
  contextWindow?: number;
  /** Token count of a text with the target model's tokenizer. */
  countTokens: (text: string) => number;
  /**
   * Longest silence from the provider, in ms: before the response starts and between two
   * chunks of it (config `summaryIdleTimeoutMs`). A model summarizer that hears nothing for
   * this long gives up with `summary-timeout`. Absent: no idle limit.
   */
  idleTimeoutMs?: number;
}

export interface SummaryResult {
  text: string;
  provider?: string;
  model?: string;
  /** Total usage over every request made (chunked summaries make several). */
  usage?: Usage;
  /** Number of model requests made (0 for a model-free summarizer). */
  requests: number;
  /** How the input was bounded to fit the summarizer's window, when a bounding wrapper ran. */
  bounding?: BoundingReport;
}

/** What a bounding wrapper (`BoundedSummarizer`) did to fit a request into the window. */
export interface BoundingReport {
  /** `as-is`: sent whole; `truncated`: oversized blocks cut, one request; `chunked`: several requests, rolling merge. */
  mode: 'as-is' | 'truncated' | 'chunked';
  /** The prompt-token budget the requests had to fit (absent when no window was known). */
  budget?: number;
  /** Blocks cut, in the single request or before and while chunking. */
  cutBlocks: number;
  /** Calls made to the inner summarizer. */
  chunks: number;
}

export interface Summarizer {
  readonly name: string;
  summarize(request: SummaryRequest, signal: AbortSignal): Promise<SummaryResult>;
}

export type SummarizerErrorCode =
  | 'summary-truncated' // finish reason `length`: the summary was cut off
  | 'summary-empty' // no text, or whitespace only
  | 'summary-tool-calls' // the model called tools instead of writing
  | 'summary-cancelled' // the caller's signal aborted the request
  | 'summary-request' // the request failed (HTTP error, connection); `cause` holds the SDK error
  | 'summary-input-too-large' // even bounded, the input cannot fit the summarizer's window
  | 'summary-timeout'; // the provider stalled (summaryIdleTimeoutMs) or the summary overran its deadline (summaryTimeoutMs)

export class SummarizerError extends XcompactError {
  declare readonly code: SummarizerErrorCode;

  constructor(code: SummarizerErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}
