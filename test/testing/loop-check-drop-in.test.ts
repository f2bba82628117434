/**
 * checkLoop against the drop-in openai client: every generated scenario must pass. One file per loop (the others:
 * test/loop-check*.test.ts), so the scenarios of different loops, mostly waits on the scripted
 * server, run in parallel workers; test/testing/loop-check.test.ts also checks the checker against a loop
 * broken on purpose.
 */
import { describe, it } from 'vitest';
import { assertLoop, checkLoop, loopScenarios } from '../../src/testing';
import { dropInLoop as dropIn } from '../helpers/reference-loops';
import { LOOP_RUN_MS } from '../helpers/suite-plan';

/** The drop-in client (examples/openai-drop-in.ts's shape, test/helpers/reference-loops.ts): the loop keeps its own messages array. */
const dropInLoop = dropIn();

const scenarios = loopScenarios();

describe('the drop-in openai client passes every generated scenario', () => {
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    assertLoop(await checkLoop(dropInLoop, scenario, { timeoutMs: LOOP_RUN_MS }));
  });
});
