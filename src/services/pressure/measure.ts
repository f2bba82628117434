/**
 * Pressure readings: the meter's total against the routed model's threshold (what the
 * charts judge), and the figures `engine.measure()` reports.
 */
import { XcompactError } from '../../errors';
import { BudgetError, modelInfoFor, policyFor, type ResolvedBudget } from '../config';
import type { ServiceDeps } from '../core';
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
  /** Where a background summary starts (docs/spec.md#13-background-compaction); absent when background compaction is off for the route. */
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
    reading.prepareAt = budget.prepare;
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

/** `waitAt`: with background compaction, where a step waits for a summary still being written (docs/spec.md#13-background-compaction). */
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
  const out = {
    ...m,
    anchor: m.anchor ? { ...m.anchor } : undefined,
    threshold,
    contextWindow,
    ...(waitAt !== undefined ? { waitAt } : {}),
  } as EngineMeasurement;
  Object.defineProperty(out, 'prices', { value: prices, enumerable: false });
  return out;
}
