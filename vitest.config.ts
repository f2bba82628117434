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
    // vitest's default is one worker fewer than the cores: on a 2-core machine, one, and the
    // suite ran file after file with a core idle. Most files wait on child processes, servers
    // and timers as much as they compute.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
