/**
 * checkLoop against examples/agent-loop.ts: every generated scenario must pass. One file per loop (the others:
 * test/loop-check*.test.ts), so the scenarios of different loops, mostly waits on the scripted
 * server, run in parallel workers; test/testing/loop-check.test.ts also checks the checker against a loop
 * broken on purpose.
 */
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { runAgent } from '../../examples/agent-loop';
import { Session } from '../../src/session/session';
import { withErrorBodyRecovery } from '../../src/index';
import { assertLoop, checkLoop, loopCoverage, loopScenarios, type LoopContext, type LoopReport } from '../../src/testing';
import { LOOP_RUN_MS } from '../helpers/suite-plan';

/** examples/agent-loop.ts, as a user would wire it for the checker. */
async function exampleLoop(ctx: LoopContext): Promise<void> {
  const session = await Session.open(ctx.store, ctx.sessionId);
  if (session.needsRecovery) session.recover();
  try {
    await runAgent({
      // examples/README.md: wrap the client so a body-less 400 (vLLM, Mistral) is still read as an overflow.
      client: withErrorBodyRecovery(new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 })),
      provider: ctx.provider,
      model: ctx.model,
      contextWindow: ctx.contextWindow,
      maxOutputTokens: ctx.maxOutputTokens,
      config: ctx.config,
      session,
      sandbox: ctx.workdir,
      inputs: ctx.turns,
      signal: ctx.signal,
    });
  } finally {
    await session.close().catch(() => undefined);
  }
}

const scenarios = loopScenarios();
const reports: LoopReport[] = [];

describe('examples/agent-loop.ts passes every generated scenario', () => {
  afterAll(() => {
    // What the scenarios exercised of the engine's charts, through this loop.
    const coverage = loopCoverage(reports);
    console.log(coverage.map((c) => `${c.chart} ${c.taken}/${c.total}`).join(', '));
    for (const chart of ['engine', 'pressure', 'transaction', 'overflow', 'background'])
      expect(coverage.find((c) => c.chart === chart)!.taken).toBeGreaterThan(0);
  });
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    const report = await checkLoop(exampleLoop, scenario, { timeoutMs: LOOP_RUN_MS });
    reports.push(report);
    assertLoop(report);
  });
});
