/**
 * The meter's snapshot beside a JSONL log (docs/sessions-and-stores.md#reopening-a-long-session): a reopen restores the fold instead of
 * tokenizing every node, and gives exactly the figures a fold from the first event gives. A
 * snapshot that is missing, damaged, cut short, stale, for another tokenizer, or for a log that
 * was rewritten since is ignored: the figures are those without one.
 */
import { copyFileSync, existsSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCompactionEngine } from '../../../src/engine/facade';
import { TokenMeter } from '../../../src/services/metering';
import { SPOT_CHECKS } from '../../../src/services/metering';
import { sessionPace } from '../../../src/services/economics';
import { getTokenizer, type Tokenizer, type TokenizerName } from '../../../src/services/metering';
import { JsonlStore, Session, SessionWriter } from '../../../src/session/index';
import { recordingSummarizer, SMALL_CONFIG, SYSTEM_PROMPT } from '../../helpers/engine';
import { removeTempDirs, tempDir } from '../../helpers/session';

afterAll(removeTempDirs);

const MODELS = {
  'test/small': { contextWindow: 6000, maxOutputTokens: 500 },
  // A second route on another tokenizer: the fold reprices the surface when it switches.
  'other/wide': { contextWindow: 9000, maxOutputTokens: 500, tokenizer: 'cl100k_base' as const },
};
const ID = 's';
const tokenizerOf = (model: string | undefined): TokenizerName => (model === 'wide' ? 'cl100k_base' : 'o200k_base');

function toolOutput(i: number): string {
  const code = `export const v${i} = compute(${i * 7}, "${'abcdefgh'.slice(0, 1 + (i % 8))}");\n`.repeat(3 + (i % 5));
  const prose = `Module ${i} built with ${i % 4} warnings about unused imports. `.repeat(1 + (i % 3));
  return `${code}${prose}`;
}

/**
 * Agent steps `from`../../..`to` through a live engine that compacts and prunes: usage on every
 * reply (a suspect one now and then, the last one included), a route switch to another
 * tokenizer and back. Returns the engine's figures after each step.
 */
async function drive(session: Session, from: number, to: number, tokenizer?: TokenizerName): Promise<string[]> {
  const engine = createCompactionEngine({
    session,
    models: MODELS,
    config: SMALL_CONFIG,
    summarizer: recordingSummarizer(),
    ...(tokenizer ? { tokenizer } : {}),
  });
  const w = new SessionWriter(session);
  const out: string[] = [];
  for (let i = from; i < to; i++) {
    if (session.openTurn === null) {
      w.startTurn();
      w.request({ provider: 'test', model: 'small', systemPrompt: SYSTEM_PROMPT, tools: [], maxTokens: 500 });
      w.user(`Task ${i}: fix the build of module ${i}.`);
    }
    w.startStep();
    const wide = i >= 20 && i < 28;
    w.request({ provider: wide ? 'other' : 'test', model: wide ? 'wide' : 'small', systemPrompt: SYSTEM_PROMPT, tools: [], maxTokens: 500 });
    const m = engine.measure();
    const promptTokens = i % 11 === 2 ? 5 : Math.round(m.calibratedTokens * 1.12) + 3;
    w.assistant({
      text: `step ${i}`,
      toolCalls: [{ id: `c${i}`, name: 'bash', arguments: JSON.stringify({ command: `make m${i}` }) }],
      usage: { promptTokens, completionTokens: 12 },
    });
    w.toolResult(`c${i}`, toolOutput(i), { toolName: 'bash' });
    const r = await engine.afterStep();
    const { prices: _p, ...figures } = engine.measure();
    out.push(JSON.stringify({ status: r.status, figures }));
    w.endStep();
    if (i % 6 === 5) w.endTurn();
  }
  engine.stop();
  return out;
}

async function writeSession(dir: string): Promise<void> {
  const session = await Session.open(new JsonlStore(dir, { sync: false }), ID);
  await drive(session, 0, 47);
  await session.close();
}

/** Everything the meter reports after a reopen: the engine's figures, every node's price and text counts. */
async function figuresAfterReopen(dir: string, tokenizer?: TokenizerName): Promise<string> {
  const session = await Session.open(new JsonlStore(dir, { sync: false }), ID);
  const engine = createCompactionEngine({
    session,
    models: MODELS,
    config: SMALL_CONFIG,
    summarizer: recordingSummarizer(),
    ...(tokenizer ? { tokenizer } : {}),
  });
  const { prices, ...figures } = engine.measure();
  const meter = prices as TokenMeter;
  const nodes = [...session.surface.seqs()].map((seq) => [seq, meter.priceOf(seq), meter.textCountsOf(seq)]);
  engine.stop();
  await session.close();
  return JSON.stringify({ figures, nodes });
}

/** Tokenizers that count their calls, as the engine's mapping routes them. */
function countingTokenizers(calls: { n: number }, change?: (t: Tokenizer) => Tokenizer) {
  return (h: { data: { model: string } } | undefined): Tokenizer => {
    const t = getTokenizer(tokenizerOf(h?.data.model));
    const counted: Tokenizer = { ...t, name: t.name, overhead: t.overhead, exact: t.exact, count: (text) => (calls.n++, t.count(text)) };
    return change ? change(counted) : counted;
  };
}

/**
 * Tokenizer calls of a first measurement and the session's pace (economics: a fold of every
 * appended node, shadowed ones included) after reopening `dir`.
 */
async function tokenizerCalls(dir: string): Promise<{ calls: number; total: number; nodes: number; pace: string; sampleBound: number }> {
  const session = await Session.open(new JsonlStore(dir, { sync: false }), ID);
  const calls = { n: 0 };
  const meter = new TokenMeter(session, { tokenizerFor: countingTokenizers(calls) });
  const m = meter.measure();
  const pace = JSON.stringify(sessionPace({ session, meter }));
  // What may be tokenized after a restore: a spread sample of surface and shadowed nodes priced
  // again (up to 4 texts each), the tool list, and each summary (the pace counts them).
  const summaries = session.events().filter((e) => e.type === 'compaction/summary').length;
  const out = { calls: calls.n, total: m.totalTokens, nodes: session.surface.length, pace, sampleBound: 2 * SPOT_CHECKS * 4 + 2 + summaries };
  await session.close();
  return out;
}

describe('meter snapshot (<log>.prices)', () => {
  let dir: string;
  let file: string;
  let sidecar: string;
  let saved: Buffer;
  let cold: string;

  beforeAll(async () => {
    dir = tempDir();
    file = join(dir, `${ID}.jsonl`);
    sidecar = `${file}.prices`;
    await writeSession(dir);
    expect(existsSync(sidecar)).toBe(true);
    saved = readFileSync(sidecar);
    const types = readFileSync(file, 'utf8');
    // The workload really exercises replaces and both tokenizers.
    expect(types).toContain('"compaction/summary"');
    expect(types).toContain('"other"');
    rmSync(sidecar);
    cold = await figuresAfterReopen(dir);
  });

  const withSidecar = (bytes: Buffer | undefined) => {
    if (bytes === undefined) rmSync(sidecar, { force: true });
    else writeFileSync(sidecar, bytes);
  };

  it('a reopen with it gives the figures of a fold from the first event, and prices only a sample again', async () => {
    withSidecar(saved);
    expect(await figuresAfterReopen(dir)).toBe(cold);

    // And so does every step after it, compactions included: the whole fold was restored.
    const goOn = async (bytes: Buffer | undefined) => {
      const copy = tempDir();
      copyFileSync(file, join(copy, `${ID}.jsonl`));
      if (bytes) writeFileSync(join(copy, `${ID}.jsonl.prices`), bytes);
      const session = await Session.open(new JsonlStore(copy, { sync: false }), ID);
      const steps = await drive(session, 47, 75);
      await session.close();
      return steps;
    };
    const restoredSteps = await goOn(saved);
    // A compaction committed in the steps after the reopen (in the foreground or the background).
    expect(restoredSteps.join()).toMatch(/"status":"(compacted|committed|waited)"/);
    expect(restoredSteps).toEqual(await goOn(undefined));

    // The same through a meter whose tokenizers count: the fold is restored, not redone.
    const count = async (sidecarBytes: Buffer | undefined) => {
      withSidecar(sidecarBytes);
      return tokenizerCalls(dir);
    };
    const restored = await count(saved);
    const folded = await count(undefined);
    expect(restored.total).toBe(folded.total);
    expect(restored.pace).toBe(folded.pace);
    expect(folded.calls).toBeGreaterThan(restored.nodes);
    expect(restored.calls).toBeLessThanOrEqual(restored.sampleBound);
    expect(restored.calls).toBeLessThan(folded.calls);
  });

  it('a damaged or cut-short sidecar changes nothing', async () => {
    const flipped = Buffer.from(saved);
    const at = flipped.length >> 1;
    flipped[at] = flipped[at] === 0x31 ? 0x32 : 0x31;
    withSidecar(flipped);
    expect(await figuresAfterReopen(dir)).toBe(cold);
    withSidecar(saved.subarray(0, saved.length >> 1));
    expect(await figuresAfterReopen(dir)).toBe(cold);
    withSidecar(Buffer.from('not a snapshot\n{}'));
    expect(await figuresAfterReopen(dir)).toBe(cold);
  });

  it('another tokenizer ignores it: the figures are that tokenizer fold, not the saved one', async () => {
    withSidecar(undefined);
    const heuristic = await figuresAfterReopen(dir, 'heuristic');
    expect(heuristic).not.toBe(cold);
    withSidecar(saved);
    expect(await figuresAfterReopen(dir, 'heuristic')).toBe(heuristic);
  });

  it('a tokenizer that counts differently under the same name is caught by the prices priced again', async () => {
    const plusOne = (t: Tokenizer): Tokenizer => ({ ...t, count: (text) => t.count(text) + 1 });
    const measure = async (bytes: Buffer | undefined) => {
      withSidecar(bytes);
      const session = await Session.open(new JsonlStore(dir, { sync: false }), ID);
      const m = new TokenMeter(session, { tokenizerFor: countingTokenizers({ n: 0 }, plusOne) }).measure();
      await session.close();
      const { prices: _p, ...rest } = m;
      return JSON.stringify(rest);
    };
    const fresh = await measure(undefined);
    expect(await measure(saved)).toBe(fresh);
  });

  it('a log that grew since is folded on from the snapshot, to the same figures', async () => {
    const copy = tempDir();
    copyFileSync(file, join(copy, `${ID}.jsonl`));
    const grow = async () => {
      // Another process appends without a meter (it leaves the snapshot as it was).
      const session = await Session.open(new JsonlStore(copy, { sync: false }), ID);
      const w = new SessionWriter(session);
      if (session.openTurn === null) w.startTurn();
      w.request({ provider: 'test', model: 'small', systemPrompt: SYSTEM_PROMPT, tools: [], maxTokens: 500 });
      w.user('One more thing.');
      w.assistant({ text: 'Done.', usage: { promptTokens: 2000, completionTokens: 4 } });
      w.endTurn();
      await session.close();
    };
    writeFileSync(join(copy, `${ID}.jsonl.prices`), saved);
    await grow();
    const kept = readFileSync(join(copy, `${ID}.jsonl.prices`));
    expect(kept.equals(saved)).toBe(true);
    const withIt = await figuresAfterReopen(copy);
    // Reopening with it saved a new one covering the grown log: remove it to fold from the start.
    rmSync(join(copy, `${ID}.jsonl.prices`));
    expect(await figuresAfterReopen(copy)).toBe(withIt);
  });

  it('a log rewritten since (same length, other bytes) makes it stale', async () => {
    const copy = tempDir();
    const text = readFileSync(file, 'utf8');
    const at = text.indexOf('Module 3 built');
    expect(at).toBeGreaterThan(0);
    writeFileSync(join(copy, `${ID}.jsonl`), `${text.slice(0, at)}Module 9 built${text.slice(at + 'Module 3 built'.length)}`);
    const rewritten = await figuresAfterReopen(copy);
    writeFileSync(join(copy, `${ID}.jsonl.prices`), saved);
    expect(await figuresAfterReopen(copy)).toBe(rewritten);
  });

  it('is written by the meter that folded first, only when it folded something new', async () => {
    const copy = tempDir();
    copyFileSync(file, join(copy, `${ID}.jsonl`));
    const path = join(copy, `${ID}.jsonl.prices`);
    // Opened and closed without measuring: nothing priced, nothing saved.
    const idle = await Session.open(new JsonlStore(copy, { sync: false }), ID);
    new TokenMeter(idle, { tokenizerFor: countingTokenizers({ n: 0 }) });
    await idle.close();
    expect(existsSync(path)).toBe(false);
    await figuresAfterReopen(copy);
    expect(existsSync(path)).toBe(true);
    // Restored and nothing appended: the sidecar is left as it is (not even rewritten).
    const old = new Date('2020-01-01T00:00:00Z');
    utimesSync(path, old, old);
    await figuresAfterReopen(copy);
    expect(statSync(path).mtime.getTime()).toBe(old.getTime());
  });

  it('a bad snapshotEvery is a typed config error before the store is opened: no lock taken, nothing written', async () => {
    const dir = tempDir();
    for (const bad of [-1, 0.5, Number.NaN, Infinity]) {
      const err = await Session.open(new JsonlStore(dir, { sync: false }), ID, { snapshotEvery: bad }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'config', message: expect.stringMatching(/snapshotEvery/) });
      expect(() => Session.inMemory(ID, { snapshotEvery: bad })).toThrow(/snapshotEvery/);
    }
    // The store was never opened: a writer takes it at once, and the folder holds no log yet.
    expect(existsSync(join(dir, `${ID}.jsonl`))).toBe(false);
    const session = await Session.open(new JsonlStore(dir, { sync: false }), ID);
    await session.close();
  });

  it('a flush saves it every `snapshotEvery` events, so a writer that dies before closing leaves a recent one', async () => {
    const live = tempDir();
    const session = await Session.open(new JsonlStore(live, { sync: false }), ID, { snapshotEvery: 100 });
    await drive(session, 0, 10);
    await session.flush();
    const path = join(live, `${ID}.jsonl.prices`);
    expect(existsSync(path)).toBe(false); // fewer than 100 events so far
    await drive(session, 10, 30);
    await session.flush();
    expect(existsSync(path)).toBe(true);
    // The process dies here: no close. What it left is copied and reopened elsewhere.
    const after = tempDir();
    copyFileSync(join(live, `${ID}.jsonl`), join(after, `${ID}.jsonl`));
    copyFileSync(path, join(after, `${ID}.jsonl.prices`));
    const restored = await tokenizerCalls(after);
    expect(restored.calls).toBeLessThanOrEqual(restored.sampleBound);
    copyFileSync(path, join(after, `${ID}.jsonl.prices`));
    const withIt = await figuresAfterReopen(after);
    rmSync(join(after, `${ID}.jsonl.prices`));
    expect(await figuresAfterReopen(after)).toBe(withIt);
    await session.close();
  });
});
