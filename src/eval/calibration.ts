/**
 * The replay's token counts fitted to what the recorded harness was billed: per file, from
 * that file's own usage, the way the engine's meter calibrates online (src/services/metering/
 * calibration.ts) — provider tokens ≈ ratio × our price + a constant per message of each role
 * — with what a recorded file shows beyond it:
 *
 * - what every request carried unrecorded (the harness's system prompt and tool definitions,
 *   files it re-attached after a compaction, history before the file starts): one intercept
 *   per segment, a segment being the requests between two of the harness's compactions, or
 *   after a point where the provider counted far less than before though the transcript did
 *   not shrink (the harness dropped something it never recorded: earlier turns' reasoning on a
 *   resumed session, a cleared tool result);
 * - reasoning a reply carried and the harness sent back with it (Codex re-sends its encrypted
 *   reasoning within a turn; Claude's thinking is recorded as a summary of what was billed):
 *   a coefficient on each reply's reasoning, its recorded text's tokens or, when the text is
 *   not in the file, the reasoning tokens its usage reports.
 *
 * The fit minimises the summed relative error |fitted − recorded| / recorded (iteratively
 * reweighted least squares, as the engine's fit), with the ratio and the per-message
 * constants held in the engine's ranges (CALIBRATION). It needs no constant of any harness:
 * an unseen file gets its own figures from its own usage. A file without usage gets the
 * identity (our own count, nothing unrecorded).
 *
 * Replays of policies (evaluate.ts) count with the fitted ratio, constants and reasoning
 * coefficient, and one unrecorded part for every request: the smallest intercept of the
 * segments that start at the file's start or at a compaction (what the harness sent on every
 * request; the larger ones hold what it added after its own compactions, or history the file
 * lacks).
 */
import { CALIBRATION, gauss } from '../services/metering';
import { toChatMessage, type ChatMessage } from '../session/derive';
import { isCheckpoint, type AppendInput, type SessionEvent } from '../session/events';
import { Session } from '../session/session';
import { Pricer, type CountCalibration } from './pricing';

export interface CalibrationSegment {
  /** Seq of the segment's first recorded reply. */
  fromSeq: number;
  /** Why a segment starts there: the file's start, one of the harness's compactions, or an unrecorded drop in the provider's count. */
  cause: 'start' | 'compaction' | 'unrecorded drop';
  /** Recorded requests in it. */
  requests: number;
  /** Provider tokens its requests carried beyond the fitted count of their messages, system prompt and tools. */
  intercept: number;
}

/** The count's figures (ratio, per-message framing, reasoning coefficient, unrecorded part: pricing.ts) and the segments they were fitted over. */
export interface ReplayCalibration extends CountCalibration {
  segments: CalibrationSegment[];
  /** Recorded requests (replies with a usage) the fit rests on. */
  requests: number;
}

/** The uncalibrated count: our own tokens, nothing unrecorded. */
export const IDENTITY_CALIBRATION: Readonly<ReplayCalibration> = Object.freeze({
  ratio: 1,
  perMessage: Object.freeze({ user: 0, assistant: 0, tool: 0 }),
  reasoning: 0,
  unrecorded: 0,
  segments: [],
  requests: 0,
});

/** |replayed − recorded| / recorded over the recorded requests: median and 90th percentile (nearest rank), and the largest. */
export interface Fidelity {
  requests: number;
  median: number;
  p90: number;
  max: number;
}

/** One recorded request beside its fitted count. */
export interface FittedRequest {
  seq: number;
  recorded: number;
  replayed: number;
  segment: number;
}

export interface CalibrationFit {
  calibration: ReplayCalibration;
  /** Undefined when the file records no usage. */
  fidelity: Fidelity | undefined;
  requests: FittedRequest[];
}

/**
 * A drop in the provider's count that the transcript does not explain: the request after it
 * counted at least this share of the one before less than the messages' own change.
 */
const UNRECORDED_DROP = 0.05;
/** Reasoning is at most billed this many times its recorded text (a summary of the thinking billed). */
const MAX_REASONING = 4;
const ROUNDS = 8;
/** Pull toward the seed (ratio 1, nothing per message, no reasoning) in squared relative error: weak against the file's evidence. */
const RIDGE = { ratio: 1e-2, perMessage: 1e-3, reasoning: 1e-2 } as const;
/** Residuals below this relative error weigh as this (the reweighting never divides by 0). */
const RESIDUAL_FLOOR = 0.005;

const ROLE_INDEX: Record<ChatMessage['role'], number> = { system: 0, user: 0, developer: 0, assistant: 1, tool: 2, function: 2 };

/** The reasoning a reply carried, in our tokens: its recorded text, else what its usage reports. */
export function reasoningTokensOf(event: SessionEvent<'assistant/message'>, count: (text: string) => number): number {
  const text = event.data.content
    .filter((b) => b.type === 'reasoning')
    .map((b) => (b as { text: string }).text)
    .join('\n');
  return text !== '' ? count(text) : (event.data.usage?.reasoningTokens ?? 0);
}

/**
 * Each reply of a session, as the chat message a request sends it (JSON) → the reasoning it
 * carried: the chat projection leaves reasoning out, the provider may not.
 */
export function reasoningIndex(events: Iterable<SessionEvent>, count: (text: string) => number): Map<string, number> {
  const out = new Map<string, number>();
  for (const e of events) {
    if (e.type !== 'assistant/message' || e.surfaceOp === undefined) continue;
    const tokens = reasoningTokensOf(e, count);
    if (tokens > 0) out.set(JSON.stringify(toChatMessage(e)), tokens);
  }
  return out;
}

interface Row {
  seq: number;
  y: number;
  segment: number;
  /** Our count of the request (envelope and messages), messages by role, reasoning carried. */
  priced: number;
  roles: [number, number, number];
  reasoning: number;
}

/** The requests of a recorded session (the harness's compactions applied) and their recorded usage. */
function recordedRows(source: Session, pricer: Pricer, reasoning: Map<string, number>): { rows: Row[]; causes: CalibrationSegment['cause'][] } {
  const scratch = Session.inMemory(`${source.id}-calibration`);
  const rows: Row[] = [];
  const causes: CalibrationSegment['cause'][] = [];
  let pendingCompaction = false;
  let previous: Row | undefined;
  for (const e of source.events()) {
    if (isCheckpoint(e)) pendingCompaction = true;
    if (e.type === 'assistant/message' && e.data.usage && e.data.usage.promptTokens > 0) {
      const tools = scratch.latestHeader?.data.tools ?? [];
      const messages = scratch.deriveMessages();
      const roles: [number, number, number] = [0, 0, 0];
      let carried = 0;
      for (const m of messages) {
        roles[ROLE_INDEX[m.role] ?? 0]!++;
        if (m.role === 'assistant') carried += reasoning.get(pricer.jsonOf(m)) ?? 0;
      }
      const row: Row = {
        seq: e.seq,
        y: e.data.usage.promptTokens,
        segment: causes.length - 1,
        priced: pricer.tokens({ tools: tools.length === 0 ? '' : JSON.stringify(tools), messages }),
        roles,
        reasoning: carried,
      };
      const dropped = previous !== undefined && row.y - previous.y - (row.priced - previous.priced) < -UNRECORDED_DROP * previous.y;
      if (causes.length === 0 || pendingCompaction || dropped) {
        causes.push(causes.length === 0 ? 'start' : pendingCompaction ? 'compaction' : 'unrecorded drop');
        row.segment = causes.length - 1;
      }
      pendingCompaction = false;
      previous = row;
      rows.push(row);
    }
    const input = { type: e.type, data: e.data } as AppendInput;
    if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    if (e.sourceEventSeqs !== undefined) input.sourceEventSeqs = e.sourceEventSeqs;
    scratch.append(input);
  }
  return { rows, causes };
}

type Bound = [number, number];

/**
 * Minimises Σ |x·β − y| / y by reweighted ridge least squares; a coefficient that leaves its
 * bounds is held at the bound and the others refitted.
 */
function robustFit(x: number[][], y: number[], bounds: Bound[], seed: number[], ridge: number[]): number[] {
  const d = seed.length;
  const base = y.map((v) => 1 / Math.max(1, Math.abs(v)));
  const weights = [...base];
  let beta = [...seed];
  for (let round = 0; round < ROUNDS; round++) {
    const held = new Map<number, number>();
    for (let pass = 0; pass <= d; pass++) {
      const free = seed.map((_, k) => k).filter((k) => !held.has(k));
      const n = free.length;
      const a = new Float64Array(n * n);
      const b = new Float64Array(n);
      for (let i = 0; i < x.length; i++) {
        const row = x[i]!;
        const w2 = weights[i]! * weights[i]!;
        let target = y[i]!;
        for (const [k, v] of held) target -= v * row[k]!;
        for (let p = 0; p < n; p++) {
          const xp = row[free[p]!]!;
          if (xp === 0) continue;
          b[p]! += w2 * xp * target;
          for (let q = 0; q < n; q++) a[p * n + q]! += w2 * xp * row[free[q]!]!;
        }
      }
      for (let p = 0; p < n; p++) {
        const k = free[p]!;
        // A tiny ridge on the intercepts too keeps a segment of one request solvable.
        const r = ridge[k]! > 0 ? ridge[k]! : 1e-12;
        a[p * n + p]! += r;
        b[p]! += r * seed[k]!;
      }
      const solved = n === 0 ? [] : gauss(a, b, n);
      let clamped = false;
      for (let p = 0; p < n; p++) {
        const k = free[p]!;
        const [lo, hi] = bounds[k]!;
        const v = solved[p]!;
        if (!(v >= lo && v <= hi)) {
          held.set(k, Math.min(hi, Math.max(lo, Number.isFinite(v) ? v : seed[k]!)));
          clamped = true;
        }
      }
      if (!clamped || pass === d) {
        beta = seed.map((s, k) => held.get(k) ?? (free.includes(k) ? solved[free.indexOf(k)]! : s));
        break;
      }
    }
    for (let i = 0; i < x.length; i++) {
      let fitted = 0;
      for (let k = 0; k < d; k++) fitted += beta[k]! * x[i]![k]!;
      weights[i] = base[i]! / Math.sqrt(Math.max(Math.abs(fitted - y[i]!) * base[i]!, RESIDUAL_FLOOR));
    }
  }
  return beta;
}

/** The nearest-rank percentile of sorted values (p in (0, 1]). */
function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)]!;
}

/**
 * Fits the replay's count to a recorded session's usage (the session as imported: the
 * harness's compactions are checkpoints) and measures, for every recorded request, the fitted
 * count of the request on the surface just before its reply against what the provider reported.
 */
export function fitReplayCalibration(source: Session, pricer = new Pricer('o200k_base')): CalibrationFit {
  const reasoning = reasoningIndex(source.events(), (t) => pricer.count(t));
  const { rows, causes } = recordedRows(source, pricer, reasoning);
  if (rows.length === 0)
    return { calibration: { ...IDENTITY_CALIBRATION, perMessage: { ...IDENTITY_CALIBRATION.perMessage } }, fidelity: undefined, requests: [] };
  const segs = causes.length;
  // Features: one intercept per segment, our count, messages by role, reasoning carried.
  const x = rows.map((r) => [...causes.map((_, k) => (r.segment === k ? 1 : 0)), r.priced, ...r.roles, r.reasoning]);
  const free: Bound = [-Infinity, Infinity];
  const perNode: Bound = [CALIBRATION.minPerNode, CALIBRATION.maxPerNode];
  const bounds: Bound[] = [...causes.map(() => free), [CALIBRATION.minRatio, CALIBRATION.maxRatio], perNode, perNode, perNode, [0, MAX_REASONING]];
  const seed = [...causes.map(() => 0), 1, 0, 0, 0, 0];
  const ridge = [...causes.map(() => 0), RIDGE.ratio, RIDGE.perMessage, RIDGE.perMessage, RIDGE.perMessage, RIDGE.reasoning];
  const beta = robustFit(
    x,
    rows.map((r) => r.y),
    bounds,
    seed,
    ridge,
  );
  const requests: FittedRequest[] = rows.map((r, i) => ({
    seq: r.seq,
    recorded: r.y,
    replayed: Math.round(x[i]!.reduce((s, v, k) => s + v * beta[k]!, 0)),
    segment: r.segment,
  }));
  const segments: CalibrationSegment[] = causes.map((cause, k) => {
    const inIt = rows.filter((r) => r.segment === k);
    return { fromSeq: inIt[0]!.seq, cause, requests: inIt.length, intercept: Math.round(beta[k]!) };
  });
  const structural = segments.filter((s) => s.cause !== 'unrecorded drop').map((s) => s.intercept);
  const calibration: ReplayCalibration = {
    ratio: beta[segs]!,
    perMessage: { user: beta[segs + 1]!, assistant: beta[segs + 2]!, tool: beta[segs + 3]! },
    reasoning: beta[segs + 4]!,
    unrecorded: Math.max(0, Math.min(...structural)),
    segments,
    requests: rows.length,
  };
  const errors = requests.map((r) => Math.abs(r.replayed - r.recorded) / r.recorded).sort((a, b) => a - b);
  return {
    calibration,
    fidelity: { requests: errors.length, median: percentile(errors, 0.5), p90: percentile(errors, 0.9), max: errors[errors.length - 1]! },
    requests,
  };
}

/**
 * A pricer that counts as the calibrated provider would, `session`'s replies' reasoning looked
 * up by the messages that carry them; `raw` (the uncalibrated pricer the fit used) lends its
 * cached prices, so no message is tokenized twice.
 */
export function calibratedPricer(session: Session, calibration: ReplayCalibration, raw = new Pricer('o200k_base')): Pricer {
  return new Pricer(raw.tokenizerName, { calibration, reasoning: reasoningIndex(session.events(), (t) => raw.count(t)), raw });
}
