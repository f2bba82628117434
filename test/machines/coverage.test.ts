/**
 * Static transition coverage of every chart: the generated paths (test/machines/paths.ts) take every
 * transition written in the chart, and the chart has every transition SPEC.md requires
 * (test/machines/required.ts): coverage is of required ∪ present. The paths themselves run on the
 * real engine once, in their chart's file (test/machines/<chart>.test.ts), which also checks the
 * run-time coverage; the crash paths run in test/machines/crash.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { SPECS, allCoverage } from './catalogs';
import { crashPathFor } from './crash-paths';
import { crashStates, requiredCoverage } from './required';

describe('static transition coverage of the generated paths (required ∪ present)', () => {
  for (const spec of SPECS) {
    const c = allCoverage().get(spec.name)!;
    const r = requiredCoverage(spec.name, spec.machine, c.covered);
    it(`${spec.name}: ${r.covered}/${r.union} transitions (${r.required.length} required, ${r.present.length} present) by ${c.paths.length} paths`, () => {
      expect(r.uncovered).toEqual([]);
    });
    it(`${spec.name}: a generated path reaches every state a crash can happen in`, () => {
      expect(crashStates(spec.machine).states.filter((s) => !crashPathFor(c, s))).toEqual([]);
    });
  }
});
