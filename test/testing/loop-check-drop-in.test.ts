/**
 * checkLoop against the drop-in openai client: every generated scenario must pass. One file per loop (the others:
 * test/loop-check*.test.ts), so the scenarios of different loops, mostly waits on the scripted
 * server, run in parallel workers; test/testing/loop-check.test.ts also checks the checker against a loop
 * broken on purpose.
 */
import OpenAI from 'openai';
import { describe, it } from 'vitest';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { Session } from '../../src/session/session';
import { withCompaction } from '../../src/index';
import { assertLoop, checkLoop, loopScenarios, type LoopContext } from '../../src/testing';

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

const scenarios = loopScenarios();

describe('the drop-in openai client passes every generated scenario', () => {
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    assertLoop(await checkLoop(dropInLoop, scenario));
  });
});
