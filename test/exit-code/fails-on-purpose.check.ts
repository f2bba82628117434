// Run only by test/suite-exit-code.test.ts: a failing test, to prove a red run exits non-zero.
import { expect, it } from 'vitest';

it('fails on purpose', () => {
  expect(1).toBe(2);
});
