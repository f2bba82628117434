/**
 * Crash paths: for a state of a chart, the generated path that enters it soonest. crash.test.ts
 * runs that path on the real engine and stops the engine's actor as soon as a real actor of the
 * chart enters the state.
 */
import type { Coverage, GeneratedPath } from './paths';

/** `work.pressure` is in `{ work: 'pressure', breaker: 'closed' }`. */
export function valueHas(value: unknown, state: string): boolean {
  let v = value;
  for (const part of state.split('.')) {
    if (v === part) return true;
    if (typeof v !== 'object' || v === null || !(part in v)) return false;
    v = (v as Record<string, unknown>)[part];
  }
  return true;
}

export function crashPathFor(c: Coverage, state: string): { path: GeneratedPath; stepsBefore: number } | undefined {
  let best: { path: GeneratedPath; stepsBefore: number } | undefined;
  for (const path of c.paths) {
    const values = [...path.steps.map((s) => s.from), path.finalValue];
    const at = values.findIndex((v) => valueHas(v, state));
    if (at >= 0 && (!best || at < best.stepsBefore || (at === best.stepsBefore && path.steps.length < best.path.steps.length)))
      best = { path, stepsBefore: at };
  }
  return best;
}
