/**
 * What a recorded session says the harness really sent and paid, from its provider usage
 * alone, and how closely a replay's token count follows it:
 * - `recordedOverhead`: the tokens the first recorded request held beyond what its messages
 *   (and recorded system prompt and tools) count: the system prompt and tool definitions a
 *   harness sends without recording them;
 * - `requestFidelity`: for every recorded usage, the replayed request before it (the same
 *   history, the harness's own compactions applied) against that usage's input tokens;
 * - `asRecorded`: the "as recorded" row: cost billed from the recorded usage only, the peak
 *   request, the requests over a window, the harness's compactions.
 * Reads an imported session (its checkpoints are the harness's compactions); never replays a policy.
 */
import type { AppendInput, SessionEvent } from '../session/events';
import { isCheckpoint } from '../session/events';
import { Session } from '../session/session';
import { PRICES, type Pricer } from './pricing';

export interface RequestFit {
  /** Seq of the recorded reply whose usage this is. */
  seq: number;
  recorded: number;
  replayed: number;
  /** The harness's compactions before this request: requests of one segment share one history start. */
  segment: number;
}

/** Each recorded usage beside the tokens of the request on the surface just before it (plus `overhead`). */
export function requestFidelity(source: Session, pricer: Pricer, overhead = 0): RequestFit[] {
  const scratch = Session.inMemory(`${source.id}-fidelity`);
  const out: RequestFit[] = [];
  let segment = 0;
  for (const e of source.events()) {
    if (isCheckpoint(e)) segment++;
    if (e.type === 'assistant/message' && e.data.usage && e.data.usage.promptTokens > 0) {
      const tools = scratch.latestHeader?.data.tools ?? [];
      const replayed = pricer.tokens({ tools: tools.length === 0 ? '' : JSON.stringify(tools), messages: scratch.deriveMessages() }) + overhead;
      out.push({ seq: e.seq, recorded: e.data.usage.promptTokens, replayed, segment });
    }
    const input = { type: e.type, data: e.data } as AppendInput;
    if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    if (e.sourceEventSeqs !== undefined) input.sourceEventSeqs = e.sourceEventSeqs;
    scratch.append(input);
  }
  return out;
}

/**
 * The fixed overhead the recorded usage implies, per segment (the requests between two of the
 * harness's compactions): the segment's first request's input tokens minus what its messages
 * (system prompt and tools included, when recorded) count.
 */
export function segmentOverheads(fits: readonly RequestFit[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const f of fits) if (!out.has(f.segment)) out.set(f.segment, Math.max(0, f.recorded - f.replayed));
  return out;
}

/**
 * The fixed overhead of the session: the smallest of its segments' (a segment whose start is
 * not in the file, or after a compaction the harness re-attached files to, implies more). 0
 * when the session has no usage, or its messages already count as much.
 */
export function recordedOverhead(source: Session, pricer: Pricer): number {
  const overheads = [...segmentOverheads(requestFidelity(source, pricer)).values()];
  return overheads.length === 0 ? 0 : Math.min(...overheads);
}

export interface FidelitySummary {
  /** Requests measured: every recorded usage but the first of each segment (which sets its overhead). */
  requests: number;
  median: number;
  max: number;
}

/**
 * |replayed − recorded| / recorded, median and max, each segment's requests measured against
 * its own first request's overhead; `segments` limits it (e.g. [0]: before the first compaction).
 */
export function fidelitySummary(fits: readonly RequestFit[], segments?: readonly number[]): FidelitySummary | undefined {
  const overheads = segmentOverheads(fits);
  const firsts = new Set<number>();
  const errs: number[] = [];
  for (const f of fits) {
    if (segments && !segments.includes(f.segment)) continue;
    if (!firsts.has(f.segment)) {
      firsts.add(f.segment);
      continue;
    }
    errs.push(Math.abs(f.replayed + overheads.get(f.segment)! - f.recorded) / f.recorded);
  }
  if (errs.length === 0) return undefined;
  errs.sort((a, b) => a - b);
  return { requests: errs.length, median: errs[(errs.length - 1) >> 1]!, max: errs[errs.length - 1]! };
}

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

export function asRecorded(source: Session, window: number, prices: Readonly<typeof PRICES> = PRICES): AsRecorded {
  let cost = 0;
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
    const cached = u.cachedTokens ?? 0;
    const written = u.cacheWriteTokens ?? 0;
    const fresh = Math.max(0, u.promptTokens - cached - written);
    cost += (fresh * prices.input + cached * prices.cacheRead + written * prices.cacheWrite + u.completionTokens * prices.output) / 1e6;
    peak = Math.max(peak, u.promptTokens);
    if (u.promptTokens > window) over++;
  }
  return { requestsWithUsage: withUsage, requests, cost, peak, overWindow: over, compactions };
}
