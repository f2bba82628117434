/**
 * `npm run coverage:transitions`: per chart, the transitions it must have (required: written down
 * from SPEC.md in test/machines/required.ts) and the ones it has (present: read from its config), and
 * how many of required ∪ present the generated test paths cover. A required transition deleted
 * from a chart shows as missing. Also: the generated paths, how many of them force an outcome no
 * real condition produces, the states a crash path covers (test/machines/crash.test.ts), and what
 * @xstate/graph's shortest paths alone would cover. Exits non-zero when anything is missing.
 * The paths run on the real engine in test/machines/<chart>.test.ts, which checks run-time coverage.
 */
import { FORCED_OUTCOMES, SPECS, allCoverage, forcedPaths } from '../test/machines/catalogs';
import { crashPathFor } from '../test/machines/crash-paths';
import { shortestPathsBaseline, type MachineSpec } from '../test/machines/paths';
import { ESCALATED, crashStates, requiredCoverage } from '../test/machines/required';

const pad = (s: string | number, n: number) => String(s).padEnd(n);
const problems: string[] = [];
console.log(
  `${pad('chart', 13)}${pad('required', 10)}${pad('present', 9)}${pad('covered', 18)}${pad('paths', 7)}${pad('forced', 8)}${pad('crash paths', 13)}shortest paths alone`,
);
const coverage = allCoverage();
for (const spec of SPECS) {
  const c = coverage.get(spec.name)!;
  const r = requiredCoverage(spec.name, spec.machine, c.covered);
  const { states, transient } = crashStates(spec.machine);
  const crashed = states.filter((s) => crashPathFor(c, s));
  for (const s of states) if (!crashPathFor(c, s)) problems.push(`no crash path: ${spec.name}: ${s}`);
  problems.push(...r.uncovered);
  const base = shortestPathsBaseline(spec as MachineSpec<unknown>);
  const pct = ((100 * r.covered) / r.union).toFixed(1);
  console.log(
    `${pad(spec.name, 13)}${pad(`${r.required.length - r.missingRequired.length}/${r.required.length}`, 10)}${pad(r.present.length, 9)}${pad(`${r.covered}/${r.union} ${pct}%`, 18)}${pad(c.paths.length, 7)}${pad(forcedPaths(spec.name, c), 8)}${pad(`${crashed.length}/${states.length}`, 13)}${base.covered.size}/${c.all.length} by ${base.paths} paths`,
  );
  if (transient.length > 0) console.log(`  no crash path possible (eventless, left in the step entering it): ${transient.join(', ')}`);
}
console.log('\nforced outcomes (no real condition produces them):');
for (const [chart, outcomes] of Object.entries(FORCED_OUTCOMES)) for (const [o, why] of Object.entries(outcomes)) console.log(`  ${chart}: ${o} — ${why}`);
console.log('\nerrors left to the parent on purpose (no error transition of their own):');
for (const [chart, invokes] of Object.entries(ESCALATED)) for (const [id, why] of Object.entries(invokes)) console.log(`  ${chart}: ${id} — ${why}`);
for (const p of problems) console.log(p);
if (problems.length > 0) {
  console.error(`${problems.length} required or present transition(s) or crash path(s) not covered`);
  process.exit(1);
}
