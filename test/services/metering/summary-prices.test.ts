/**
 * A summary reuses the meter's prices (docs/cost-model.md): the bounding step prices the span several
 * times, but no text of a node is tokenized again with the tokenizer that priced it. Counted on
 * the real tokenizer instance, through the engine, the OpenAI summarizer over real HTTP.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createCompactionEngine } from '../../../src/engine/facade';
import { textsOfMessage } from '../../../src/services/metering';
import { toChatMessage } from '../../../src/session/derive';
import { Session } from '../../../src/session/session';
import { SessionWriter } from '../../../src/session/writer';
import { startOpenAIServer, type LocalOpenAIServer } from '../../../src/testing/openai-server';

// Every tokenizer counts through here: the texts each call was given, in order.
const counted = vi.hoisted(() => [] as string[]);
vi.mock('../../../src/services/metering/tokenizer', async (importOriginal) => {
  const mod = await importOriginal<typeof import('../../../src/services/metering/tokenizer')>();
  const wrapped = new Map<string, ReturnType<typeof mod.getTokenizer>>();
  return {
    ...mod,
    getTokenizer: (name: Parameters<typeof mod.getTokenizer>[0]) => {
      let t = wrapped.get(name);
      if (!t) {
        const real = mod.getTokenizer(name);
        t = Object.create(real) as typeof real;
        Object.defineProperty(t, 'count', { value: (text: string) => (counted.push(text), real.count(text)) });
        wrapped.set(name, t);
      }
      return t;
    },
  };
});

let server: LocalOpenAIServer;
let client: OpenAI;
beforeAll(async () => {
  server = await startOpenAIServer();
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
});
afterAll(async () => server.close());

/** A session whose span is too big for the summarizer's window as-is: bounding cuts or chunks it. */
function world(summaryWindow: number) {
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  const engine = createCompactionEngine({
    session,
    client,
    models: { 'test/main': { contextWindow: 200_000, maxOutputTokens: 2000 }, 'test/tiny': { contextWindow: summaryWindow, maxOutputTokens: 300 } },
    config: { summarizationProvider: 'test', summarizationModel: 'tiny' },
  });
  w.system('You are a coding agent.');
  w.startTurn();
  w.request({ provider: 'test', model: 'main', tools: [] });
  w.user('Please read the files and explain the build.');
  for (let i = 0; i < 12; i++) {
    w.startStep();
    w.request({ provider: 'test', model: 'main', tools: [] });
    w.assistant({ text: `Reading file number ${i} now.`, toolCalls: [{ id: `c${i}`, name: 'read', arguments: `{"path":"src/module${i}.ts"}` }] });
    w.toolResult(`c${i}`, Array.from({ length: 120 }, (_, k) => `export const value${i}_${k} = compute(${k * 7 + i});`).join('\n'));
    w.endStep();
  }
  w.endTurn();
  return { session, engine };
}

describe('summaries reuse the meter prices', () => {
  for (const [mode, window] of [
    ['truncated', 14_500],
    ['chunked', 2_600],
  ] as const) {
    it(`${mode}: every text of every span node is tokenized once (by the meter), none again by the summarizer`, async () => {
      const { session, engine } = world(window);
      counted.length = 0;
      try {
        engine.measure(); // the meter prices the surface (each text once)
        for (let i = 0; i < 12; i++) server.enqueue({ kind: 'reply', content: `## Primary Request and Intent\n- part ${i}` });
        const record = await engine.compactNow();
        expect(record).not.toBeNull();
        // The span did not fit the summarizer's window as it was: bounding cut it, or chunked it.
        expect(record!.spanTokens).toBeGreaterThan(window - 300);
        if (mode === 'chunked') expect(record!.summarizer.requests).toBeGreaterThan(1);
        else expect(record!.summarizer.requests).toBe(1);
        const spanSeqs = session.event(record!.checkpointSeq).sourceEventSeqs!;
        expect(spanSeqs.length).toBeGreaterThan(10);
        const calls = counted;
        for (const seq of spanSeqs) {
          const e = session.event(seq);
          if (e.surfaceOp === undefined) continue;
          for (const text of textsOfMessage(toChatMessage(e as never))) {
            if (text.length < 40) continue; // short names may recur in other nodes
            expect(
              calls.filter((c) => c === text),
              `seq ${seq}: ${text.slice(0, 40)}`,
            ).toHaveLength(1);
          }
        }
      } finally {
        engine.stop();
      }
    });
  }
});
