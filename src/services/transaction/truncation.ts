/**
 * The truncation checkpoint: the model-free last resort when the summarizer cannot help (the
 * circuit breaker is open, the summary failed, or it came back over its cap). The span's oldest
 * whole turns are shadowed by a checkpoint that carries only what the span's events say — the
 * ledger (the user's words as far as they fit, the files, commands and open errors), no model
 * prose — and is recorded in the log like any other (compaction/start, compaction/summary with
 * `truncation`, the replace, compaction/end), so recall brings the span back by its handle.
 * The charts decide when it runs (a state of their own); this only writes the text.
 */
import type { SummaryOutcome, TruncationReason } from '../core';
import type { ServiceDeps } from '../core';
import type { RangeSelection } from '../selection';
import { deriveLedger, fitCheckpointLedger, renderLedger, withLedger } from '../summarizing';
import { buildSummaryRequest } from './request';

/** Why the span is not summarized, as the checkpoint tells the model. */
const WHY: Record<TruncationReason, string> = {
  'breaker-open': 'summaries are paused after repeated failures',
  'summary-failed': 'its summary could not be written',
  'summary-over-cap': 'its summary came back too long',
};

/** The checkpoint's opening line: what happened, so the model does not read the ledger as a summary. */
export function truncationNote(reason: TruncationReason): string {
  return `[Truncated without a summary: ${WHY[reason]}. The oldest turns were dropped; what they asked and touched is listed below.]`;
}

/**
 * The truncation checkpoint's text for a span: the note, then the span's ledger fitted as a
 * summary's would be (the lists in a quarter of the summary cap, the user's words in their own
 * budget), so it is never larger than the checkpoint the selection sized the span for.
 */
export function truncateSpan(
  deps: Pick<ServiceDeps, 'session' | 'config' | 'tokenizerName'> & Partial<Pick<ServiceDeps, 'meter' | 'tokenizerFor'>>,
  input: { range: RangeSelection; reason: TruncationReason },
): SummaryOutcome {
  const request = buildSummaryRequest(deps, input.range, undefined);
  const { ledger } = fitCheckpointLedger(deriveLedger(request.events), Math.floor(request.maxTokens / 4), request.userWordsTokens ?? 0, request.countTokens);
  return { text: withLedger(truncationNote(input.reason), renderLedger(ledger)), requests: 0, truncation: { reason: input.reason } };
}
