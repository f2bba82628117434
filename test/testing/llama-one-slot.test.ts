/**
 * docs/local-models.md#one-server-slot-background-summaries-while-the-tools-run with the local server as `llama-server -np 1` (one request at a time): with the
 * model's `concurrency: 1`, a background summary runs while the agent executes its tools, never
 * while the agent's own request is open, so the agent's requests never queue behind a summary.
 * Without the setting (for contrast, same world) they do.
 */
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { createCompactionEngine, Session, SessionWriter, type EngineNotification } from '../../src/index';
import { startOpenAIServer } from '../../src/testing/openai-server';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TOOLS = [{ type: 'function', function: { name: 'read', parameters: { type: 'object', properties: { path: { type: 'string' } } } } }];

async function session(concurrency: number | undefined) {
  const server = await startOpenAIServer({ slots: 1 });
  // Summaries (streamed) take 250 ms of the slot; the agent's steps 60 ms; tools run 400 ms.
  server.setHandler((req) =>
    req.body.stream
      ? { kind: 'reply', content: 'The agent read the modules one by one; nothing is broken.', delayMs: 250 }
      : { kind: 'reply', toolCalls: [{ id: `c${req.index}`, name: 'read', arguments: JSON.stringify({ path: `m${req.index}.ts` }) }], delayMs: 60 },
  );
  const s = Session.inMemory();
  const w = new SessionWriter(s);
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
  const model = 'qwen-tiny';
  const engine = createCompactionEngine({
    session: s,
    client,
    models: { [`local/${model}`]: { contextWindow: 8192, maxOutputTokens: 512, ...(concurrency ? { concurrency } : {}) } },
    config: { maxTokens: 512, economics: false },
  });
  const events: EngineNotification[] = [];
  engine.on((e) => events.push(e));
  const system = 'You are a coding agent.';
  w.system(system);
  w.startTurn();
  w.user('Read every module and report.');
  const agentIndexes: number[] = [];
  try {
    for (let step = 0; step < 16; step++) {
      w.startStep();
      w.request({ provider: 'local', model, systemPrompt: system, tools: TOOLS, maxTokens: 512 });
      agentIndexes.push(server.requests.length);
      const c = await client.chat.completions.create({ model, messages: [...s.deriveMessages()], tools: TOOLS as never, max_tokens: 512 });
      const choice = c.choices[0]!;
      w.assistantFromCompletion(choice.message, { usage: c.usage ?? null, provider: 'local', model, finishReason: choice.finish_reason });
      await sleep(400); // the tool runs
      for (const call of choice.message.tool_calls ?? []) w.toolResult(call.id, `export const value${step} = ${step};\n`.repeat(120));
      await engine.afterStep();
      w.endStep();
    }
  } finally {
    engine.stop();
    await server.close();
  }
  const agent = server.requests.filter((r) => !(r.json as { stream?: boolean }).stream);
  const queued = agent.reduce((n, r) => n + (r.queuedMs ?? 0), 0);
  const committed = events.filter((e) => e.type === 'compaction.committed').length;
  return { queued, committed, agent: agent.length };
}

describe('one server slot (docs/local-models.md#one-server-slot-background-summaries-while-the-tools-run)', () => {
  it('with concurrency 1, background summaries run during the tools: the agent never queues behind one', async () => {
    const one = await session(1);
    expect(one.committed).toBeGreaterThan(0);
    expect(one.queued, 'ms the agent queued behind summaries').toBeLessThan(40);
    const unbounded = await session(undefined);
    expect(unbounded.committed).toBeGreaterThan(0);
    expect(unbounded.queued).toBeGreaterThan(100);
  });
});
