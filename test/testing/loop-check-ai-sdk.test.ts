/**
 * checkLoop against the AI SDK adapter: every generated scenario must pass. One file per loop (the others:
 * test/loop-check*.test.ts), so the scenarios of different loops, mostly waits on the scripted
 * server, run in parallel workers; test/testing/loop-check.test.ts also checks the checker against a loop
 * broken on purpose.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { describe, it } from 'vitest';
import { generateText, jsonSchema, stepCountIs, tool, type ToolSet } from 'ai';
import { createAiSdkCompaction } from '../../src/adapters/ai-sdk/index';
import { Session } from '../../src/session/session';
import { assertLoop, checkLoop, loopScenarios, type LoopContext } from '../../src/testing';

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

describe('the AI SDK adapter passes every generated scenario', () => {
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    assertLoop(await checkLoop(aiSdkLoop, scenario));
  });
});
