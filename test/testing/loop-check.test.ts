/**
 * checkLoop against a small loop written against the control API and against that loop broken on
 * purpose: each generated scenario must pass for the correct loop, and each broken loop must fail
 * with a report naming the scenario and the invariant it broke. The project's examples and
 * adapters run the same scenarios in test/loop-check-*.test.ts, one file per loop, so that their
 * waits on the scripted server overlap in parallel workers.
 */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { Session } from '../../src/session/session';
import { createCompactionEngine, SessionWriter, withErrorBodyRecovery } from '../../src/index';
import { checkLoop, loopScenarios, assertLoop, type LoopContext } from '../../src/testing';

const scenarios = loopScenarios();





// ---------------------------------------------------------------------------------------------
// A small loop written against the engine's control API, and four ways to get it wrong.

interface Breakage {
  noRequestError?: boolean;
  afterStepAfterStepEnd?: boolean;
  retryWithoutToolResults?: boolean;
  noRecover?: boolean;
}

function referenceLoop(broken: Breakage = {}) {
  return async (ctx: LoopContext): Promise<void> => {
    const session = await Session.open(ctx.store, ctx.sessionId);
    if (session.needsRecovery && !broken.noRecover) session.recover();
    const client = withErrorBodyRecovery(new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 }));
    const engine = createCompactionEngine({ session, client, models: ctx.models, config: ctx.config });
    const w = new SessionWriter(session);
    const tools = [...ctx.tools];
    try {
      if (session.surface.length === 0) w.system('You are a careful agent.');
      for (const input of ctx.turns) {
        w.startTurn();
        w.user(input);
        for (let step = 0; step < 10; step++) {
          w.startStep();
          w.request({ provider: ctx.provider, model: ctx.model, systemPrompt: 'You are a careful agent.', tools, maxTokens: ctx.maxOutputTokens });
          let reply;
          for (let resend = false; ; resend = true) {
            let messages = [...session.deriveMessages()];
            if (resend && broken.retryWithoutToolResults) messages = messages.filter((m) => m.role !== 'tool');
            try {
              reply = await client.chat.completions.create({ model: ctx.model, messages, tools, max_tokens: ctx.maxOutputTokens }, { signal: ctx.signal });
              break;
            } catch (err) {
              if (broken.noRequestError) throw err;
              const action = await engine.onRequestError(err, { signal: ctx.signal });
              if (action.kind !== 'retry') throw err;
            }
          }
          const message = reply.choices[0]!.message;
          w.assistantFromCompletion(message, { usage: reply.usage ?? null, provider: ctx.provider, model: ctx.model });
          for (const call of message.tool_calls ?? []) {
            if (call.type === 'function') w.toolResult(call.id, await ctx.runTool(call.function.name, call.function.arguments));
          }
          if (broken.afterStepAfterStepEnd) {
            w.endStep();
            await engine.afterStep({ signal: ctx.signal });
          } else {
            await engine.afterStep({ signal: ctx.signal });
            w.endStep();
          }
          if (!message.tool_calls?.length) break;
        }
        w.endTurn();
      }
    } finally {
      engine.stop();
      await session.close().catch(() => undefined);
    }
  };
}

describe('a loop written against the control API passes every scenario; broken ones are named', () => {
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    assertLoop(await checkLoop(referenceLoop(), scenario));
  });

  const first = (name: string) => scenarios.find((s) => s.name.includes(name))!;
  const failing = async (broken: Breakage, scenarioName: string) => {
    const report = await checkLoop(referenceLoop(broken), first(scenarioName));
    expect(report.ok).toBe(false);
    expect(() => assertLoop(report)).toThrow(report.scenario);
    return report.violations.map((v) => v.invariant);
  };

  it('no onRequestError: an overflow the engine would recover ends the loop', async () => {
    expect(await failing({ noRequestError: true }, 'openai overflow → engine retries')).toContain('expected-outcome');
  });
  it('afterStep after step/end is named', async () => {
    expect(await failing({ afterStepAfterStepEnd: true }, 'pressure compacts → summary succeeds')).toContain('after-step-inside-step');
  });
  it('a retry that re-sends without the tool result breaks the pairing', async () => {
    expect(await failing({ retryWithoutToolResults: true }, 'openai overflow → engine retries')).toContain('tool-results-paired');
  });
  it('no recover() on reopen: the loop does not resume after a crash', async () => {
    expect(await failing({ noRecover: true }, 'process crashes → process reopens')).toContain('resumes-after-crash');
  });
});

describe('checkLoop under node:test', () => {
  it('runs the scenarios as node:test tests', async () => {
    const { spawnSync } = await import('node:child_process');
    const run = (only: string) =>
      spawnSync(process.execPath, ['--import', 'tsx', '--test', 'test/fixtures/loop-check/node-test.mts'], {
        encoding: 'utf8',
        env: { ...process.env, XCOMPACT_LOOP_ONLY: only },
        timeout: 60_000,
      });
    const ok = run('pressure prunes|openai overflow → engine retries');
    expect(ok.stdout).toMatch(/# pass 2/);
    expect(ok.status).toBe(0);
  }, 90_000);
});
