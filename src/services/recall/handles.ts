/**
 * The names the model sees for what it can recall, and the lines that tell it so. One module
 * owns the syntax, so the checkpoint frame, the pruner's marker and the index that resolves a
 * handle can never disagree.
 *
 * - `cp-N`: a checkpoint, N the seq of its `compaction/start` (known when the frame is written,
 *   before the checkpoint itself is appended; the seq of the replacing event otherwise).
 * - `pr-N`: a pruned tool result or pruned tool-call arguments, N the seq of the node the prune
 *   rewrote (the pruner knows it when it writes the marker).
 */

/** The recall tool's function name, in both the OpenAI and the AI SDK shapes. */
export const RECALL_TOOL_NAME = 'recall';

export type HandleKind = 'checkpoint' | 'pruned';

export function checkpointHandle(startSeq: number): string {
  return `cp-${startSeq}`;
}

export function prunedHandle(seq: number): string {
  return `pr-${seq}`;
}

/** `cp-17` → checkpoint 17; anything that is not a handle → undefined. */
export function parseHandle(text: string): { kind: HandleKind; seq: number } | undefined {
  const m = /^\s*(cp|pr)-(\d{1,15})\s*$/i.exec(text);
  if (!m) return undefined;
  return { kind: m[1]!.toLowerCase() === 'cp' ? 'checkpoint' : 'pruned', seq: Number(m[2]) };
}

/**
 * The line a checkpoint carries after its summary when recall is on: the handle, and how to
 * ask for a part rather than the whole span.
 */
export function checkpointRecallNote(handle: string): string {
  return (
    `Nothing in this span is lost: the ${RECALL_TOOL_NAME} tool brings back its original messages ` +
    `(${RECALL_TOOL_NAME} {"handle":"${handle}"} for all of them, or {"query":"…"} / {"path":"…"} for the exact text you need: file contents, tool output, errors).`
  );
}

/** What the pruner's marker line says after its count when recall is on. */
export function prunedRecallNote(handle: string): string {
  return `; ${RECALL_TOOL_NAME} handle ${handle} brings back the full text`;
}

/**
 * Longest `prunedRecallNote` for any seq a log can hold (15 digits): the pruner adds it to
 * its marker reserve when recall is on, so head + marker + tail still fits thresholdChars.
 */
export const PRUNED_RECALL_NOTE_MAX_CHARS = prunedRecallNote(prunedHandle(999_999_999_999_999)).length;
