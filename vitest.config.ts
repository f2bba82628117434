import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Starts nothing by itself: PostgreSQL is started on first use by the files that import
    // test/helpers/pg.ts (see there and docs/testing.md).
    globalSetup: ['test/helpers/pg-global-setup.ts'],
    // The packed-tarball test needs a build first: `npm run test:consumer` (test/consumer/vitest.config.ts).
    exclude: [...configDefaults.exclude, 'test/consumer/**'],
    // One worker more than the cores. vitest's default (one fewer) ran the suite file after file
    // on 2 cores; one per core still left a core idle whenever a file waited, and most do as much
    // as they compute: on child processes, servers and timers (test/llama-one-slot.test.ts: 20 s
    // for 4 s of CPU, the loop-check files: 40 s for 20 s).
    maxWorkers: availableParallelism() + 1,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
