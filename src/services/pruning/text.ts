/**
 * The text operation of the pruner (docs/spec.md#7-pruning-tool-results): keep the head and the tail of a text, one marker
 * line for the middle, cut on code-point boundaries. Shared by tool-result and tool-call
 * argument pruning.
 */
import { XcompactError } from '../../errors';

/** Settings that cannot give an idempotent prune (or are not counts at all). */
export class PruneSettingsError extends XcompactError {
  constructor(message: string) {
    super('prune-settings', message);
  }
}

/**
 * Upper bound of the marker's length in code points, for any count a JavaScript string can
 * have. The config layer checks headChars + PRUNE_MARKER_MAX_CHARS + tailChars ≤ thresholdChars,
 * which makes every pruned block ≤ thresholdChars, hence a second pass a no-op.
 */
import { PRUNE_MARKER_MAX_CHARS } from '../config';
import { PRUNED_RECALL_NOTE_MAX_CHARS, prunedHandle, prunedRecallNote } from '../recall';
export { PRUNE_MARKER_MAX_CHARS };

/**
 * The line that replaces the middle of a pruned text. With recall on it names the handle the
 * recall tool brings the full text back by (its reserve: PRUNE_MARKER_MAX_CHARS + PRUNED_RECALL_NOTE_MAX_CHARS).
 */
export function pruneMarker(removedChars: number, recallHandle?: string): string {
  return `\n[… ${removedChars} characters pruned by xcompact${recallHandle === undefined ? '' : prunedRecallNote(recallHandle)} …]\n`;
}

function isHigh(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}

function isLow(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/** Code points of `s`, as `for…of` counts them (a well-formed pair is one, a lone surrogate is one). */
export function codePointLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    if (isHigh(s.charCodeAt(i)) && i + 1 < s.length && isLow(s.charCodeAt(i + 1))) i++;
    n++;
  }
  return n;
}

/** UTF-16 index just after the first `k` code points. */
function indexAfter(s: string, k: number): number {
  let i = 0;
  for (let n = 0; n < k && i < s.length; n++) {
    i += isHigh(s.charCodeAt(i)) && i + 1 < s.length && isLow(s.charCodeAt(i + 1)) ? 2 : 1;
  }
  return i;
}

/** UTF-16 index where the last `k` code points start. */
function indexBeforeLast(s: string, k: number): number {
  let j = s.length;
  for (let n = 0; n < k && j > 0; n++) {
    j -= j >= 2 && isLow(s.charCodeAt(j - 1)) && isHigh(s.charCodeAt(j - 2)) ? 2 : 1;
  }
  return j;
}

export function checkCount(name: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new PruneSettingsError(`${name} must be an integer ≥ 0, got ${String(value)}.`);
  }
}

/**
 * Keeps the first `headChars` and the last `tailChars` code points of `text` and puts one
 * marker line saying how many were removed between them. Returns `text` unchanged when that
 * would not make it shorter (nothing in the middle, or a middle shorter than the marker).
 */
export function truncateMiddle(text: string, s: { headChars: number; tailChars: number; recallHandle?: string | undefined }): string {
  checkCount('headChars', s.headChars);
  checkCount('tailChars', s.tailChars);
  const removed = codePointLength(text) - s.headChars - s.tailChars;
  if (removed <= 0) return text;
  const marker = pruneMarker(removed, s.recallHandle);
  if (codePointLength(marker) >= removed) return text;
  return text.slice(0, indexAfter(text, s.headChars)) + marker + text.slice(indexBeforeLast(text, s.tailChars));
}

/** Code points a marker may take: a recall handle makes it longer. */
export function markerReserve(recall: boolean): number {
  return PRUNE_MARKER_MAX_CHARS + (recall ? PRUNED_RECALL_NOTE_MAX_CHARS : 0);
}

/** The cut of node `seq`: with recall on, its marker names the node's handle. */
export function cutSettings(
  s: { headChars: number; tailChars: number; recall?: boolean | undefined },
  seq: number,
): { headChars: number; tailChars: number; recallHandle?: string } {
  return s.recall === true
    ? { headChars: s.headChars, tailChars: s.tailChars, recallHandle: prunedHandle(seq) }
    : { headChars: s.headChars, tailChars: s.tailChars };
}
