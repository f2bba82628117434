import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs } from 'ai';
import { createAiSdkCompaction, JsonlStore, Session } from 'xcompact/ai-sdk';

const provider = createOpenAICompatible({ name: 'local', baseURL: 'http://127.0.0.1:8080/v1', includeUsage: true });
const compaction = createAiSdkCompaction({ model: provider.chatModel('my-model'), session: await Session.open(new JsonlStore('./sessions'), 'chat'), contextWindow: 32_768 });
const result = await generateText({
  model: compaction.model,
  system: 'You are a coding agent.',
  messages: [...compaction.messages(), { role: 'user', content: 'Fix the failing test' }],
  stopWhen: stepCountIs(20),
  maxRetries: 0, // an overflow is xcompact's to recover
});
console.log(result.text);
await compaction.close({ session: true });
