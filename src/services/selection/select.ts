/**
 * Range selection as a chart asks for it: the chart names the policy (retained tail or only the
 * newest unit, stacked checkpoints or a merge from the head), this applies it with the budget.
 */
import type { SelectInput } from '../context';
import { frameCheckpoint } from '../summarizing';
import type { ServiceDeps } from '../context';
import { selectRange, type RangeSelection } from './range';
import { routeBudget } from '../context';

export const STACK_MAX_CHECKPOINTS = 4;

export function selectSpan(deps: Pick<ServiceDeps, 'session' | 'meter' | 'config'>, { retain, stackCheckpoints }: SelectInput): RangeSelection | null {
  const { session, meter } = deps;
  const prices = meter.measure().prices;
  // A span must cost at least twice an empty checkpoint, or no summary can shrink it.
  const minSpanTokens = 2 * meter.priceUserText(frameCheckpoint(''));
  const retainTokens = retain === 'budget' ? routeBudget(deps).retain : retain === 'floor' ? routeBudget(deps).retainFloor : 0;
  return selectRange(session, prices, {
    retainTokens,
    minSpanTokens,
    ...(stackCheckpoints ? { stack: { maxCheckpoints: STACK_MAX_CHECKPOINTS, maxTokens: Math.floor(retainTokens / 2) } } : {}),
  });
}
