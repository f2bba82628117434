/**
 * Static transition coverage of every chart: the generated paths (test/graph/paths.ts) take every
 * transition written in the chart. The paths themselves run on the real engine once, in their
 * chart's file (test/graph/<chart>.test.ts), which also checks the run-time coverage.
 */
import { describe, expect, it } from 'vitest';
import { allCoverage } from './graph/catalogs';

describe('static transition coverage of the generated paths', () => {
  for (const [name, c] of allCoverage()) {
    it(`${name}: ${c.covered.size}/${c.all.length} transitions by ${c.paths.length} paths`, () => {
      expect(c.missing.map((t) => t.name)).toEqual([]);
    });
  }
});
