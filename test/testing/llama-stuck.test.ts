/**
 * docs/spec.md#4-pressure-compaction, reproduced with the local server (llama.cpp's 8,192 window): one large
 * parallel batch straddling the retained tail's cut must not block compaction. The cut moves
 * toward the tail (a smaller retained tail) when moving it toward the head leaves nothing to
 * condense; `stuck` is only for one unit alone over the budget, and `afterStep` says
 * `preparing` only when a background summary really started.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCompactionEngine, Session, SessionWriter, type EngineNotification } from '../../src/index';
import { startOpenAIServer, type LocalOpenAIServer } from '../../src/testing/openai-server';

const WORDS = 'alpha beta gamma delta build file source test error module value return import export const'.split(' ');
function prose(words: number, seed: number): string {
  let x = seed;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out.push(WORDS[x % WORDS.length]!);
  }
  return out.join(' ');
}

let server: LocalOpenAIServer;
beforeAll(async () => {
  server = await startOpenAIServer({ contextWindow: 8192 });
});
afterAll(() => server.close());

describe('a parallel batch straddling the cut (docs/spec.md#4-pressure-compaction)', () => {
  for (const background of [true, false]) {
    it(`compacts instead of reporting stuck (background ${background})`, async () => {
      const session = Session.inMemory();
      const w = new SessionWriter(session);
      const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
      const model = 'qwen-tiny';
      const engine = createCompactionEngine({
        session,
        client,
        models: { [`local/${model}`]: { contextWindow: 8192, maxOutputTokens: 512 } },
        config: { maxTokens: 512, economics: false, background },
      });
      const events: EngineNotification[] = [];
      engine.on((e) => events.push(e));
      const system = 'You are a coding agent.';
      w.system(system);
      w.startTurn();
      w.user('Read the nine modules and then fix the tests one by one.');
      const statuses: string[] = [];
      const started = () => events.filter((e) => e.type === 'compaction.started').length;
      try {
        for (let step = 0; step < 9; step++) {
          w.startStep();
          w.request({ provider: 'local', model, systemPrompt: system, tools: [], maxTokens: 512 });
          const calls = step === 0 ? 9 : 1;
          // Summaries (streamed) get a short summary; the agent's request, this step's tool calls.
          server.setHandler((req) =>
            req.body.stream
              ? { kind: 'reply', content: 'The user asked to read nine modules; all were read.' }
              : {
                  kind: 'reply',
                  toolCalls: Array.from({ length: calls }, (_, i) => ({ id: `c${step}_${i}`, name: 'read', arguments: JSON.stringify({ path: `m${i}.ts` }) })),
                },
          );
          const completion = await client.chat.completions.create({ model, messages: [...session.deriveMessages()], max_tokens: 512 });
          const choice = completion.choices[0]!;
          w.assistantFromCompletion(choice.message, { usage: completion.usage ?? null, provider: 'local', model, finishReason: choice.finish_reason });
          for (const c of choice.message.tool_calls ?? [])
            w.toolResult(c.id, step === 0 ? prose(410, c.id.length + step * 31 + Number(c.id.slice(-1))) : prose(60, step));
          const before = started();
          const r = await engine.afterStep();
          statuses.push(r.status);
          // 'preparing' means a background summary started at this step (or one is still running).
          if (r.status === 'preparing') expect(started()).toBeGreaterThan(0);
          if (r.status === 'preparing' && before === started()) expect(session.lock.held).toBe(true);
          w.endStep();
        }
        await new Promise((r) => setTimeout(r, 100)); // a background summary still running commits
      } finally {
        engine.stop();
      }
      expect(statuses).not.toContain('stuck');
      expect(events.filter((e) => e.type === 'compaction.committed').length).toBeGreaterThan(0);
      expect(events.filter((e) => e.type === 'compaction.skipped')).toEqual([]);
      // No request the server refused as over its window.
      expect(server.requests.filter((r) => r.scenario === 'reply' && r.json && (r.json as { stream?: boolean }).stream !== true).length).toBeGreaterThan(0);
    });
  }
});
