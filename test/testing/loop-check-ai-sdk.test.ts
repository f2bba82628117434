/**
 * checkLoop against the AI SDK adapter: every generated scenario must pass. One file per loop (the others:
 * test/loop-check*.test.ts), so the scenarios of different loops, mostly waits on the scripted
 * server, run in parallel workers; test/testing/loop-check.test.ts also checks the checker against a loop
 * broken on purpose.
 */
import { describe, it } from 'vitest';
import { assertLoop, checkLoop, loopScenarios } from '../../src/testing';
import { aiSdkLoop as aiSdk } from '../helpers/reference-loops';
import { LOOP_RUN_MS } from '../helpers/suite-plan';

/**
 * The AI SDK (examples/ai-sdk-drop-in.ts's shape, test/helpers/reference-loops.ts): generateText on the compaction's model,
 * `[...compaction.messages(), prompt]`; no recover() of its own: the adapter closes what a crashed process left open.
 */
const aiSdkLoop = aiSdk();

const scenarios = loopScenarios();

describe('the AI SDK adapter passes every generated scenario', () => {
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    assertLoop(await checkLoop(aiSdkLoop, scenario, { timeoutMs: LOOP_RUN_MS }));
  });
});
