/**
 * One mutation worker process (scripts/mutate-charts.ts starts it): test/machines/mutate.run.ts in
 * vitest, for the chart and first mutant its environment names (MUTATE_CHART, MUTATE_FROM,
 * MUTATE_LOG). Its exit code is not the verdict: the orchestrator reads the log.
 */
import { startVitest } from 'vitest/node';

const vitest = await startVitest('test', [], {
  // The suite's projects (vitest.config.ts) would run every test file: one project of this file.
  projects: [{ test: { name: 'mutate', include: ['test/machines/mutate.run.ts'], testTimeout: 30_000, hookTimeout: 30_000 } }],
  globalSetup: [], // the PostgreSQL server of the suite: no chart path uses it
  run: true,
  watch: false,
  fileParallelism: false,
  reporters: ['dot'],
});
await vitest?.close();
process.exit(vitest?.state.getCountOfFailedTests() === 0 ? 0 : 1);
