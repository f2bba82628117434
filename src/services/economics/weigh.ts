/**
 * The cost model's inputs, measured: what compacting now or pruning now would cost and save
 * (economics.ts), from the routed model's prices and the session's pace so far. Numbers only;
 * the pressure chart decides with them.
 */
import { frameCheckpoint, pricingHandle } from '../summarizing';
import type { ResolvedBudget } from '../config';
import { recallOn, type ServiceDeps } from '../core';
import { compactionEconomics, pruneEconomics, reliefChoice, type EconomicVerdict, type ModelPrices, type ReliefChoice, type SessionPace } from './cost';
import type { TokenMeter } from '../metering';
import { modelKey, resolvePrices } from '../config';
import { planSurfacePrune } from '../pruning';
import { selectSpan } from '../selection';
import { COMPACTION_INSTRUCTION } from '../summarizing';

/** What the cost model decided for a job (in its context and its notifications), with the numbers it decided on. */
export type EconomicDecision = EconomicVerdict & { decision: 'compact-early' | 'prune-early' | ReliefChoice };

/** The cost model's choice of relief, with what the chosen action costs and saves. */
export type ReliefVerdict = EconomicVerdict & { choice: ReliefChoice };

/** What compacting or pruning now would cost and save (cost.ts), for the pressure chart to decide on. */
export interface PressureEconomics {
  prices: ModelPrices;
  pace: SessionPace;
  /** Weighed below the threshold only (at it, compaction is due whatever it costs); absent when nothing can be compacted. */
  compaction?: EconomicVerdict;
  /** When pruning is enabled: below the threshold, whether an early prune pays; at or above it, what the prune would free. */
  prune?: EconomicVerdict;
  /** At or above the threshold: which relief the cost model chose. */
  relief?: ReliefVerdict;
}

/** The pace of one meter's session, folded incrementally (each event once). */
interface PaceState {
  folded: number;
  requests: number;
  appendedTokens: number;
  summaries: number;
  summaryTokens: number;
  instructionTokens: number | undefined;
  /** Appended tokens when an early prune last did not pay (planning one walks the surface). */
  earlyPruneAt?: number;
  /** The last weighing and what it was asked with (see weighPressure). */
  last?: { length: number; at: WeighedAt; out: PressureEconomics };
}

const paces = new WeakMap<TokenMeter, PaceState>();

export function sessionPace(deps: Pick<ServiceDeps, 'session' | 'meter'>): { pace: SessionPace; state: PaceState } {
  const { session, meter } = deps;
  let s = paces.get(meter);
  if (!s) {
    s = { folded: 0, requests: 0, appendedTokens: 0, summaries: 0, summaryTokens: 0, instructionTokens: undefined };
    paces.set(meter, s);
  }
  for (; s.folded < session.length; s.folded++) {
    const e = session.event(s.folded);
    if (e.type === 'compaction/summary') {
      s.summaries++;
      s.summaryTokens += meter.countText(e.data.summary);
      continue;
    }
    if (e.surfaceOp !== 'append') continue;
    if (e.type === 'assistant/message') s.requests++;
    if (e.type === 'system/message') continue;
    // What the conversation grew by: priced once, as the meter priced it when it was appended.
    let price: number;
    try {
      price = meter.priceOf(e.seq);
    } catch {
      // Off the surface since: its price when it left (a reopened log is not tokenized again).
      price = meter.shadowedPriceOf(e.seq) ?? meter.priceEvent(e as Parameters<TokenMeter['priceEvent']>[0]);
    }
    s.appendedTokens += price;
  }
  return { pace: { requests: s.requests, growthPerRequest: s.requests === 0 ? 0 : s.appendedTokens / s.requests }, state: s };
}

export function routePrices(deps: Pick<ServiceDeps, 'config'>, provider: string, model: string): ModelPrices {
  return resolvePrices(modelKey(provider, model), deps.config.models);
}

/**
 * The economics of compacting and of pruning now. Compaction is weighed below the threshold
 * (above it, it is due whatever it costs); pruning is weighed at or above it, where the chart
 * would prune first.
 */
export function weighPressure(
  deps: Pick<ServiceDeps, 'session' | 'meter' | 'config'>,
  at: { provider: string; model: string; totalTokens: number; budget: ResolvedBudget },
): PressureEconomics {
  const { meter } = deps;
  const { pace, state } = sessionPace(deps);
  // A weighing is a function of the log (its length: nothing is ever rewritten), the meter's
  // fold of it and the reading: asked again with nothing appended (a step that found nothing
  // to do, an agent calling afterStep twice), the answer is the same, and recomputing it walked
  // the retained tail and tokenized a checkpoint frame (docs/measured.md: afterStep ≤ 3× measure()).
  const last = state.last;
  if (last && last.length === deps.session.length && sameReading(last.at, at)) return last.out;
  const out = weigh(deps, at, pace, state);
  state.last = { length: deps.session.length, at: { ...at, budget: { ...at.budget } }, out };
  return out;
}

type WeighedAt = { provider: string; model: string; totalTokens: number; budget: ResolvedBudget };

/** Field by field (this runs on every step: no serialising). */
function sameReading(a: WeighedAt, b: WeighedAt): boolean {
  if (a.provider !== b.provider || a.model !== b.model || a.totalTokens !== b.totalTokens) return false;
  const x = a.budget as unknown as Record<string, unknown>;
  const y = b.budget as unknown as Record<string, unknown>;
  let n = 0;
  for (const k in y) {
    // The policy and the pruner's sizes follow from the route's config and window (compared above and here), rebuilt on every reading.
    if (k !== 'policy' && k !== 'prune' && x[k] !== y[k]) return false;
    n++;
  }
  return n === Object.keys(x).length;
}

/**
 * An early prune is planned again only once the conversation has grown by what a prune must
 * at least free since the last plan that did not pay: before that nothing new can be freed
 * (what aged out of the protected tail is at most what was appended), and planning walks the
 * surface, so a step's weighing stays independent of the session's length.
 */
function earlyPruneDue(state: PaceState, minReclaimTokens: number): boolean {
  return state.earlyPruneAt === undefined || state.appendedTokens - state.earlyPruneAt >= Math.max(1, minReclaimTokens);
}

function weigh(
  deps: Pick<ServiceDeps, 'session' | 'meter' | 'config'>,
  at: { provider: string; model: string; totalTokens: number; budget: ResolvedBudget },
  pace: SessionPace,
  state: PaceState,
): PressureEconomics {
  const { meter } = deps;
  const prices = routePrices(deps, at.provider, at.model);
  const forgetting = deps.config.forgetting;
  const out: PressureEconomics = { prices, pace };
  const below = at.totalTokens < at.budget.threshold;
  // Forgetting priced in full: nothing below the threshold can pay (it saves what it forgets),
  // so nothing is weighed there — a step costs the reading alone.
  const early = below && forgetting < 1;
  if (early) {
    // What an early compaction would select: the floor tail, small earlier checkpoints kept.
    const range = selectSpan(deps, { purpose: 'pressure', attempt: 1, retain: 'floor', stackCheckpoints: true });
    if (range) {
      const m = meter.measure();
      let keptPrefix = m.envelopeTokens;
      for (let p = 0; p < range.startPos; p++) keptPrefix += m.prices.priceAt(p);
      state.instructionTokens ??= meter.countText(COMPACTION_INSTRUCTION);
      const summaryTokens = state.summaries > 0 ? Math.ceil(state.summaryTokens / state.summaries) : Math.min(at.budget.maxTokens, Math.ceil(range.tokens / 2));
      const checkpoint =
        meter.priceUserText(frameCheckpoint('', pricingHandle(recallOn(deps), deps.session.length))) + Math.min(summaryTokens, at.budget.maxTokens);
      out.compaction = compactionEconomics(
        {
          tokensNow: at.totalTokens,
          tokensAfter: at.totalTokens - range.tokens + checkpoint,
          keptPrefixTokens: keptPrefix,
          summaryInputCached: keptPrefix + range.tokens,
          summaryInputUncached: state.instructionTokens,
          summaryTokens: Math.min(summaryTokens, at.budget.maxTokens),
        },
        pace,
        prices,
        forgetting,
      );
    }
  }
  if (deps.config.prune.enabled && (!below || (early && earlyPruneDue(state, at.budget.minReclaimTokens)))) {
    // The plan the pressure chart's prune would apply (the same settings and provider ratio).
    const plan = planSurfacePrune(deps, at.budget);
    const firstSeqs = [...plan.targets.map((t) => t.seq), ...plan.argumentTargets.map((t) => t.seq)];
    let rewritten = 0;
    if (firstSeqs.length > 0) {
      const m = meter.measure();
      const seqs = [...deps.session.surface.seqs()];
      const targets = new Set(firstSeqs);
      const first = seqs.findIndex((s) => targets.has(s));
      for (let i = first; i < seqs.length; i++) rewritten += m.prices.priceAt(i);
      rewritten -= plan.tokensFreed;
    }
    out.prune = pruneEconomics({ tokensFreed: plan.tokensFreed, rewrittenTokens: Math.max(0, rewritten) }, pace, prices, forgetting);
    if (below && !out.prune.pays) state.earlyPruneAt = state.appendedTokens;
  }
  if (!below) {
    const { choice, reason } = reliefChoice(at.totalTokens, at.budget.threshold, out.prune);
    const base = out.prune ?? { pays: true, savings: 0, cost: 0, requestsToCome: pace.requests, breakEvenTokens: 0, reason };
    out.relief = { ...base, pays: true, reason, choice };
  }
  return out;
}
