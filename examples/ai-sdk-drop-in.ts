/**
 * xcompact in an AI SDK loop, five lines (marked ◀): the app keeps no history of its own; each
 * turn passes the session's messages plus the new prompt, so a restart continues from the
 * session alone. `model: compaction.model` is the one change to generateText.
 *
 *   npx tsx examples/ai-sdk-drop-in.ts                  # a scripted local model, no API key
 *   OPENAI_BASE_URL=https://api.deepseek.com/v1 OPENAI_API_KEY=sk-… MODEL=deepseek-chat \
 *     npx tsx examples/ai-sdk-drop-in.ts "what is in topic 3?"
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';
// In your application: from 'xcompact/ai-sdk'.
import { createAiSdkCompaction, JsonlStore, Session } from '../src/adapters/ai-sdk/index'; // ◀
import { startLocalModel } from './local-model';

const tools = {
  lookup: tool({
    description: 'Look a topic up.',
    inputSchema: z.object({ topic: z.string() }),
    execute: async ({ topic }) => `${topic}: ${'a paragraph of reference text about it. '.repeat(40)}`,
  }),
};

async function main(): Promise<void> {
  const local = process.env.OPENAI_BASE_URL ? undefined : await startLocalModel();
  const provider = createOpenAICompatible({
    name: 'local',
    baseURL: process.env.OPENAI_BASE_URL || local!.baseURL,
    apiKey: process.env.OPENAI_API_KEY ?? 'not-needed',
    includeUsage: true,
  });
  const window = process.env.CONTEXT_WINDOW ? Number(process.env.CONTEXT_WINDOW) : local ? 6_000 : undefined;
  const store = process.env.SESSION_DIR ?? '.xcompact-sessions';
  const compaction = createAiSdkCompaction({
    model: provider.chatModel(process.env.MODEL ?? 'local-model'),
    session: await Session.open(new JsonlStore(store), process.env.SESSION ?? 'ai-sdk-drop-in'),
    ...(window ? { contextWindow: window, maxOutputTokens: 512 } : {}),
  }); // ◀

  const prompt = process.argv[2] ?? 'Look up every topic, then tell me where the answer is.';
  const result = await generateText({
    model: compaction.model, // ◀
    system: 'You answer questions; look topics up first.',
    messages: [...compaction.messages(), { role: 'user', content: prompt }], // ◀ the conversation so far, then the prompt
    tools,
    stopWhen: stepCountIs(30),
    maxOutputTokens: 512,
    maxRetries: 0, // an overflow is xcompact's to recover
  });
  console.log(result.text);

  await compaction.close({ session: true }); // ◀
  if (local) {
    console.log(`local model: ${local.stats.requests} requests, ${local.stats.summaries} summary requests, ${local.stats.overflows} overflow recovered`);
    await local.close();
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
});
