import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';
import { SuiteSequencer } from './test/helpers/sequencer.js';
import { HANG_GUARD_MS, ISOLATED_FILES } from './test/helpers/suite-plan.js';

const include = ['test/**/*.test.ts'];
// The packed-tarball test needs a build first: `npm run test:consumer` (test/consumer/vitest.config.ts).
// The real llama-server suite takes minutes: `npm run test:real-server` (test/real-server/vitest.config.ts).
const exclude = [...configDefaults.exclude, 'test/consumer/**', 'test/real-server/**'];
// A hang guard, not a speed limit: no test sets a time limit of its own (test/helpers/suite-plan.ts).
const timeouts = { testTimeout: HANG_GUARD_MS, hookTimeout: HANG_GUARD_MS };

export default defineConfig({
  test: {
    // Starts nothing by itself: PostgreSQL is started on first use by the files that import
    // test/helpers/pg.ts (see there and docs/testing.md). Run once, by the root project; the
    // projects below inherit what it provides.
    globalSetup: ['test/helpers/pg-global-setup.ts'],
    // One worker more than the cores. vitest's default (one fewer) ran the suite file after file
    // on 2 cores; one per core still left a core idle whenever a file waited, and most do as much
    // as they compute: on child processes, servers and timers (test/testing/llama-one-slot.test.ts: 20 s
    // for 4 s of CPU, the loop-check files: 40 s for 20 s).
    maxWorkers: availableParallelism() + 1,
    // The slowest files first, also on a fresh clone (test/helpers/suite-plan.ts).
    sequence: { sequencer: SuiteSequencer },
    projects: [
      // Most files share their worker's loaded modules with the files that ran in it before: a
      // fresh module graph per file (vitest's default) cost more CPU than most tests do (xstate,
      // zod, the openai SDK and the 0.4 s o200k table loaded again for each of 120 files; the
      // suite took 293 s of CPU, 186 s shared: docs/testing.md). Each file still makes every
      // session, server, store and engine it uses. ISOLATED_FILES get a fresh worker each.
      { test: { name: 'shared', include, exclude: [...exclude, ...ISOLATED_FILES], isolate: false, ...timeouts } },
      { test: { name: 'isolated', include: [...ISOLATED_FILES], exclude, isolate: true, ...timeouts } },
    ],
  },
});
