import OpenAI = require('openai');
import xcompact = require('xcompact');

async function main(): Promise<void> {
  const session = await xcompact.Session.open(new xcompact.JsonlStore('./sessions'), 'my-session');
  const client = xcompact.withCompaction(new OpenAI.OpenAI(), { session, models: { 'my-model': { contextWindow: 32_768 } } });
  const messages = client.compaction.messages();
  messages.push({ role: 'user', content: 'hello' });
  const reply = await client.chat.completions.create({ model: 'my-model', messages });
  console.log(reply.choices[0]!.message.content);
  await client.compaction.close({ session: true });
}
main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
