/**
 * How `npm test` is laid out over its workers (vitest.config.ts reads this; suite-plan.test.ts
 * checks it). Plain data and one pure function: no vitest import, so a test can load it.
 */

/**
 * How long anything in `npm test` may take before it is taken for hung (vitest.config.ts's test
 * and hook timeout). A guard against a hang, never a verdict on speed: no test in the suite sets
 * a time limit of its own (a loaded machine would fail it), and what a test waits on
 * with a deadline (a checkLoop run, a spawned process) is given `HANG_GUARD_MS`-based limits.
 */
export const HANG_GUARD_MS = 15 * 60_000;

/** What a test gives a checkLoop run (its `timeoutMs`): below the hang guard, so its own report says it ran out of time. */
export const LOOP_RUN_MS = 10 * 60_000;

/**
 * Files that need a module state of their own (the other files share their worker's loaded
 * modules, see vitest.config.ts): they mock a module (`vi.mock` applies only to a module not
 * yet loaded), check what has been loaded so far, record output that depends on a library's
 * counters, or need a fresh heap. suite-plan.test.ts checks that every file calling `vi.mock`
 * or `vi.doMock` is listed.
 */
export const ISOLATED_FILES: readonly string[] = [
  'test/adapters/ai-sdk/ai7.test.ts', // vi.mock('ai')
  'test/cli/pathological.test.ts', // 50 MB inputs: after other files' leftovers in the heap, GC took minutes
  'test/services/metering/summary-prices.test.ts', // vi.mock of the tokenizer module
  'test/services/metering/tokenizer.test.ts', // checks which tokenizer packages are loaded
  'test/visualizer/export.test.ts', // the committed sample trace's actor ids come from XState's counters
];

/**
 * Seconds each slow file took (vitest's per-file time in one whole run on 2 cores, 2026-12-02;
 * the files of 5 s or more), so that a run with no timing cache (a fresh clone:
 * vitest then starts the largest files first) still starts them first: a 30 s file that starts
 * last makes the whole run 30 s longer. Runs after the first use vitest's own cache of the last
 * run's times instead. Only the order depends on these.
 */
export const SLOW_FILES: Readonly<Record<string, number>> = {
  'test/visualizer/browser.test.ts': 40,
  'test/session/stores/multiprocess.test.ts': 30,
  'test/services/metering/tokenizer-ai.test.ts': 29,
  'test/adapters/ai-sdk/sigkill.test.ts': 28,
  'test/adapters/drop-in/examples.test.ts': 27,
  'test/cli/eval.test.ts': 26,
  'test/cli/pathological.test.ts': 26,
  'test/project/docs.test.ts': 25,
  'test/session/stores/race.test.ts': 19,
  'test/testing/llama-one-slot.test.ts': 18,
  'test/engine/property.test.ts': 16,
  'test/cli/program.test.ts': 15,
  'test/engine/agent-loop-input.test.ts': 13,
  'test/testing/loop-check.test.ts': 13,
  'test/testing/loop-check-drop-in.test.ts': 12,
  'test/testing/loop-check-score.test.ts': 11,
  'test/testing/loop-check-agent-loop.test.ts': 10,
  'test/testing/loop-check-ai-sdk.test.ts': 10,
  'test/services/summarizing/stall.test.ts': 9,
  'test/testing/loop-check-xstate.test.ts': 9,
  'test/session/append-fuzz.test.ts': 8,
  'test/project/suite-exit-code.test.ts': 7,
  'test/services/metering/tokenizer-linear.test.ts': 7,
  'test/visualizer/chromium-locator.test.ts': 7,
  'test/testing/llama-stale-usage.test.ts': 7,
  'test/project/refs.test.ts': 6,
  'test/machines/crash.test.ts': 6,
  'test/services/metering/tokenizer.test.ts': 6,
  'test/adapters/ai-sdk/example.test.ts': 5,
};

/**
 * Longest first: by the last run's time where vitest has one, else by SLOW_FILES; files with
 * neither keep the order they came in (vitest's: largest first). Stable.
 */
export function slowFirst<T>(items: readonly T[], seconds: (item: T) => number | undefined): T[] {
  return items
    .map((item, index) => ({ item, index, s: seconds(item) ?? 0 }))
    .sort((a, b) => b.s - a.s || a.index - b.index)
    .map(({ item }) => item);
}
