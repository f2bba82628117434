/**
 * The writer-side snapshot (docs/sessions-and-stores.md#reopening-a-long-session): a log written
 * with Session and SessionWriter alone, no engine, still leaves its prices with the store, so a
 * reopen restores them instead of tokenizing the log; and the first fold of a log whose history
 * comes before its first request header prices each node once, with that header's tokenizer.
 */
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createCompactionEngine } from '../../../src/engine/facade';
import '../../../src/services/core';
import { getTokenizer, TokenMeter, type Tokenizer, type TokenizerName } from '../../../src/services/metering';
import { JsonlStore, Session, SessionWriter, type SessionEvent } from '../../../src/session/index';
import { WRITER_SNAPSHOT_MIN_EVENTS } from '../../../src/session/writer-snapshot';
import { removeTempDirs, tempDir } from '../../helpers/session';

afterAll(removeTempDirs);

const ID = 'w';
const MODELS = { 'test/small': { contextWindow: 1_000_000, maxOutputTokens: 500 } };

/** An agent that records `steps` steps of its own (usage on every reply), no engine attached. */
function record(session: Session, from: number, steps: number): void {
  const w = new SessionWriter(session);
  if (session.length === 0) w.system('You are a coding agent.');
  let prompt = 40 + from * 60;
  for (let i = from; i < from + steps; i++) {
    if (i % 10 === 0) {
      if (session.openTurn !== null) w.endTurn();
      w.startTurn();
      w.user(`Task ${i}: make module ${i} build.`);
    }
    w.startStep();
    w.request({ provider: 'test', model: 'small', tools: [], maxTokens: 500 });
    w.assistant({
      toolCalls: [{ id: `c${i}`, name: 'bash', arguments: JSON.stringify({ command: `make m${i}` }) }],
      usage: { promptTokens: prompt, completionTokens: 9 },
    });
    const out = `export const v${i} = build(${i});\n`.repeat(1 + (i % 4));
    w.toolResult(`c${i}`, out, { toolName: 'bash' });
    prompt += 60;
    w.endStep();
  }
}

/** Steps enough for the writer to price the log (each step is 5 events; a turn adds 3 per 10). */
const STEPS = Math.ceil(WRITER_SNAPSHOT_MIN_EVENTS / 5) + 20;

function counting(calls: { n: number }): (h: SessionEvent<'request/header'> | undefined) => Tokenizer {
  const t = getTokenizer('o200k_base');
  return () => ({ ...t, name: t.name, overhead: t.overhead, exact: t.exact, count: (text: string) => (calls.n++, t.count(text)) });
}

/** The engine's figures after reopening `dir`, and the tokenizer calls of a meter folding the same log. */
async function reopen(dir: string): Promise<{ figures: string; calls: number; nodes: number }> {
  const session = await Session.open(new JsonlStore(dir, { sync: false }), ID);
  const calls = { n: 0 };
  const meter = new TokenMeter(session, { tokenizerFor: counting(calls) });
  const total = meter.measure().totalTokens;
  const engine = createCompactionEngine({ session, models: MODELS });
  const { prices: _p, ...figures } = engine.measure();
  engine.stop();
  const nodes = session.surface.length;
  await session.close();
  return { figures: JSON.stringify({ figures, total }), calls: calls.n, nodes };
}

describe('the writer-side snapshot', () => {
  it('a log written with no engine keeps its prices: a reopen restores them, to the figures of a fold from the first event', async () => {
    const dir = tempDir();
    const session = await Session.open(new JsonlStore(dir, { sync: false }), ID);
    record(session, 0, STEPS);
    await session.close();
    const sidecar = join(dir, `${ID}.jsonl.prices`);
    expect(existsSync(sidecar)).toBe(true);

    const restored = await reopen(dir);
    rmSync(sidecar);
    const cold = await reopen(dir);
    expect(restored.figures).toBe(cold.figures);
    // The cold fold tokenizes every node; the restore only a spread sample of them again.
    expect(cold.calls).toBeGreaterThan(restored.nodes);
    expect(restored.calls).toBeLessThan(cold.calls / 10);
  });

  it('is not written for a short log, nor by a session that only read', async () => {
    const dir = tempDir();
    const sidecar = join(dir, `${ID}.jsonl.prices`);
    const short = await Session.open(new JsonlStore(dir, { sync: false }), ID);
    record(short, 0, 20);
    await short.close();
    expect(existsSync(sidecar)).toBe(false);

    const long = await Session.open(new JsonlStore(dir, { sync: false }), ID);
    record(long, 20, STEPS);
    await long.close();
    expect(existsSync(sidecar)).toBe(true);
    rmSync(sidecar);
    const reader = await Session.open(new JsonlStore(dir, { sync: false }), ID);
    await reader.close();
    expect(existsSync(sidecar)).toBe(false);
  });

  it("an engine attached after the writer's meter took the snapshot starts from that meter's fold", async () => {
    const dir = tempDir();
    const session = await Session.open(new JsonlStore(dir, { sync: false }), ID, { snapshotEvery: 500 });
    record(session, 0, STEPS);
    // The periodic save attached the writer-side meter and priced the log.
    await session.flush();
    expect(existsSync(join(dir, `${ID}.jsonl.prices`))).toBe(true);
    const calls = { n: 0 };
    const meter = new TokenMeter(session, { tokenizerFor: counting(calls) });
    const total = meter.measure().totalTokens;
    expect(calls.n).toBeLessThan(session.surface.length / 10);
    await session.close();
    rmSync(join(dir, `${ID}.jsonl.prices`));
    const cold = await Session.open(new JsonlStore(dir, { sync: false }), ID);
    expect(new TokenMeter(cold, { tokenizerFor: counting({ n: 0 }) }).measure().totalTokens).toBe(total);
    await cold.close();
  });
});

describe('pricing the history before the first request header', () => {
  it('prices each node once, with the tokenizer the header routes to', async () => {
    const session = Session.inMemory('h');
    const w = new SessionWriter(session);
    w.system('sys');
    w.startTurn();
    for (let i = 0; i < 40; i++) {
      w.user(`question ${i}`);
      w.assistant({ text: `answer ${i} `.repeat(5) });
    }
    const calls: Record<string, number> = { o200k_base: 0, cl100k_base: 0 };
    const counted = (name: TokenizerName) => {
      const t = getTokenizer(name);
      return { ...t, name: t.name, overhead: t.overhead, exact: t.exact, count: (text: string) => (calls[name]!++, t.count(text)) };
    };
    const meter = new TokenMeter(session, { tokenizerFor: (h) => counted(h ? 'cl100k_base' : 'o200k_base') });
    w.startStep();
    w.request({ provider: 'test', model: 'wide', tools: [] });
    const total = meter.measure().totalTokens;
    expect(calls.o200k_base).toBe(0);
    expect(calls.cl100k_base).toBe(81);
    // The same figure as a meter that priced the history as it was appended, then again at the header.
    const eager = Session.inMemory('e');
    const we = new SessionWriter(eager);
    const stepwise = new TokenMeter(eager, { tokenizerFor: (h) => getTokenizer(h ? 'cl100k_base' : 'o200k_base') });
    we.system('sys');
    we.startTurn();
    for (let i = 0; i < 40; i++) {
      we.user(`question ${i}`);
      we.assistant({ text: `answer ${i} `.repeat(5) });
      stepwise.measure();
    }
    we.startStep();
    we.request({ provider: 'test', model: 'wide', tools: [] });
    expect(stepwise.measure().totalTokens).toBe(total);
  });
});
