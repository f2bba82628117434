/**
 * checkLoop against the project's own loops and against loops broken on purpose: each generated
 * scenario must pass for a correct loop, and each broken loop must fail with a report naming the
 * scenario and the invariant it broke.
 */
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { runAgent } from '../examples/agent-loop';
import { runXStateAgent } from '../examples/xstate-agent';
import { Session } from '../src/session/session';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, jsonSchema, stepCountIs, tool, type ToolSet } from 'ai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { createAiSdkCompaction } from '../src/adapters/ai-sdk/index';
import { createCompactionEngine, SessionWriter, withCompaction, withErrorBodyRecovery } from '../src/index';
import { checkLoop, loopCoverage, loopScenarios, assertLoop, type LoopContext, type LoopReport } from '../src/testing';

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

/** The drop-in client (examples/openai-drop-in.ts's shape): the loop keeps its own messages array. */
async function dropInLoop(ctx: LoopContext): Promise<void> {
  const session = await Session.open(ctx.store, ctx.sessionId);
  const client = withCompaction(new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 }), { session, provider: ctx.provider, models: ctx.models, config: ctx.config });
  const messages: ChatCompletionMessageParam[] = client.compaction.messages();
  if (messages.length === 0) messages.push({ role: 'system', content: 'You are a careful agent.' });
  try {
    for (const turn of ctx.turns) {
      messages.push({ role: 'user', content: turn });
      for (let step = 0; step < 10; step++) {
        const reply = await client.chat.completions.create({ model: ctx.model, messages, tools: [...ctx.tools], max_tokens: ctx.maxOutputTokens }, { signal: ctx.signal });
        const message = reply.choices[0]!.message;
        messages.push(message);
        if (!message.tool_calls?.length) break;
        for (const call of message.tool_calls) {
          if (call.type === 'function') messages.push({ role: 'tool', tool_call_id: call.id, content: await ctx.runTool(call.function.name, call.function.arguments) });
        }
      }
    }
  } finally {
    await client.compaction.close({ session: true }).catch(() => undefined);
  }
}

/** The AI SDK (examples/ai-sdk-drop-in.ts's shape): generateText on the compaction's model, the session's messages plus the prompt. */
async function aiSdkLoop(ctx: LoopContext): Promise<void> {
  const session = await Session.open(ctx.store, ctx.sessionId);
  if (session.needsRecovery) session.recover();
  const provider = createOpenAICompatible({ name: ctx.provider, baseURL: ctx.baseURL, apiKey: ctx.apiKey, includeUsage: true });
  const compaction = createAiSdkCompaction({
    model: provider.chatModel(ctx.model),
    session,
    provider: ctx.provider,
    contextWindow: ctx.contextWindow,
    maxOutputTokens: ctx.maxOutputTokens,
    config: ctx.config,
  });
  const tools: ToolSet = Object.fromEntries(
    ctx.tools.map((t) => [t.function.name, tool({ description: t.function.description, inputSchema: jsonSchema(t.function.parameters as never), execute: async (args: unknown) => ctx.runTool(t.function.name, JSON.stringify(args)) })]),
  );
  try {
    for (const prompt of ctx.turns) {
      await generateText({
        model: compaction.model,
        system: 'You are a careful agent.',
        messages: [...compaction.messages(), { role: 'user', content: prompt }],
        tools,
        stopWhen: stepCountIs(10),
        maxOutputTokens: ctx.maxOutputTokens,
        maxRetries: 0,
        abortSignal: ctx.signal,
      });
    }
  } finally {
    await compaction.close({ session: true }).catch(() => undefined);
  }
}

const scenarios = loopScenarios();
const reports: LoopReport[] = [];

describe('examples/agent-loop.ts passes every generated scenario', () => {
  afterAll(() => {
    // What the scenarios exercised of the engine's charts, through this loop.
    const coverage = loopCoverage(reports);
    console.log(coverage.map((c) => `${c.chart} ${c.taken}/${c.total}`).join(', '));
    for (const chart of ['engine', 'pressure', 'transaction', 'overflow', 'background']) expect(coverage.find((c) => c.chart === chart)!.taken).toBeGreaterThan(0);
  });
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    const report = await checkLoop(exampleLoop, scenario);
    reports.push(report);
    assertLoop(report);
  });
});

describe('the drop-in openai client passes every generated scenario', () => {
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    assertLoop(await checkLoop(dropInLoop, scenario));
  });
});

describe('the AI SDK adapter passes every generated scenario', () => {
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    assertLoop(await checkLoop(aiSdkLoop, scenario));
  });
});

describe('examples/xstate-agent.ts passes every generated scenario', () => {
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    assertLoop(await checkLoop(xstateLoop, scenario));
  });
});

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
