/**
 * Pressure readings: the meter's total against the routed model's threshold (what the
 * charts judge), and the figures `engine.measure()` reports.
 */
import { XcompactError } from '../../errors';
import { BudgetError, modelInfoFor, policyFor, resolveBudget, type ResolvedBudget } from '../config';
import type { ImageBlock, TextBlock } from '../../session/events';
import type { ServiceDeps } from '../core';
import type { Measurement } from '../metering';
import { isSilentOverflow } from '../overflow';
import { priceNode } from '../metering';
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

/** The request about to be sent against its window: what the fit chart judges (docs/spec.md#19-the-request-fits). */
export interface WindowReading {
  provider: string;
  model: string;
  /** The request's prompt as the meter bounds it (Measurement.boundTokens: anchored to provider usage, the growth since at the ratio the provider showed). */
  totalTokens: number;
  /** The most the prompt may take: the window less the output cap, or less the reply's default room (ResolvedBudget.sendBudget). */
  messageBudget: number;
  window: number;
  /** What the window keeps for the reply: the request's output cap, else the model's, else the default room (min(W/8, 8192)). */
  outputReservation: number;
}

/** `unjudged`: no request recorded yet, or a route whose budget cannot be resolved (no window and `requireCapacity: false`). */
export type WindowResult = { kind: 'unjudged' } | { kind: 'reading'; reading: WindowReading };

export function measureWindow(deps: Pick<ServiceDeps, 'session' | 'meter' | 'config'>): WindowResult {
  const header = deps.session.latestHeader;
  if (!header) return { kind: 'unjudged' };
  let budget: ResolvedBudget;
  try {
    budget = routeBudget(deps);
  } catch (err) {
    if (err instanceof BudgetError) return { kind: 'unjudged' };
    throw err;
  }
  return {
    kind: 'reading',
    reading: {
      provider: header.data.provider,
      model: header.data.model,
      totalTokens: deps.meter.measure().boundTokens,
      messageBudget: budget.sendBudget,
      window: budget.window,
      outputReservation: budget.window - budget.sendBudget,
    },
  };
}

/** What a call would send that no compaction, prune or cut can make smaller. */
export interface RequestCore {
  provider: string;
  model: string;
  /** The system prompt the call gives (else the recorded one stays: it is counted by the meter already). */
  system: string | undefined;
  tools: ReadonlyArray<object>;
  maxTokens?: number;
  /** The call's newest user message, when it brings one. */
  newest: Array<TextBlock | ImageBlock> | undefined;
}

/**
 * Before a call writes anything (conversation/conversation.ts plans it): the refusal of one whose
 * system prompt, tool definitions and newest user message alone — what no compaction, prune or
 * cut makes smaller — leave no room in the window for its output cap; undefined when they fit or
 * the route has no known window. A request that passes may still be over the window: the fit
 * chart then cuts the largest tool results (machines/fit.ts).
 */
export function admitRequest(deps: Pick<ServiceDeps, 'config' | 'tokenizerFor'>, core: RequestCore): BudgetError | undefined {
  const info = modelInfoFor(deps.config, core.provider, core.model);
  let budget: ResolvedBudget;
  try {
    budget = resolveBudget({
      config: deps.config,
      provider: core.provider,
      model: core.model,
      contextWindow: info?.contextWindow,
      ...(core.maxTokens !== undefined ? { requestMaxTokens: core.maxTokens } : {}),
      ...(info?.maxOutputTokens !== undefined ? { modelMaxOutputTokens: info.maxOutputTokens } : {}),
    });
  } catch (err) {
    // An output cap that leaves the prompt no room at all is this call's to fix; an unknown window is not judged here.
    if (err instanceof BudgetError && err.code === 'no-message-budget') return err;
    if (err instanceof BudgetError) return undefined;
    throw err;
  }
  // The route's own tokenizer, at face value: the meter is not folded before the call's counts are
  // fetched (tokenizer 'server'), and a case this leaves at the edge is the fit chart's to judge.
  const t = deps.tokenizerFor?.(core.provider, core.model);
  if (!t) return undefined;
  const system = core.system === undefined ? 0 : priceNode(t, { type: 'system/message', data: { text: core.system } });
  const tools = core.tools.length === 0 ? 0 : t.count(JSON.stringify(core.tools));
  const user = core.newest === undefined ? 0 : priceNode(t, { type: 'user/message', data: { content: core.newest } });
  const total = system + tools + user;
  if (total <= budget.sendBudget) return undefined;
  const parts = [
    ...(system > 0 ? [`the system prompt ${system}`] : []),
    ...(tools > 0 ? [`the tool definitions ${tools}`] : []),
    ...(user > 0 ? [`the newest user message ${user}`] : []),
  ];
  return new BudgetError(
    'request-over-window',
    core.provider,
    core.model,
    `${core.provider}/${core.model}: ${parts.join(', ')} tokens: ${total} in all, over the ${budget.sendBudget} tokens the window ${budget.window} leaves for the prompt ` +
      `with ${budget.window - budget.sendBudget} kept for the reply; no compaction can make them smaller. ${user > system + tools ? 'Send the long text in parts (or as a file the agent reads in parts)' : 'Shorten the system prompt or send fewer tool definitions'}, ` +
      `or lower max_tokens. Nothing was recorded or sent`,
  );
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
