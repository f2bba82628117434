import OpenAI from 'openai';
import { Session, withCompaction } from 'xcompact';
import { OVERFLOW_BODIES, startOpenAIServer, type ChatRequestBody, type Scenario } from 'xcompact/testing';

const isSummary = (body: ChatRequestBody) => {
  const last = body.messages?.at(-1);
  return last?.role === 'user' && typeof last.content === 'string' && last.content.startsWith('You are now acting as a compaction engine');
};
let calls = 0;
const server = await startOpenAIServer({
  scenarios: ({ body }): Scenario => {
    if (isSummary(body)) return { kind: 'reply', content: '## Primary Request and Intent\n- read the files' };
    calls++;
    return calls < 10
      ? { kind: 'reply', toolCalls: [{ id: `call_${calls}`, name: 'read_file', arguments: JSON.stringify({ path: `f${calls}.ts` }) }] }
      : { kind: 'reply', content: 'Done.' };
  },
});

const client = withCompaction(new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }), {
  session: Session.inMemory(),
  models: { 'local-model': { contextWindow: 4_000 } },
});
// … your loop. To see an overflow recovered, make the provider reject the next request as vLLM does:
server.enqueue({ kind: 'status', ...OVERFLOW_BODIES.vllm });
// … and look at what was sent:
console.log(server.requests.map((r) => (r.json as ChatRequestBody | undefined)?.messages?.length));
await client.compaction.close();
await server.close();
