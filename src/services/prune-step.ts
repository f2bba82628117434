/**
 * One pruning pass as a chart asks for it: the pruner's plan over the surface, applied. The
 * chart decides whether the retained tail is protected (pressure) or not (overflow).
 */
import type { PruneInput, PruneSummary } from '../machines/types';
import type { ServiceDeps } from './deps';
import { applyPrune, planPrune, type PruneSettings } from './pruner';
import { routeBudget } from './route';

export function pruneSurface(deps: Pick<ServiceDeps, 'session' | 'meter' | 'config'>, { protectRecent }: PruneInput): PruneSummary {
  const { session, meter, config } = deps;
  let protectRecentTokens = 0;
  let minReclaimTokens = 0;
  if (protectRecent) {
    const b = routeBudget(deps);
    protectRecentTokens = b.protectRecentTokens;
    minReclaimTokens = b.minReclaimTokens;
  }
  const settings: PruneSettings = {
    thresholdChars: config.prune.thresholdChars,
    headChars: config.prune.headChars,
    tailChars: config.prune.tailChars,
    neverPrune: config.prune.neverPrune,
    protectRecentTokens,
    minReclaimTokens,
  };
  // The budgets are in the provider's tokens, like the retained tail in range selection.
  const plan = planPrune(session, settings, { priceOf: (seq) => meter.priceOf(seq), priceEvent: (e) => meter.priceEvent(e), providerRatio: meter.providerRatio });
  const result = applyPrune(session, plan);
  return { count: result.pruned.length, tokensFreed: result.tokensFreed, generation: session.surface.replaceGeneration };
}
