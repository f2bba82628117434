/**
 * Range selection as a chart asks for it: the chart names the policy (retained tail or only the
 * newest unit, stacked checkpoints or a merge from the head), this applies it with the budget.
 */
import type { SelectInput } from '../core';
import { frameCheckpoint, pricingHandle } from '../summarizing';
import type { ServiceDeps } from '../core';
import { headPosition, retainedCut, selectRange, type RangeSelection } from './range';
import type { Measurement, NodePrices } from '../metering';
import { recallOn, routeBudget } from '../core';

export const STACK_MAX_CHECKPOINTS = 4;

/** An overflow error's own figures, and the meter's measurement just before it anchored on them. */
export interface OverflowCount {
  limitTokens: number;
  promptTokens: number;
  before: Measurement;
}

/**
 * `overflow`: what the error that started this recovery said. Recovery keeps only the newest
 * unit (with the system prompt and tools); when that alone is at the error's window in the
 * provider's tokens, no compaction can make the request fit: nothing is selected, so recovery
 * declines at once instead of summarizing and retrying a hopeless request (docs/spec.md#4-pressure-compaction). Everything
 * up to the last report was counted by the provider, so what our figure missed lies in what was
 * appended since: the newest unit is priced at that growth's own ratio (count over our price).
 */
export function selectSpan(
  deps: Pick<ServiceDeps, 'session' | 'meter' | 'config'>,
  { retain, stackCheckpoints }: SelectInput,
  overflow?: OverflowCount,
): RangeSelection | null {
  const { session, meter } = deps;
  const prices = meter.measure().prices;
  if (overflow && newestUnitOverflows(session, prices, overflow)) return null;
  // A span must cost at least twice an empty checkpoint, or no summary can shrink it.
  const frameTokens = meter.priceUserText(frameCheckpoint('', pricingHandle(recallOn(deps), session.length)));
  // Only the newest unit kept (manual compaction): no shrink check to fail, and no route needed.
  const budget = retain === 'newest-unit' ? undefined : routeBudget(deps);
  const retainTokens =
    retain === 'budget' ? budget!.retain : retain === 'floor' ? budget!.retainFloor : retain === 'ahead' ? aheadTail(budget!, meter.measure().totalTokens) : 0;
  return selectRange(session, prices, {
    retainTokens,
    minSpanTokens: 2 * frameTokens,
    ...(budget ? { checkpoint: { userWords: budget.userWords, cap: budget.maxTokens, frameTokens, minProgressRatio: deps.config.minProgressRatio } } : {}),
    ...(stackCheckpoints ? { stack: { maxCheckpoints: STACK_MAX_CHECKPOINTS, maxTokens: Math.floor(retainTokens / 2) } } : {}),
  });
}

/**
 * The tail a background summary started below the threshold keeps: the budget's, less the
 * growth still to come before the threshold (never below the floor tail). The span is committed
 * at the threshold (held until then): by then the agent has added that growth after it, so the
 * request keeps the budget's tail then, as a compaction at the threshold would. Cut with the
 * budget's tail instead, each background commit kept the growth since the prepare point on top
 * and relieved that much less: more compactions, each one billed.
 */
export function aheadTail(budget: { retain: number; retainFloor: number; threshold: number }, totalTokens: number): number {
  return Math.max(budget.retainFloor, budget.retain - Math.max(0, budget.threshold - totalTokens));
}

/** The newest unit, the system prompt and the tools alone reach the window the overflow error named. */
function newestUnitOverflows(session: ServiceDeps['session'], prices: NodePrices, o: OverflowCount): boolean {
  const { before } = o;
  const ratio = before.calibration.ratio;
  const head = headPosition(session);
  let fixed = before.envelopeTokens;
  for (let p = 0; p < head; p++) fixed += prices.priceAt(p);
  let newest = 0;
  for (let p = retainedCut(session, prices, 0, head); p < session.surface.length; p++) newest += prices.priceAt(p);
  const a = before.anchor;
  // Growth since the last report, at its own ratio; without a report, the whole request's.
  const missed = a ? o.promptTokens - a.providerTokens : o.promptTokens;
  const priced = a ? a.growthTokens / ratio : before.estimatedTokens;
  const growthRatio = priced > 0 ? Math.max(ratio, missed / priced) : ratio;
  const newestCount = a ? Math.min(newest * growthRatio, Math.max(0, missed)) : newest * growthRatio;
  return fixed * ratio + newestCount >= o.limitTokens;
}
