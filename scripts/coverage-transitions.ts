/**
 * `npm run coverage:transitions`: per chart, the transitions the generated test paths cover
 * (static coverage, from pure stepping of the charts), how many paths, and any transition
 * left uncovered, by name. Exits non-zero when one is missing. For comparison, the coverage
 * of xstate/graph's shortest paths over the same outcome catalogs. The generated paths run on
 * the real engine in test/graph-coverage.test.ts, which checks the run-time coverage.
 */
import { SPECS, allCoverage } from '../test/graph/catalogs';
import { shortestPathsBaseline, type MachineSpec } from '../test/graph/paths';

let missing = 0;
const pad = (s: string | number, n: number) => String(s).padEnd(n);
console.log(`${pad('machine', 13)}${pad('covered', 9)}${pad('', 8)}${pad('paths', 7)}shortest paths alone`);
const coverage = allCoverage();
for (const spec of SPECS) {
  const c = coverage.get(spec.name)!;
  missing += c.missing.length;
  const base = shortestPathsBaseline(spec as MachineSpec<unknown>);
  const pct = ((100 * c.covered.size) / c.all.length).toFixed(1);
  console.log(`${pad(c.machine, 13)}${pad(`${c.covered.size}/${c.all.length}`, 9)}${pad(`${pct}%`, 8)}${pad(c.paths.length, 7)}${base.covered.size}/${c.all.length} by ${base.paths} paths`);
}
for (const c of coverage.values()) for (const t of c.missing) console.log(`missing: ${t.name}`);
if (missing > 0) {
  console.error(`${missing} transition(s) not covered by the generated paths`);
  process.exit(1);
}
