/**
 * xcompact/ai-sdk and a model with no known window: refused at the first call (it would never
 * be compacted), naming the models entry; nothing recorded or sent. `requireCapacity: false`
 * opts out (overflow recovery only).
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAiSdkCompaction, Session } from '../../../src/adapters/ai-sdk/index';
import { BudgetError } from '../../../src/index';
import { startOpenAIServer, type LocalOpenAIServer } from '../../../src/testing/index';

let server: LocalOpenAIServer;
beforeAll(async () => {
  server = await startOpenAIServer({ defaultModel: 'm' });
});
afterAll(() => server.close());
const model = () => createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'test', includeUsage: true }).chatModel('mystery');

describe('xcompact/ai-sdk: a model with no known window', () => {
  it('is refused at the first call with a BudgetError naming the models entry; nothing recorded or sent', async () => {
    const compaction = createAiSdkCompaction({ model: model(), session: Session.inMemory() });
    const sent = server.requests.length;
    const err = await generateText({ model: compaction.model, prompt: 'hi', maxRetries: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BudgetError);
    expect((err as BudgetError).code).toBe('no-context-capacity');
    expect((err as Error).message).toContain('models: { "local/mystery": { contextWindow: <tokens> } }');
    expect(compaction.session.length).toBe(0);
    expect(server.requests.length).toBe(sent);
    await compaction.close();
  });

  it('runs with requireCapacity: false', async () => {
    const compaction = createAiSdkCompaction({ model: model(), session: Session.inMemory(), requireCapacity: false });
    server.enqueue({ kind: 'reply', content: 'hello' });
    const r = await generateText({ model: compaction.model, prompt: 'hi', maxRetries: 0 });
    expect(r.text).toBe('hello');
    await compaction.close();
  });
});
