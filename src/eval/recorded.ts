/**
 * The harness's own run, as a recorded session shows it: the "as recorded" row of eval.
 * - `asRecorded`: cost billed from the recorded usage only, the peak request, the requests
 *   over a window, the harness's compactions;
 * - `recordedMemory`: the memory measures (memory.ts) of what the harness really sent, its
 *   own summaries (the checkpoints its compactions were imported as) included, measured
 *   against the conversation as lived, exactly as every replayed policy is measured.
 * Reads an imported session (its checkpoints are the harness's compactions); never replays a
 * policy. How closely the replay's count follows the recorded usage: calibration.ts.
 */
import type { AppendInput, Usage } from '../session/events';
import { isCheckpoint } from '../session/events';
import { Session } from '../session/session';
import { withoutCompactions } from './lived';
import { MemoryMeter, transcriptOf, type MemoryFigures } from './memory';
import { PRICES } from './pricing';

/** The harness's own run, from its recorded usage alone. */
export interface AsRecorded {
  /** Replies that carry usage, of all replies. */
  requestsWithUsage: number;
  requests: number;
  /** Dollars: input at the input price, cache reads and writes at theirs, output at the output price. */
  cost: number;
  /** The largest recorded request (input tokens, cache included). */
  peak: number;
  /** Recorded requests larger than `window`. */
  overWindow: number;
  /** The harness's compactions (checkpoints in the imported log). */
  compactions: number;
}

/** Dollars one recorded usage bills: input at the input price, cache reads and writes at theirs, output at the output price. */
export function usageCost(u: Usage, prices: Readonly<typeof PRICES> = PRICES): number {
  const cached = u.cachedTokens ?? 0;
  const written = u.cacheWriteTokens ?? 0;
  const fresh = Math.max(0, u.promptTokens - cached - written);
  return (fresh * prices.input + cached * prices.cacheRead + written * prices.cacheWrite + u.completionTokens * prices.output) / 1e6;
}

/** `extraCost`: dollars the harness paid beside the session's own usage (its compaction calls, recorded apart). */
export function asRecorded(source: Session, window: number, prices: Readonly<typeof PRICES> = PRICES, extraCost = 0): AsRecorded {
  let cost = extraCost;
  let peak = 0;
  let over = 0;
  let withUsage = 0;
  let requests = 0;
  let compactions = 0;
  for (const e of source.events()) {
    if (isCheckpoint(e)) compactions++;
    if (e.type !== 'assistant/message') continue;
    requests++;
    const u = e.data.usage;
    if (!u) continue;
    withUsage++;
    cost += usageCost(u, prices);
    peak = Math.max(peak, u.promptTokens);
    if (u.promptTokens > window) over++;
  }
  return { requestsWithUsage: withUsage, requests, cost, peak, overWindow: over, compactions };
}

/**
 * The memory measures of the harness's own requests: at each recorded reply, the messages on
 * the imported surface (the harness's compactions applied: its summaries, what it kept) set
 * against the conversation as lived (`withoutCompactions`), the same transcript and the same
 * meter every policy of a replay is measured with.
 */
export function recordedMemory(source: Session, lived: Session = withoutCompactions(source)): MemoryFigures {
  const meter = new MemoryMeter(transcriptOf(lived.events()));
  const scratch = Session.inMemory(`${source.id}-as-recorded`);
  let compacted = false;
  for (const e of source.events()) {
    if (isCheckpoint(e)) compacted = true;
    if (e.type === 'assistant/message') {
      meter.observe(scratch.deriveMessages(), compacted);
      compacted = false;
    }
    const input = { type: e.type, data: e.data } as AppendInput;
    if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    if (e.sourceEventSeqs !== undefined) input.sourceEventSeqs = e.sourceEventSeqs;
    scratch.append(input);
  }
  return meter.figures();
}
