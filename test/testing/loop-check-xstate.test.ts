/**
 * checkLoop against examples/xstate-agent.ts: every generated scenario must pass. One file per loop (the others:
 * test/loop-check*.test.ts), so the scenarios of different loops, mostly waits on the scripted
 * server, run in parallel workers; test/testing/loop-check.test.ts also checks the checker against a loop
 * broken on purpose.
 */
import OpenAI from 'openai';
import { describe, it } from 'vitest';
import { runXStateAgent } from '../../examples/xstate-agent';
import { Session } from '../../src/session/session';
import { withErrorBodyRecovery } from '../../src/index';
import { assertLoop, checkLoop, loopScenarios, type LoopContext } from '../../src/testing';
import { LOOP_RUN_MS } from '../helpers/suite-plan';

/** examples/xstate-agent.ts (an agent loop that is itself an XState machine), one run per turn. */
async function xstateLoop(ctx: LoopContext): Promise<void> {
  const session = await Session.open(ctx.store, ctx.sessionId);
  if (session.needsRecovery) session.recover();
  try {
    for (const task of ctx.turns) {
      await runXStateAgent({
        client: withErrorBodyRecovery(new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 })),
        session,
        provider: ctx.provider,
        model: ctx.model,
        contextWindow: ctx.contextWindow,
        maxTokens: ctx.maxOutputTokens,
        config: ctx.config,
        task,
        maxSteps: 10,
        tools: [...ctx.tools],
        runTool: ctx.runTool,
        signal: ctx.signal,
      });
    }
  } finally {
    await session.close().catch(() => undefined);
  }
}

const scenarios = loopScenarios();

describe('examples/xstate-agent.ts passes every generated scenario', () => {
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    assertLoop(await checkLoop(xstateLoop, scenario, { timeoutMs: LOOP_RUN_MS }));
  });
});
