/**
 * The checkpoint a compaction puts on the surface: one user message whose text frames the
 * summary so the model treats it as established background.
 */
import { checkpointHandle, checkpointRecallNote } from '../recall';

export const CHECKPOINT_PREAMBLE =
  'This is an automatically generated checkpoint condensing an earlier span of the conversation to free up context. ' +
  'Treat the captured context as established background and build on it without restating it. ' +
  'Continue the task directly from the messages that follow, without acknowledging this checkpoint.';

export const SUMMARY_OPEN = '<compacted-summary>';
export const SUMMARY_CLOSE = '</compacted-summary>';

/**
 * The checkpoint's text. With a recall handle (recall on, docs/recall.md) a last line after the
 * summary names it and the tool; without one the frame is exactly what it always was, so a
 * session without recall sends the bytes it sent before (prompt-cache prefixes hold).
 */
export function frameCheckpoint(summary: string, recallHandle?: string): string {
  const framed = `${CHECKPOINT_PREAMBLE}\n\n${SUMMARY_OPEN}\n${summary.trim()}\n${SUMMARY_CLOSE}`;
  return recallHandle === undefined ? framed : `${framed}\n\n${checkpointRecallNote(recallHandle)}`;
}

/**
 * The handle a checkpoint framed now would name, for pricing a frame before its bracket's seq
 * is known: the log's length has at least as many digits as any seq in it.
 */
export function pricingHandle(recall: boolean, logLength: number): string | undefined {
  return recall ? checkpointHandle(logLength) : undefined;
}

/** The summary inside a framed checkpoint, or undefined when the text is not one. */
export function unframeCheckpoint(text: string): string | undefined {
  const open = text.indexOf(SUMMARY_OPEN);
  const close = text.lastIndexOf(SUMMARY_CLOSE);
  if (open < 0 || close < open) return undefined;
  return text.slice(open + SUMMARY_OPEN.length, close).trim();
}
