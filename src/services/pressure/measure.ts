/**
 * Pressure readings: the meter's total against the routed model's threshold (what the
 * charts judge), and the figures `engine.measure()` reports.
 */
import { XcompactError } from '../../errors';
import { BudgetError, modelInfoFor, policyFor, type ResolvedBudget } from '../config';
import type { ServiceDeps } from '../core';
import type { Session } from '../../session/session';
import type { Measurement } from '../metering';
import { isSilentOverflow } from '../overflow';
import { routeBudget } from '../core';
import { weighPressure } from '../economics';
import type { PressureEconomics } from '../economics';

export interface PressureReading {
  provider: string;
  model: string;
  totalTokens: number;
  threshold: number;
  retainTokens: number;
  contextWindow: number;
  /** Where a background summary starts (SPEC §13); absent when background compaction is off for the route. */
  prepareAt?: number;
  /**
   * With background compaction: where a step waits for a summary still being written, halfway
   * from the threshold to the message budget (the other half stays a margin for the count). Between
   * the threshold and here the request still fits, so the agent goes on; a summary ready and held
   * is committed from the threshold, and with none in flight the threshold's relief runs as usual.
   */
  waitAt?: number;
  /** The provider reported a prompt above the window: it truncated the request silently (llama.cpp, Ollama). */
  silentOverflow?: { seq: number; promptTokens: number };
  /** The cost model's figures (config `economics`): whether compacting below the threshold, or pruning at it, pays. */
  economics?: PressureEconomics;
  /**
   * Requests the route's server works on at once (the model's `concurrency`; llama.cpp's `-np`):
   * with 1, a background summary waits until the agent is not waiting for a reply. Absent: unbounded.
   */
  concurrency?: number;
  /** The route's `backgroundCommit` is 'ready': a background summary is committed as soon as it is ready, not held until the threshold. */
  commitWhenReady?: boolean;
}

export type ReadingResult =
  | { kind: 'unrouted' }
  | { kind: 'misconfigured'; provider: string; model: string; code: string; message: string }
  | { kind: 'reading'; reading: PressureReading };


/** The reading the pressure chart decides on; `silentOverflow` when the provider reported a prompt above the window. */
export function measurePressure(deps: Pick<ServiceDeps, 'session' | 'meter' | 'config'>): ReadingResult {
  const { session, meter } = deps;
  const header = session.latestHeader;
  if (!header) return { kind: 'unrouted' };
  const { provider, model } = header.data;
  let budget: ResolvedBudget;
  try {
    budget = routeBudget(deps);
  } catch (err) {
    if (err instanceof BudgetError) return { kind: 'misconfigured', provider, model, code: err.code, message: err.message };
    throw err;
  }
  const m = meter.measure();
  const reading: Extract<ReadingResult, { kind: 'reading' }>['reading'] = {
    provider,
    model,
    totalTokens: m.totalTokens,
    threshold: budget.threshold,
    retainTokens: budget.retain,
    contextWindow: budget.window,
  };
  const concurrency = modelInfoFor(deps.config, provider, model)?.concurrency;
  if (concurrency !== undefined) reading.concurrency = concurrency;
  if (budget.prepare !== undefined) {
    const paced = policyFor(deps.config, provider, model).prepareRatio === undefined ? pacedPrepare(session, m.totalTokens, budget) : undefined;
    reading.prepareAt = paced ?? budget.prepare;
    if (budget.wait !== undefined) reading.waitAt = budget.wait;
    // Unset: held until the threshold, except on one server slot, where the summary already evicted the agent's cached prompt.
    const commit = policyFor(deps.config, provider, model).backgroundCommit ?? (concurrency === 1 ? 'ready' : 'threshold');
    if (commit === 'ready') reading.commitWhenReady = true;
  }
  const usage = session.latestUsage;
  if (usage?.data.usage && isSilentOverflow(usage.data.usage, budget.window)) {
    reading.silentOverflow = { seq: usage.seq, promptTokens: usage.data.usage.promptTokens };
  }
  if (deps.config.economics) reading.economics = weighPressure(deps, { provider, model, totalTokens: m.totalTokens, budget });
  return { kind: 'reading', reading };
}

/** How far ahead of the threshold a summary starts: this many times the growth expected while one is written. */
export const PREPARE_LEAD = 2;
/** The summary latencies and the step readings the pace is taken from (the newest this many). */
const PACE_WINDOW = 8;

interface Pace {
  /** Events of the log already read. */
  scanned: number;
  /** The open bracket's start time (ms), while a summary is being written. */
  startedAt: number | undefined;
  /** Start → summary of the latest summaries (ms). */
  latencies: number[];
  /** [time ms, request tokens] at the latest readings. */
  readings: Array<[number, number]>;
}

const PACES = new WeakMap<Session, Pace>();

/**
 * The prepare point from the measured pace (SPEC §13, when `prepareRatio` is unset): a summary
 * starts when the tokens the agent adds while one is written (its growth per ms over the latest
 * readings × the slowest recent summary latency, twice over) would take it to the threshold; so
 * it is ready at the threshold and covers what a foreground compaction there would. Before a
 * summary was timed, or with no growth measured, the static point. Never below the static
 * point's distance doubled (halfway from the threshold to the retained tail), never above the
 * threshold. Reads only the events appended since the last reading.
 */
export function pacedPrepare(session: Session, totalTokens: number, budget: Pick<ResolvedBudget, 'threshold' | 'retain' | 'prepare'>): number | undefined {
  let pace = PACES.get(session);
  if (!pace) PACES.set(session, (pace = { scanned: 0, startedAt: undefined, latencies: [], readings: [] }));
  for (; pace.scanned < session.length; pace.scanned++) {
    const e = session.event(pace.scanned);
    if (e.type === 'compaction/start') pace.startedAt = Date.parse(e.time);
    else if (e.type === 'compaction/summary' && pace.startedAt !== undefined) {
      pace.latencies.push(Math.max(0, Date.parse(e.time) - pace.startedAt));
      if (pace.latencies.length > PACE_WINDOW) pace.latencies.shift();
      pace.startedAt = undefined;
    } else if (e.type === 'compaction/end') pace.startedAt = undefined;
  }
  const now = session.length === 0 ? Date.now() : Date.parse(session.event(session.length - 1).time);
  const last = pace.readings.at(-1);
  // Growth only: a compaction's drop starts the readings again.
  if (last && totalTokens < last[1]) pace.readings = [];
  if (!last || last[0] !== now || last[1] !== totalTokens) pace.readings.push([now, totalTokens]);
  if (pace.readings.length > PACE_WINDOW) pace.readings.shift();
  return pacedPoint(pace.latencies, pace.readings, budget);
}

/**
 * The paced prepare point from summary latencies (ms) and [time ms, tokens] readings (oldest
 * first): threshold − PREPARE_LEAD × growth per ms × the slowest latency, within
 * [threshold − 2 × (threshold − static prepare), threshold]; undefined with no latency or no growth.
 */
export function pacedPoint(latencies: readonly number[], readings: ReadonlyArray<readonly [number, number]>, budget: Pick<ResolvedBudget, 'threshold' | 'retain' | 'prepare'>): number | undefined {
  if (budget.prepare === undefined || latencies.length === 0 || readings.length < 2) return undefined;
  const [t0, n0] = readings[0]!;
  const [t1, n1] = readings.at(-1)!;
  if (n1 <= n0) return undefined;
  const perMs = (n1 - n0) / Math.max(1, t1 - t0);
  const ahead = Math.ceil(PREPARE_LEAD * perMs * Math.max(1, ...latencies));
  const lowest = budget.threshold - 2 * (budget.threshold - budget.prepare);
  return Math.min(budget.threshold, Math.max(lowest, budget.retain + 1, budget.threshold - ahead));
}

/** `waitAt`: with background compaction, where a step waits for a summary still being written (SPEC §13). */
export type EngineMeasurement = Measurement & { threshold: number | undefined; contextWindow: number | undefined; waitAt?: number };

/**
 * Current figures for `engine.measure()`. Plain data: `prices` (a live view over the meter,
 * and through it the session) is there for tools that read node prices, but not enumerable,
 * so serialising a measurement never walks the session.
 */
export function measureFigures(deps: Pick<ServiceDeps, 'session' | 'meter' | 'config'>): EngineMeasurement {
  const { prices, ...m } = deps.meter.measure();
  let threshold: number | undefined;
  let contextWindow: number | undefined;
  let waitAt: number | undefined;
  try {
    const b = routeBudget(deps);
    threshold = b.threshold;
    contextWindow = b.window;
    waitAt = b.wait;
  } catch (err) {
    // No route or no capacity yet: the figures stay undefined. Anything else is a bug to surface.
    if (!(err instanceof BudgetError) && !(err instanceof XcompactError && err.code === 'unrouted')) throw err;
  }
  const out = { ...m, anchor: m.anchor ? { ...m.anchor } : undefined, threshold, contextWindow, ...(waitAt !== undefined ? { waitAt } : {}) } as EngineMeasurement;
  Object.defineProperty(out, 'prices', { value: prices, enumerable: false });
  return out;
}
