/**
 * `npm run mutate:charts`: mutation testing of the statecharts. Runs test/graph/mutate.run.ts in
 * one vitest process (every mutant in-process, on the real engine): per chart, killed ÷ total
 * mutants and the survivors. Fails when a mutant not listed in scripts/equivalent-mutants.json
 * survives. `MUTATE_CHARTS=transaction,manual` limits the run to some charts.
 */
import { startVitest } from 'vitest/node';

const vitest = await startVitest('test', [], {
  include: ['test/graph/mutate.run.ts'],
  globalSetup: [], // the PostgreSQL server of the suite: no chart path uses it
  run: true,
  watch: false,
  fileParallelism: false,
  reporters: ['default'],
});
await vitest?.close();
process.exit(vitest?.state.getCountOfFailedTests() === 0 && process.exitCode !== 1 ? 0 : 1);
