/**
 * Compiled by test/types.test.ts (`tsc -p test/types/tsconfig.json`), never run: a client from
 * each supported major version of the `openai` SDK is accepted where xcompact takes one.
 * `openai7` is openai@7 installed under an alias (package.json devDependencies).
 */
import OpenAI6 from 'openai';
import OpenAI7 from 'openai7';
import { createCompactionEngine, OpenAISummarizer, SessionWriter, withErrorBodyRecovery, type Session } from '../../src/index';

declare const session: Session;

const v6 = new OpenAI6({ apiKey: 'test' });
const v7 = new OpenAI7({ apiKey: 'test' });

createCompactionEngine({ session, client: v6 });
createCompactionEngine({ session, client: v7 });
new OpenAISummarizer({ client: v6 });
new OpenAISummarizer({ client: v7 });
// The patched client keeps its own type (the caller goes on using it as their SDK's client).
export const patched6: OpenAI6 = withErrorBodyRecovery(v6);
export const patched7: OpenAI7 = withErrorBodyRecovery(v7);

// A reply from either SDK is recorded as it comes (message and usage types of both majors).
export async function record(writer: SessionWriter): Promise<void> {
  const a = await v6.chat.completions.create({ model: 'm', messages: [] });
  writer.assistantFromCompletion(a.choices[0]!.message, { usage: a.usage ?? null });
  const b = await v7.chat.completions.create({ model: 'm', messages: [] });
  writer.assistantFromCompletion(b.choices[0]!.message, { usage: b.usage ?? null });
}

// The check can fail: something that is not a client is refused.
// @ts-expect-error not an OpenAI client
createCompactionEngine({ session, client: { chat: {} } });
// @ts-expect-error not an OpenAI client
new OpenAISummarizer({ client: {} });
