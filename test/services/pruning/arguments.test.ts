/**
 * docs/spec.md#15-pruning-what-the-agent-wrote: oversized tool-call arguments of older assistant messages are pruned like tool
 * results (head and tail around one marker), valid JSON with the same keys, the same call id
 * and name, logged with the original's price, under the same protections.
 */
import { describe, expect, it } from 'vitest';
import { TokenMeter } from '../../../src/services/metering';
import { applyPrune, planPrune, pruneMarker, type PruneSettings, type Pricing } from '../../../src/services/pruning';
import { getTokenizer } from '../../../src/services/metering';
import { JsonlStore, Session, SessionWriter, type SessionEvent } from '../../../src/session/index';
import { openAIMessageProblems } from '../../helpers/openai-validator';
import { removeTempDirs, tempDir } from '../../helpers/session';
import { afterAll } from 'vitest';

afterAll(removeTempDirs);

const SETTINGS: PruneSettings = { thresholdChars: 8192, headChars: 4096, tailChars: 1024, protectRecentTokens: 0, minReclaimTokens: 0, neverPrune: [] };
const FILE = Array.from({ length: 1500 }, (_, i) => `export const value${i} = ${i}; // line ${i} of a generated module`).join('\n'); // ~57 KB

function pricing(session: Session): { meter: TokenMeter; pricing: Pricing } {
  const meter = new TokenMeter(session, { tokenizerFor: () => getTokenizer('o200k_base') });
  return { meter, pricing: { priceOf: (seq) => meter.priceOf(seq), priceEvent: (e) => meter.priceEvent(e) } };
}

/** An agent that wrote a whole file, then did small steps after it. */
function session(extraSteps = 3, writeArgs = JSON.stringify({ path: 'src/generated.ts', content: FILE, mode: 420, tags: ['gen', 'big'] })) {
  const s = Session.inMemory();
  const w = new SessionWriter(s);
  w.system('You are a coding agent.');
  w.startTurn();
  w.user('Generate the module.');
  w.startStep();
  w.request({ provider: 'openai', model: 'gpt-4o', tools: [] });
  const write = w.assistant({
    text: 'Writing it.',
    toolCalls: [
      { id: 'w1', name: 'write', arguments: writeArgs },
      { id: 'l1', name: 'ls', arguments: '{"path":"src"}' },
    ],
  });
  w.toolResult('w1', 'Wrote 57,000 bytes.');
  w.toolResult('l1', 'generated.ts');
  w.endStep();
  for (let i = 0; i < extraSteps; i++) {
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', tools: [] });
    w.assistant({ toolCalls: [{ id: `r${i}`, name: 'read', arguments: JSON.stringify({ path: `src/f${i}.ts` }) }] });
    w.toolResult(`r${i}`, `export const f${i} = ${i};`);
    w.endStep();
  }
  return { s, write };
}

describe('argument pruning', () => {
  it('cuts the oversized string around one marker: valid JSON, same keys and values, same call ids and names', () => {
    const { s, write } = session();
    const { meter, pricing: p } = pricing(s);
    const priceBefore = meter.priceOf(write.seq);
    const plan = planPrune(s, SETTINGS, p);
    expect(plan.argumentTargets.map((t) => t.seq)).toEqual([write.seq]);
    const result = applyPrune(s, plan);
    expect(result.pruned).toEqual([expect.objectContaining({ kind: 'arguments', seq: write.seq, callId: 'w1', toolName: 'write', tokensBefore: priceBefore })]);

    const replaced = s.event(result.pruned[0]!.replacementSeq) as SessionEvent<'assistant/message'>;
    const calls = replaced.data.content.filter((b) => b.type === 'tool-call');
    expect(calls.map((c) => [c.id, c.name])).toEqual([
      ['w1', 'write'],
      ['l1', 'ls'],
    ]);
    expect(calls[1]!.arguments).toBe('{"path":"src"}');
    const args = JSON.parse(calls[0]!.arguments) as { path: string; content: string; mode: number; tags: string[] };
    expect(Object.keys(args)).toEqual(['path', 'content', 'mode', 'tags']);
    expect(args).toMatchObject({ path: 'src/generated.ts', mode: 420, tags: ['gen', 'big'] });
    const removed = FILE.length - 4096 - 1024;
    expect(args.content).toBe(FILE.slice(0, 4096) + pruneMarker(removed) + FILE.slice(-1024));
    expect(replaced.data.content.find((b) => b.type === 'text')).toEqual({ type: 'text', text: 'Writing it.' });

    // Logged with the original's price, followed by the replace of exactly that message.
    const prune = s.event(result.pruned[0]!.replacementSeq - 1) as SessionEvent<'compaction/prune'>;
    expect(prune.type).toBe('compaction/prune');
    expect(prune.data).toMatchObject({ targetSeq: write.seq, callId: 'w1', tokensBefore: priceBefore, tokensAfter: meter.priceOf(replaced.seq) });
    expect(replaced.sourceEventSeqs).toEqual([write.seq, prune.seq]);
    expect(meter.priceOf(replaced.seq)).toBeLessThan(priceBefore / 5);
    expect(openAIMessageProblems(s.deriveMessages())).toEqual([]);
  });

  it('is idempotent: a second pass finds nothing oversized', () => {
    const { s } = session();
    const { pricing: p } = pricing(s);
    applyPrune(s, planPrune(s, SETTINGS, p));
    const again = planPrune(s, SETTINGS, p);
    expect(again.argumentTargets).toEqual([]);
    expect(again.skipped).toBe('nothing-oversized');
  });

  it('keeps the recent budget, never-prune tools, and passes that free too little', () => {
    const { s, write } = session();
    const { meter, pricing: p } = pricing(s);
    let total = 0;
    for (let i = s.surface.length - 1; i >= 0 && s.surface.seqAt(i) !== write.seq; i--) total += meter.priceAt(i);
    const recent = planPrune(s, { ...SETTINGS, protectRecentTokens: total + meter.priceOf(write.seq) }, p);
    expect(recent.argumentTargets).toEqual([]);
    expect(recent.kept).toContainEqual({ seq: write.seq, callId: 'w1', reason: 'protected-recent' });

    const never = planPrune(s, { ...SETTINGS, neverPrune: ['write'] }, p);
    expect(never.argumentTargets).toEqual([]);
    expect(never.kept).toContainEqual({ seq: write.seq, callId: 'w1', reason: 'never-prune' });

    const small = planPrune(s, { ...SETTINGS, minReclaimTokens: 1_000_000 }, p);
    expect(small.skipped).toBe('below-min-reclaim');
    expect(small.reclaimableTokens).toBeGreaterThan(5_000);
    const before = s.length;
    applyPrune(s, small);
    expect(s.length).toBe(before);
  });

  it('cuts only string values and keeps every other byte: big integers, 1.50, 1e3, __proto__ keys, whitespace', () => {
    // Written by hand: JSON.stringify could not produce these forms, and a parse would lose them.
    const args = `{ "__proto__": {"id": 9007199254740993}, "price": 1.50, "n": 1e3, "neg": -0, "content": ${JSON.stringify(FILE)},\n  "tags": ["gen"] }`;
    const { s, write } = session(3, args);
    const result = applyPrune(s, planPrune(s, SETTINGS, pricing(s).pricing));
    expect(result.pruned.map((p) => p.seq)).toEqual([write.seq]);
    const replaced = s.event(result.pruned[0]!.replacementSeq) as SessionEvent<'assistant/message'>;
    const after = (replaced.data.content.find((b) => b.type === 'tool-call') as { arguments: string }).arguments;
    const cut = FILE.slice(0, 4096) + pruneMarker(FILE.length - 4096 - 1024) + FILE.slice(-1024);
    expect(after).toBe(args.replace(JSON.stringify(FILE), JSON.stringify(cut)));
    // A second pass has nothing left to do (a __proto__ key used to be dropped, the rule refused, every pass threw stale).
    expect(planPrune(s, SETTINGS, pricing(s).pricing).argumentTargets).toEqual([]);
  });

  it('prunes a string however deeply it is nested', () => {
    const depth = 100_000;
    const args = '{"content":' + '['.repeat(depth) + JSON.stringify(FILE) + ', 1.0' + ']'.repeat(depth) + '}';
    const { s, write } = session(3, args);
    const result = applyPrune(s, planPrune(s, SETTINGS, pricing(s).pricing));
    expect(result.pruned.map((p) => p.seq)).toEqual([write.seq]);
    const replaced = s.event(result.pruned[0]!.replacementSeq) as SessionEvent<'assistant/message'>;
    const after = (replaced.data.content.find((b) => b.type === 'tool-call') as { arguments: string }).arguments;
    expect(after.startsWith('{"content":' + '['.repeat(depth) + JSON.stringify(FILE.slice(0, 4096)).slice(0, -1))).toBe(true);
    expect(after.endsWith(', 1.0' + ']'.repeat(depth) + '}')).toBe(true);
  });

  it('leaves arguments that are not JSON, and calls still waiting for their result', () => {
    const notJson = session(1, `{"path": "a.ts", "content": "${'x'.repeat(20_000)}"`); // truncated JSON
    expect(planPrune(notJson.s, SETTINGS, pricing(notJson.s).pricing).argumentTargets).toEqual([]);

    const s = Session.inMemory();
    const w = new SessionWriter(s);
    w.startTurn();
    w.user('go');
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', tools: [] });
    w.assistant({ toolCalls: [{ id: 'w1', name: 'write', arguments: JSON.stringify({ content: FILE }) }] });
    expect(planPrune(s, SETTINGS, pricing(s).pricing).argumentTargets).toEqual([]);
  });

  it('a stale plan writes nothing; a stored session with pruned arguments reopens identically', async () => {
    const { s } = session();
    const { pricing: p } = pricing(s);
    const plan = planPrune(s, SETTINGS, p);
    applyPrune(s, plan);
    const length = s.length;
    expect(() => applyPrune(s, plan)).toThrow(/stale/);
    expect(s.length).toBe(length);

    const dir = tempDir();
    const stored = await Session.open(new JsonlStore(dir), 'args');
    const { s: src } = session();
    for (const e of src.events()) {
      const input = { type: e.type, data: e.data } as Parameters<Session['append']>[0];
      if (e.surfaceOp !== undefined) (input as { surfaceOp?: unknown }).surfaceOp = e.surfaceOp;
      if (e.sourceEventSeqs !== undefined) (input as { sourceEventSeqs?: unknown }).sourceEventSeqs = e.sourceEventSeqs;
      stored.append(input);
    }
    applyPrune(stored, planPrune(stored, SETTINGS, pricing(stored).pricing));
    const messages = stored.deriveMessages();
    await stored.close();
    const reopened = await Session.open(new JsonlStore(dir), 'args');
    expect(reopened.deriveMessages()).toEqual(messages);
    await reopened.close();
  });
});

describe('argument pruning in the engine', () => {
  it('under pressure, the engine prunes an older 57 KB write call instead of summarizing', async () => {
    const { createCompactionEngine } = await import('../../../src/engine/facade');
    const { ExtractiveSummarizer } = await import('../../../src/services/summarizing');
    const s = Session.inMemory();
    const engine = createCompactionEngine({
      session: s,
      summarizer: new ExtractiveSummarizer(),
      models: { 'test/agent': { contextWindow: 24_000, maxOutputTokens: 1000 } },
      config: { headroomTokens: 1000, maxTokens: 500 },
    });
    const events: string[] = [];
    engine.on((e) => events.push(e.type));
    const w = new SessionWriter(s);
    w.system('You are a coding agent.');
    w.startTurn();
    w.user('Generate the module, then check it.');
    const step = async (call: { id: string; name: string; arguments: string }, result: string) => {
      w.startStep();
      w.request({ provider: 'test', model: 'agent', tools: [] });
      w.assistant({ toolCalls: [call] });
      w.toolResult(call.id, result);
      const r = await engine.afterStep();
      w.endStep();
      return r;
    };
    await step({ id: 'w1', name: 'write', arguments: JSON.stringify({ path: 'src/generated.ts', content: FILE }) }, 'Wrote 57,000 bytes.');
    let last;
    for (let i = 0; i < 12; i++)
      last = await step({ id: `r${i}`, name: 'read', arguments: JSON.stringify({ path: `src/f${i}.ts` }) }, `export const f${i} = ${i};\n`.repeat(40));
    engine.stop();
    const prunes = s.events().filter((e): e is SessionEvent<'compaction/prune'> => e.type === 'compaction/prune');
    expect(prunes.map((p) => s.event(p.data.targetSeq).type)).toContain('assistant/message');
    expect(events).toContain('pruned');
    expect(events).not.toContain('compaction.committed'); // pruning the call was enough
    expect(last!.status).not.toBe('failed');
    const write = s.deriveMessages().find((m) => m.role === 'assistant' && m.tool_calls?.some((c) => c.id === 'w1'));
    const args = JSON.parse((write as { tool_calls: Array<{ function: { arguments: string } }> }).tool_calls[0]!.function.arguments) as {
      path: string;
      content: string;
    };
    expect(args.path).toBe('src/generated.ts');
    expect(args.content.length).toBeLessThan(8192);
  });
});
