/**
 * One pruning pass as a chart asks for it: the pruner's plan over the surface, applied. The
 * chart decides whether the retained tail is protected (pressure) or not (overflow).
 */
import type { PruneInput, PruneSummary } from '../core';
import type { ServiceDeps } from '../core';
import { PRUNE_MARKER_RESERVE, PRUNE_MARKER_RESERVE_WITH_RECALL, pruneSizes, type ResolvedBudget } from '../config';
import { applyPrune, planPrune, type PrunePlan, type PruneSettings } from './pruner';
import { recallOn, routeBudget } from '../core';

export function pruneSurface(deps: Pick<ServiceDeps, 'session' | 'meter' | 'config'>, { protectRecent }: PruneInput): PruneSummary {
  const { session } = deps;
  const plan = planSurfacePrune(deps, protectRecent ? routeBudget(deps) : { prune: routeSizes(deps) });
  const result = applyPrune(session, plan);
  return { count: result.pruned.length, tokensFreed: result.tokensFreed, generation: session.surface.replaceGeneration };
}

/**
 * The pruner's plan over the surface with the route's sizes (config `prune`, else scaled to the
 * window): the retained tail protected and a minimum reclaim when the budget gives them
 * (pressure), neither without (overflow). The cost model weighs the same plan the prune would apply.
 */
export function planSurfacePrune(
  { session, meter, config }: Pick<ServiceDeps, 'session' | 'meter' | 'config'>,
  budget: Pick<ResolvedBudget, 'prune'> & Partial<Pick<ResolvedBudget, 'protectRecentTokens' | 'minReclaimTokens'>>,
): PrunePlan {
  const settings: PruneSettings = {
    ...budget.prune,
    neverPrune: config.prune.neverPrune,
    protectRecentTokens: budget.protectRecentTokens ?? 0,
    minReclaimTokens: budget.minReclaimTokens ?? 0,
    ...(recallOn({ session, config }) ? { recall: true } : {}),
  };
  // The budgets are in the provider's tokens, like the retained tail in range selection.
  return planPrune(session, settings, { priceOf: (seq) => meter.priceOf(seq), priceEvent: (e) => meter.priceEvent(e), providerRatio: meter.providerRatio });
}

/** The route's pruner sizes; with no window known (overflow recovery works without one), the config's or the largest defaults. */
function routeSizes(deps: Pick<ServiceDeps, 'session' | 'config'>): ResolvedBudget['prune'] {
  try {
    return routeBudget(deps).prune;
  } catch {
    return pruneSizes(deps.config.prune, undefined, recallOn(deps) ? PRUNE_MARKER_RESERVE_WITH_RECALL : PRUNE_MARKER_RESERVE);
  }
}
