/**
 * xcompact in an ordinary openai loop: the loop and its `messages` array stay as they are;
 * five lines are xcompact's (marked ◀). The wrapped client records the conversation in a
 * session, sends its compacted form, compacts when pressure reaches the threshold, recovers a
 * context overflow inside `create`, and a restart continues from the session alone.
 *
 *   npx tsx examples/openai-drop-in.ts                  # a scripted local model, no API key
 *   OPENAI_BASE_URL=https://api.deepseek.com/v1 OPENAI_API_KEY=sk-… MODEL=deepseek-chat \
 *     npx tsx examples/openai-drop-in.ts "what is in topic 3?"
 *
 * CONTEXT_WINDOW is needed for a model xcompact does not know (every local model). Run it twice
 * with the same SESSION: the second run continues the first conversation.
 */
import OpenAI from 'openai';
import type { ChatCompletionMessageToolCall, ChatCompletionTool } from 'openai/resources/chat/completions';
// In your application: from 'xcompact'.
import { JsonlStore, Session, withCompaction } from '../src/index'; // ◀
import { startLocalModel } from './local-model';

const TOOLS: ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'lookup',
      description: 'Look a topic up.',
      parameters: { type: 'object', properties: { topic: { type: 'string' } }, required: ['topic'] },
    },
  },
];

/** The tool dispatcher: `call.type` narrows the union of openai 6 and 7 (function and custom tool calls). */
function runTool(call: ChatCompletionMessageToolCall): string {
  if (call.type !== 'function') return `error: tool calls of type ${call.type} are not supported`;
  const { topic } = JSON.parse(call.function.arguments) as { topic: string };
  return `${topic}: ${'a paragraph of reference text about it. '.repeat(40)}`;
}

async function main(): Promise<void> {
  const local = process.env.OPENAI_BASE_URL ? undefined : await startLocalModel();
  const model = process.env.MODEL ?? (local ? 'local-model' : 'gpt-4o-mini');
  const window = process.env.CONTEXT_WINDOW ? Number(process.env.CONTEXT_WINDOW) : local ? 6_000 : undefined;
  const openai = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL || local!.baseURL, apiKey: process.env.OPENAI_API_KEY ?? 'not-needed' });
  const session = await Session.open(new JsonlStore(process.env.SESSION_DIR ?? '.xcompact-sessions'), process.env.SESSION ?? 'drop-in'); // ◀
  const client = withCompaction(openai, { session, models: window ? { [model]: { contextWindow: window, maxOutputTokens: 512 } } : {} }); // ◀
  const messages = client.compaction.messages(); // ◀ the conversation so far (empty the first time)
  if (messages.length > 0) console.log(`continuing a conversation of ${messages.length} messages`);
  else messages.push({ role: 'system', content: 'You answer questions; look topics up first.' });
  messages.push({ role: 'user', content: process.argv[2] ?? 'Look up every topic, then tell me where the answer is.' });

  for (;;) {
    const reply = await client.chat.completions.create({ model, messages, tools: TOOLS, max_tokens: 512 });
    const message = reply.choices[0]!.message;
    messages.push(message);
    if (!message.tool_calls?.length) {
      console.log(message.content);
      break;
    }
    for (const call of message.tool_calls) messages.push({ role: 'tool', tool_call_id: call.id, content: runTool(call) });
  }

  await client.compaction.close({ session: true }); // ◀
  if (local) {
    console.log(`local model: ${local.stats.requests} requests, ${local.stats.summaries} summary requests, ${local.stats.overflows} overflow recovered`);
    await local.close();
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
});
