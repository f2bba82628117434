/**
 * The smallest window a replay can mean anything at: every request carries what the harness
 * sent unrecorded (calibration.ts), and a compacted request still needs room for a summary
 * and the reply. Below it every policy sends every request over the window, so a replay there
 * is refused up front (`WindowTooSmallError`), never run into a table of invalid rows.
 */
import { XcompactError } from '../errors';

/** The replay's summary cap and output reservation: each 4,096 tokens, or a quarter of a smaller window (evaluate.ts). */
const CAP = 4_096;

/**
 * The smallest window (a whole number of k, 1,024 tokens) that holds the unrecorded part, a
 * summary and the output reservation: W ≥ unrecorded + 2 × min(4,096, W / 4).
 */
export function smallestWindow(unrecorded: number): number {
  if (unrecorded <= 0) return 0;
  const w = unrecorded < 2 * CAP ? 2 * unrecorded : unrecorded + 2 * CAP;
  return Math.ceil(w / 1_024) * 1_024;
}

/** A window smaller than `smallestWindow(unrecorded)`: no policy could keep a request under it. */
export class WindowTooSmallError extends XcompactError {
  constructor(
    readonly window: number,
    readonly unrecorded: number,
    readonly smallest: number,
    readonly session: string,
  ) {
    super(
      'eval-window',
      `window ${window.toLocaleString('en-US')} tokens is too small for ${session}: it sent about ${unrecorded.toLocaleString('en-US')} tokens on every request that its transcript does not hold ` +
        `(its system prompt and tool definitions, or history before the file starts, fitted to its recorded usage), and a compacted request also needs a summary and the output reservation, ` +
        `so every policy would send every request over it. Replay at ${smallest.toLocaleString('en-US')} tokens or more, or set the unrecorded part yourself (the calibration's \`unrecorded\`; 0 replays the recorded messages alone).`,
    );
  }
}

/** Refuses a window below the smallest for `unrecorded` (see WindowTooSmallError). */
export function checkWindow(window: number, unrecorded: number, session: string): void {
  const smallest = smallestWindow(unrecorded);
  if (window < smallest) throw new WindowTooSmallError(window, unrecorded, smallest, session);
}
