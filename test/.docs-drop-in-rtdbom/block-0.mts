import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionMessageToolCall, ChatCompletionTool } from 'openai/resources/chat/completions';
import { JsonlStore, Session, withCompaction } from 'xcompact';

const tools: ChatCompletionTool[] = [
  { type: 'function', function: { name: 'read_file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
];
function runTool(call: ChatCompletionMessageToolCall): string {
  // openai 6 and 7 type a tool call as function | custom: narrow before reading `function`.
  if (call.type !== 'function') return `error: tool calls of type ${call.type} are not supported`;
  const { path } = JSON.parse(call.function.arguments) as { path: string };
  return `the contents of ${path}`;
}

const session = await Session.open(new JsonlStore('./sessions'), 'my-session');
const client = withCompaction(new OpenAI(), { session, models: { 'my-model': { contextWindow: 32_768 } } });
const messages: ChatCompletionMessageParam[] = client.compaction.messagez(); // [] the first time; the conversation so far after a restart
if (messages.length === 0) messages.push({ role: 'system', content: 'You are a coding agent.' });
messages.push({ role: 'user', content: 'Fix the failing test in src/parser.ts' });

for (;;) {
  const reply = await client.chat.completions.create({ model: 'my-model', messages, tools });
  const message = reply.choices[0]!.message;
  messages.push(message);
  if (!message.tool_calls?.length) break;
  for (const call of message.tool_calls) messages.push({ role: 'tool', tool_call_id: call.id, content: runTool(call) });
}
await client.compaction.close({ session: true });
