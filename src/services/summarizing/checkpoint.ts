/**
 * The checkpoint a compaction puts on the surface: one user message whose text frames the
 * summary so the model treats it as established background.
 */
export const CHECKPOINT_PREAMBLE =
  'This is an automatically generated checkpoint condensing an earlier span of the conversation to free up context. ' +
  'Treat the captured context as established background and build on it without restating it. ' +
  'Continue the task directly from the messages that follow, without acknowledging this checkpoint.';

export const SUMMARY_OPEN = '<compacted-summary>';
export const SUMMARY_CLOSE = '</compacted-summary>';

export function frameCheckpoint(summary: string): string {
  return `${CHECKPOINT_PREAMBLE}\n\n${SUMMARY_OPEN}\n${summary.trim()}\n${SUMMARY_CLOSE}`;
}

/** The summary inside a framed checkpoint, or undefined when the text is not one. */
export function unframeCheckpoint(text: string): string | undefined {
  const open = text.indexOf(SUMMARY_OPEN);
  const close = text.lastIndexOf(SUMMARY_CLOSE);
  if (open < 0 || close < open) return undefined;
  return text.slice(open + SUMMARY_OPEN.length, close).trim();
}
