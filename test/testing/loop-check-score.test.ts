/**
 * The checker's own mutation score, always on: each loop of test/helpers/reference-loops.ts
 * broken on purpose (the bugs users make: dropped tool results, their own array instead of the
 * compacted one, a history resent after a restart, swallowed errors, no overflow retry, the
 * abort signal ignored, a request sent before its tool results are recorded, an answer
 * appended twice, …) against the scenario its bug touches: each must be caught, naming the
 * invariant that says so. The table of every loop on every scenario, the reference loops
 * included, is `npm run check:loops` (scripts/check-loops.ts, run by .ci/run); the reference
 * loops pass every scenario in test/testing/loop-check*.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { formatScore, loopScenarios, scoreLoops, type LoopScenario } from '../../src/testing';
import { BROKEN_LOOPS, controlLoop } from '../helpers/reference-loops';
import { LOOP_RUN_MS } from '../helpers/suite-plan';

const probeOf = (fragment: string): LoopScenario => {
  const found = loopScenarios({ only: [fragment] })[0];
  if (!found) throw new Error(`no scenario named like "${fragment}"`);
  return found;
};

describe('the checker catches every broken loop (mutation score)', () => {
  it('each broken loop is caught on its probe scenario, by the invariant that names its bug; the score is 100 %', async () => {
    const names: Record<string, string[]> = {};
    const result = await scoreLoops({ reference: {}, broken: Object.fromEntries(Object.entries(BROKEN_LOOPS).map(([name, b]) => [name, b.loop])) }, [], {
      // The loop ignoring its signal is caught by what it did with it, at once: no run needs a short limit.
      timeoutMs: LOOP_RUN_MS,
      scenariosFor: (name) => [probeOf(BROKEN_LOOPS[name]!.probe)],
      onRow: (row) => (names[row.loop] = Object.keys(row.invariants)),
    });
    console.log(formatScore(result));
    for (const [name, b] of Object.entries(BROKEN_LOOPS)) expect(names[name], `${name} on "${b.probe}"`).toContain(b.names);
    expect(result.score).toBe(1);
    expect(result.ok).toBe(true);
  });

  it('the score fails when a broken loop passes or a reference loop is caught', async () => {
    const scenario = probeOf('model answers');
    const result = await scoreLoops(
      { reference: { 'answers twice': controlLoop({ assistantTwice: true }) }, broken: { 'a right loop, filed as broken': controlLoop() } },
      [scenario],
      { timeoutMs: LOOP_RUN_MS },
    );
    expect(result.falseAlarms).toBe(1);
    expect(result.score).toBe(0);
    expect(result.ok).toBe(false);
    expect(formatScore(result)).toMatch(/answers twice \| reference \| 1 \/ 1 ✗ false alarm/);
    expect(formatScore(result)).toMatch(/a right loop, filed as broken \| broken \| 0 \/ 1 ✗ missed/);
  });
});
