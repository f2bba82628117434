/**
 * Compiled by test/types.test.ts, never run: `withCompaction` takes a client of either openai
 * major and gives back that client's own type (its `create` overloads, stream and not), and the
 * tool dispatcher of docs/drop-in.md type-checks against both SDKs' tool-call unions (function
 * and custom tool calls).
 */
import OpenAI6 from 'openai';
import OpenAI7 from 'openai7';
import type { ChatCompletionMessageToolCall as ToolCall6 } from 'openai/resources/chat/completions';
import type { ChatCompletionMessageToolCall as ToolCall7 } from 'openai7/resources/chat/completions';
import { withCompaction, type Session } from '../../src/index';

declare const session: Session;

const v6 = withCompaction(new OpenAI6({ apiKey: 'test' }), { session });
const v7 = withCompaction(new OpenAI7({ apiKey: 'test' }), { session });
export const same6: OpenAI6 = v6;
export const same7: OpenAI7 = v7;

function runTool6(call: ToolCall6): string {
  if (call.type !== 'function') return `error: tool calls of type ${call.type} are not supported`;
  return call.function.name + call.function.arguments;
}
function runTool7(call: ToolCall7): string {
  if (call.type !== 'function') return `error: tool calls of type ${call.type} are not supported`;
  return call.function.name + call.function.arguments;
}

export async function loop(): Promise<void> {
  const a = await v6.chat.completions.create({ model: 'm', messages: [] });
  for (const call of a.choices[0]!.message.tool_calls ?? []) runTool6(call);
  const b = await v7.chat.completions.create({ model: 'm', messages: [] });
  for (const call of b.choices[0]!.message.tool_calls ?? []) runTool7(call);
  const stream = await v6.chat.completions.create({ model: 'm', messages: [], stream: true });
  for await (const chunk of stream) void chunk.choices[0]?.delta.content;
  await v6.compaction.close({ session: true });
  await v7.compaction.close();
}

// The check can fail: reading `function` without narrowing is refused (a custom tool call has none).
declare const unnarrowed: ToolCall6;
// @ts-expect-error `function` does not exist on a custom tool call
void unnarrowed.function.name;
// @ts-expect-error not an OpenAI client
withCompaction({ chat: {} }, { session });
