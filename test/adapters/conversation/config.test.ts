/**
 * One parsed config reaches every face and every recall path: `tokenizer: 'server'` asks the
 * `/tokenize` of the very server each face's client was given (an Anthropic base URL has no `/v1`,
 * an AI SDK provider keeps its URL in its config), and `redaction` applies to the AI SDK's recall
 * tool as to the engine's own recall.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { createAiSdkCompaction } from '../../../src/adapters/ai-sdk/index';
import { Session, SessionWriter } from '../../../src/index';
import { startOpenAIServer, type LocalOpenAIServer } from '../../../src/testing/index';
import { FACES, openFace } from '../../helpers/faces';

let server: LocalOpenAIServer;
beforeAll(async () => {
  server = await startOpenAIServer({ tokenize: true, scenarios: () => ({ kind: 'reply', content: 'Noted.' }) });
});
afterAll(() => server.close());

describe("tokenizer: 'server' with each face's client as given", () => {
  for (const face of FACES) {
    it(`${face}: the request is priced by the server's own /tokenize`, async () => {
      const from = server.requests.length;
      const loop = openFace(face, {
        url: server.url,
        model: 'local-model',
        session: Session.inMemory(),
        models: { 'local-model': { contextWindow: 16_000 } },
        config: { tokenizer: 'server' },
        stream: false,
        runTool: () => 'ok',
      });
      expect(await loop.turn('Count me with your own tokenizer.')).toBe('Noted.');
      expect(server.requests.slice(from).some((r) => r.path === '/tokenize')).toBe(true);
      const m = loop.engine.measure();
      expect(m.tokenizer).toBe('server');
      expect(m.fallbackNodes).toBe(0);
      await loop.close();
    });
  }
});

describe('redaction reaches the AI SDK recall tool', () => {
  for (const enabled of [true, false]) {
    it(`redaction ${enabled ? 'on' : 'off'} with a pattern of the config: the recall answer ${enabled ? 'hides' : 'shows'} it`, async () => {
      const session = Session.inMemory();
      const provider = createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'test', includeUsage: true });
      const compaction = createAiSdkCompaction({
        model: provider.chatModel('local-model'),
        session,
        contextWindow: 16_000,
        config: { recall: true, redaction: { enabled, patterns: ['ACME-\\d{6}'] } },
      });
      // Turns whose first tool result names an internal token; the oldest are then compacted away.
      const w = new SessionWriter(session);
      for (let t = 0; t < 6; t++) {
        w.startTurn();
        w.request({ provider: 'local', model: 'local-model', tools: [] });
        w.user(`Question ${t}: ${'some context for it. '.repeat(30)}`);
        w.startStep();
        w.assistant({ toolCalls: [{ id: `c${t}`, name: 'vault', arguments: JSON.stringify({ key: `deploy${t}` }) }] });
        w.toolResult(`c${t}`, t === 0 ? 'deploy token: ACME-123456 (rotate monthly)' : `nothing for ${t}. `.repeat(30), { toolName: 'vault' });
        w.endStep();
        w.startStep();
        w.assistant({ text: `Answer ${t}. ${'with reasons '.repeat(30)}` });
        w.endStep();
        w.endTurn();
      }
      server.enqueue({ kind: 'reply', content: '## Primary Request and Intent\n- the deploy token was looked up' });
      expect(await compaction.engine.compactNow()).not.toBeNull();
      const answer = (await compaction.tools.recall!.execute!({ query: 'deploy token' }, { toolCallId: 'r1', messages: [] })) as { text: string };
      if (enabled) {
        expect(answer.text).not.toContain('ACME-123456');
        expect(answer.text).toContain('[REDACTED');
      } else {
        expect(answer.text).toContain('ACME-123456');
      }
      await compaction.close();
    });
  }
});
