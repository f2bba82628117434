/**
 * TokenMeter (src/services/metering/meter.ts): node prices, exactness against gpt-tokenizer's chat
 * encoder, the docs/spec.md#2-token-measurement heuristic figures, incremental folding, replaces, the provider-usage
 * anchor and tokenizer switches. Every expected figure is computed here independently of the
 * meter (from the derived messages, the tokenizer and the stated overhead).
 */
import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { TokenMeter, IMAGE_TOKENS } from '../../../src/services/metering';
import { parseConfig, tokenizerNameFor } from '../../../src/services/config';
import { getTokenizer, messageOverhead, type Tokenizer, type TokenizerName } from '../../../src/services/metering';
import { Session, SessionWriter, type ChatMessage, type SessionEvent, type SurfaceEvent } from '../../../src/session/index';
import { importPiFile } from '../../../src/transcripts/index';
import { findPiData } from '../../helpers/pi-data';

const nodeRequire = createRequire(import.meta.url);

// ---------------------------------------------------------------------------------------------
// Helpers

type Header = SessionEvent<'request/header'> | undefined;

function meterWith(session: Session, tokenizer: Tokenizer | TokenizerName): TokenMeter {
  const t = typeof tokenizer === 'string' ? getTokenizer(tokenizer) : tokenizer;
  return new TokenMeter(session, { tokenizerFor: () => t });
}

/** A tokenizer that delegates to `inner` and counts its calls (and the texts it was asked). */
function counting(inner: Tokenizer, count?: (text: string) => number) {
  const calls: string[] = [];
  const tokenizer: Tokenizer = {
    name: inner.name,
    exact: inner.exact,
    overhead: inner.overhead,
    count: (text: string) => {
      calls.push(text);
      return count ? count(text) : inner.count(text);
    },
  };
  return { tokenizer, calls };
}

const READ_TOOL = {
  type: 'function',
  function: { name: 'read', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } },
};
const BASH_TOOL = {
  type: 'function',
  function: { name: 'bash', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' } } } },
};

/** A small agent conversation with every kind of surface node. */
function agentSession(): { session: Session; w: SessionWriter } {
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  w.startTurn();
  w.startStep();
  w.request({ provider: 'openai', model: 'gpt-4o', systemPrompt: 'You are a coding agent. Be terse.', tools: [READ_TOOL] });
  w.user('Rename foo to bar in src/a.ts, 请保持格式。');
  w.assistant({ text: 'Reading the file first.', toolCalls: [{ id: 'c1', name: 'read', arguments: '{"path":"src/a.ts"}' }] });
  w.toolResult('c1', 'export const foo = 1;\nexport function useFoo() {\n  return foo + 1;\n}\n', { toolName: 'read' });
  w.endStep();
  w.startStep();
  w.request({ provider: 'openai', model: 'gpt-4o', tools: [READ_TOOL] });
  w.assistant({
    reasoning: 'Two calls in parallel.',
    toolCalls: [
      { id: 'c2', name: 'read', arguments: '{"path":"src/b.ts"}' },
      { id: 'c3', name: 'read', arguments: '{"path":"README.md"}' },
    ],
  });
  w.toolResult('c3', '# README\n\nSome prose about the project.', { toolName: 'read' });
  w.toolResult(
    'c2',
    [
      { type: 'text', text: 'import { foo } from "./a";' },
      { type: 'image', url: 'data:image/png;base64,AAAA' },
    ],
    { toolName: 'read' },
  );
  w.endStep();
  w.startStep();
  w.request({ provider: 'openai', model: 'gpt-4o', tools: [READ_TOOL] });
  w.assistant({ text: 'Done: 1 file changed.\n\n```ts\nconst bar = 1;\n```' });
  w.endStep();
  w.endTurn();
  w.startTurn();
  w.user([
    { type: 'text', text: 'And this screenshot?' },
    { type: 'image', url: 'https://example.com/a.png', detail: 'low' },
    { type: 'image', url: 'https://example.com/b.png', detail: 'high' },
  ]);
  return { session, w };
}

/** Independent price of one derived message: its texts counted plus the stated overhead. */
function expectedPrice(t: Tokenizer, m: ChatMessage, blocks = 0): number {
  let tokens = 0;
  let calls = 0;
  if (typeof m.content === 'string') tokens += t.count(m.content);
  else if (Array.isArray(m.content)) {
    for (const part of m.content) {
      if (part.type === 'text') tokens += t.count(part.text);
      else if (part.type === 'image_url') tokens += part.image_url.detail === 'low' ? IMAGE_TOKENS.low : IMAGE_TOKENS.high;
    }
  }
  if (m.role === 'assistant') {
    for (const c of m.tool_calls ?? []) {
      if (c.type !== 'function') continue;
      calls++;
      tokens += t.count(c.function.name) + t.count(c.function.arguments);
    }
  }
  return tokens + messageOverhead(t.overhead, { role: m.role as 'system' | 'user' | 'assistant' | 'tool', toolCalls: calls, blocks });
}

function surfaceEvents(session: Session): SurfaceEvent[] {
  return session.surface.slice(0).map((seq) => session.event(seq) as SurfaceEvent);
}

type O200k = { encodeChat(chat: { role: string; content: string }[], model: string, options?: object): number[] };
const encodeChatLength = (chat: { role: string; content: string }[]): number =>
  (nodeRequire('gpt-tokenizer/encoding/o200k_base') as O200k).encodeChat(chat, 'gpt-4o', { disallowedSpecial: new Set() }).length;

// ---------------------------------------------------------------------------------------------

describe('node prices', () => {
  it('price = tokenizer count of the derived message + stated overhead, for every node kind (o200k_base)', () => {
    const { session } = agentSession();
    const t = getTokenizer('o200k_base');
    const m = meterWith(session, t).measure();
    expect(m.prices.length).toBe(session.surface.length);
    let sum = 0;
    for (let p = 0; p < session.surface.length; p++) {
      const expected = expectedPrice(t, session.messageAt(p));
      expect([p, m.prices.priceAt(p)]).toEqual([p, expected]);
      expect(m.prices.priceOf(session.surface.seqAt(p))).toBe(expected);
      sum += expected;
    }
    expect(m.surfaceTokens).toBe(sum);
    // The envelope: per-request priming + the tool list as JSON.
    expect(m.envelopeTokens).toBe(t.overhead.perRequest + t.count(JSON.stringify([READ_TOOL])));
    expect(m.estimatedTokens).toBe(m.envelopeTokens + sum);
    expect(m.totalTokens).toBe(m.estimatedTokens); // no usage recorded: no anchor
    expect(m.anchor).toBeUndefined();
    expect(m.tokenizer).toBe('o200k_base');
    expect(m.logLength).toBe(session.length);
  });

  it('reasoning is not priced (it is never sent back); images are priced at the stated image cost', () => {
    const { session } = agentSession();
    const t = getTokenizer('o200k_base');
    const meter = meterWith(session, t);
    const withReasoning = surfaceEvents(session).find((e) => e.type === 'assistant/message' && e.data.content.some((b) => b.type === 'reasoning'))!;
    const price = meter.priceOf(withReasoning.seq);
    expect(price).toBe(t.count('read') * 2 + t.count('{"path":"src/b.ts"}') + t.count('{"path":"README.md"}') + 4 + 2 * 3);
    const last = session.surface.length - 1;
    expect(meter.priceAt(last)).toBe(t.count('And this screenshot?') + IMAGE_TOKENS.low + IMAGE_TOKENS.high + 4);
  });

  it('is exact for an o200k chat without tools: envelope + Σ node prices = encodeChat length', () => {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    const meter = meterWith(session, 'o200k_base');
    w.startTurn();
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', systemPrompt: 'You are a helpful assistant.\nAnswer in one line.', tools: [] });
    const texts = [
      'Rename foo to bar in src/a.ts, 请保持格式。',
      'Sure — here:\n\n```ts\nexport const bar = 1;\n```',
      'What does <|endoftext|> mean in a prompt? And <|im_start|>?',
      '{"ok":true,"changed":["src/a.ts"],"n":3}',
      '',
      '日本語のテキストと emoji 🎉🎉 mixed.',
    ];
    texts.forEach((text, i) => {
      if (i % 2 === 0) w.user(text);
      else w.assistant({ text });
      const chat = session.deriveMessages().map((m) => ({ role: m.role, content: m.content as string }));
      const measured = meter.measure();
      expect([i, measured.estimatedTokens]).toEqual([i, encodeChatLength(chat)]);
    });
  });

  it('stays exact for arbitrary texts (property)', () => {
    const message = fc.record({ role: fc.constantFrom('user', 'assistant' as const), text: fc.string({ unit: 'grapheme', maxLength: 60 }) });
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), fc.array(message, { maxLength: 6 }), (systemPrompt, chat) => {
        const session = Session.inMemory();
        const w = new SessionWriter(session);
        w.startTurn();
        w.startStep();
        w.request({ provider: 'openai', model: 'gpt-4o', systemPrompt, tools: [] });
        for (const m of chat) {
          if (m.role === 'user') w.user(m.text);
          else w.assistant({ text: m.text });
        }
        const expected = encodeChatLength(session.deriveMessages().map((m) => ({ role: m.role, content: m.content as string })));
        return meterWith(session, 'o200k_base').measure().estimatedTokens === expected;
      }),
      { numRuns: 60 },
    );
  });

  it('heuristic mode reproduces docs/spec.md#2-token-measurement reference figures', () => {
    // docs/spec.md#2-token-measurement: text block ceil(len/4)+4; tool call ceil(name/4)+ceil(args/4)+4; tool result
    // content+4; message content+4; system ceil(len/4)+4; tools ceil(JSON(tools)/4)+4.
    // A tool result is its own node (an OpenAI `tool` message), so its `+4` is its framing and
    // its content is its blocks: one text block = ceil(len/4)+4.
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    const meter = meterWith(session, 'heuristic');
    const system = 'You are terse.'; // 14 chars
    const tools = [READ_TOOL, BASH_TOOL];
    w.startTurn();
    w.startStep();
    w.request({ provider: 'p', model: 'm', systemPrompt: system, tools });
    const u = w.user('x'.repeat(10));
    const call = w.assistant({ toolCalls: [{ id: 'c1', name: 'read', arguments: '{"path":"a.ts"}' }] }); // 4 and 15 chars
    const res = w.toolResult('c1', 'y'.repeat(9));
    w.endStep();
    w.startStep();
    const both = w.assistant({ text: 'z'.repeat(7), toolCalls: [{ id: 'c2', name: 'bash', arguments: '{"command":"ls"}' }] }); // 7, 4, 16
    w.toolResult('c2', 'ok');

    const m = meter.measure();
    expect(meter.priceOf(session.surface.seqAt(0))).toBe(Math.ceil(14 / 4) + 4); // system: 8
    expect(meter.priceOf(u.seq)).toBe(Math.ceil(10 / 4) + 4 + 4); // text message: 11
    expect(meter.priceOf(call.seq)).toBe(Math.ceil(4 / 4) + Math.ceil(15 / 4) + 4 + 4); // tool call: 13
    expect(meter.priceOf(res.seq)).toBe(Math.ceil(9 / 4) + 4 + 4); // tool result: 11
    expect(meter.priceOf(both.seq)).toBe(Math.ceil(7 / 4) + 4 + (Math.ceil(4 / 4) + Math.ceil(16 / 4) + 4) + 4); // 19
    expect(m.envelopeTokens).toBe(Math.ceil(JSON.stringify(tools).length / 4) + 4);
  });
});

// ---------------------------------------------------------------------------------------------

describe('incremental measurement', () => {
  function longSession(nodes: number): { session: Session; w: SessionWriter } {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    w.startTurn();
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', systemPrompt: 'sys', tools: [READ_TOOL] });
    for (let i = 0; session.surface.length < nodes; i++) {
      w.user(`question ${i}`);
      w.assistant({ toolCalls: [{ id: `c${i}`, name: 'read', arguments: `{"path":"f${i}.ts"}` }] });
      w.toolResult(`c${i}`, `content of f${i}.ts`);
    }
    w.endStep();
    return { session, w };
  }

  it('measure() after appends reads only the new events (session.event spy)', () => {
    const { session, w } = longSession(300);
    const meter = meterWith(session, 'o200k_base');
    meter.measure();
    const spy = vi.spyOn(session, 'event');
    try {
      meter.measure();
      expect(spy).not.toHaveBeenCalled(); // nothing new: nothing read

      const before = session.length;
      w.startStep();
      w.request({ provider: 'openai', model: 'gpt-4o', tools: [READ_TOOL] });
      w.user('one more');
      w.endStep();
      spy.mockClear(); // the appends above may consult the log themselves; count the meter only
      meter.measure();
      expect(spy.mock.calls.map(([seq]) => seq)).toEqual([before, before + 1, before + 2, before + 3]);
    } finally {
      spy.mockRestore();
    }
  });

  it('prices each new node once; log-only events cost no pricing (counting tokenizer)', () => {
    const { tokenizer, calls } = counting(getTokenizer('o200k_base'));
    const { session, w } = longSession(300);
    const meter = meterWith(session, tokenizer);
    const first = meter.measure();
    // Every node priced once from scratch: at most a handful of texts per node.
    expect(calls.length).toBeLessThanOrEqual(3 * session.surface.length + 1);

    calls.length = 0;
    w.startStep();
    w.endStep();
    w.endTurn();
    w.startTurn();
    const logOnly = meter.measure();
    expect(calls).toEqual([]);
    expect(logOnly.totalTokens).toBe(first.totalTokens);
    expect(logOnly.logLength).toBe(session.length);

    w.user('one more question');
    const after = meter.measure();
    expect(calls).toEqual(['one more question']);
    expect(after.surfaceTokens - first.surfaceTokens).toBe(tokenizer.count('one more question') + 4);

    calls.length = 0;
    meter.measure();
    meter.measure();
    expect(calls).toEqual([]);
  });

  it('an unchanged tool list is not recounted on every request header', () => {
    const { tokenizer, calls } = counting(getTokenizer('o200k_base'));
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    const meter = meterWith(session, tokenizer);
    const toolsJson = JSON.stringify([READ_TOOL]);
    w.startTurn();
    for (let i = 0; i < 5; i++) {
      w.startStep();
      w.request({ provider: 'openai', model: 'gpt-4o', tools: [READ_TOOL] });
      w.assistant({ text: `step ${i}` });
      w.endStep();
      meter.measure();
    }
    expect(calls.filter((c) => c === toolsJson)).toHaveLength(1);
    expect(meter.measure().envelopeTokens).toBe(3 + getTokenizer('o200k_base').count(toolsJson));
  });

  it('prices are read in place: measure() copies nothing and prices is a live view', () => {
    const { session, w } = longSession(3_000);
    const meter = meterWith(session, 'o200k_base');
    meter.measure();
    const surface = session.surface;
    const spies = [
      vi.spyOn(surface, 'slice'),
      vi.spyOn(surface, 'seqs'),
      vi.spyOn(surface, 'balancedCuts'),
      vi.spyOn(session, 'deriveMessages'),
      vi.spyOn(session, 'events'),
      vi.spyOn(session, 'messageAt'),
    ];
    try {
      w.user('new');
      const m = meter.measure();
      const seqAt = vi.spyOn(surface, 'seqAt');
      const mid = Math.floor(surface.length / 2);
      const price = m.prices.priceAt(mid);
      expect(seqAt).toHaveBeenCalledTimes(1); // one index lookup, no walk
      expect(price).toBe(m.prices.priceOf(surface.seqAt(mid)));
      for (const s of spies) expect(s).not.toHaveBeenCalled();
      seqAt.mockRestore();

      // A view, not a snapshot: it follows the session.
      const length = m.prices.length;
      w.assistant({ text: 'reply' });
      expect(m.prices.length).toBe(length + 1);
      expect(m.prices.priceAt(length)).toBe(getTokenizer('o200k_base').count('reply') + 4);
    } finally {
      for (const s of spies) s.mockRestore();
    }
  });

  it('priceAt/priceOf refuse what is not a current surface node', () => {
    const { session } = longSession(10);
    const meter = meterWith(session, 'o200k_base');
    const turnStart = session.events().find((e) => e.type === 'turn/start')!;
    expect(() => meter.priceOf(turnStart.seq)).toThrow(RangeError);
    expect(() => meter.priceAt(session.surface.length)).toThrow(RangeError);
  });

  it('priceEvent prices a node that is not yet appended exactly as it will be priced once appended', () => {
    const { session, w } = longSession(10);
    const meter = meterWith(session, 'o200k_base');
    meter.measure();
    const data = { content: [{ type: 'text' as const, text: 'Summary:\n- foo renamed to bar\n- 3 files' }] };
    const predicted = meter.priceEvent({ type: 'user/message', data });
    expect(meter.priceUserText('Summary:\n- foo renamed to bar\n- 3 files')).toBe(predicted);
    const before = meter.measure().surfaceTokens;
    const appended = session.append({ type: 'user/message', data, surfaceOp: 'append' });
    expect(meter.priceOf(appended.seq)).toBe(predicted);
    expect(meter.measure().surfaceTokens - before).toBe(predicted);

    // A pruned tool result, priced before the replace that installs it.
    w.startStep();
    w.assistant({ toolCalls: [{ id: 'big', name: 'read', arguments: '{}' }] });
    const result = w.toolResult('big', 'x'.repeat(5_000), { toolName: 'read' });
    const prunedData = { callId: 'big', toolName: 'read', content: [{ type: 'text' as const, text: 'x'.repeat(100) + '\n[… pruned …]' }] };
    const prunedPrice = meter.priceEvent({ type: 'tool/result', data: prunedData });
    const replaced = session.append({
      type: 'tool/result',
      data: prunedData,
      surfaceOp: { op: 'replace', start: result.seq, end: result.seq },
      sourceEventSeqs: [result.seq],
    });
    expect(meter.priceOf(replaced.seq)).toBe(prunedPrice);
  });

  it('priceEvent uses the tokenizer of a request header appended since the last measurement', () => {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    const byModel = (h: Header) => getTokenizer(h?.data.model === 'cheap' ? 'heuristic' : 'o200k_base');
    const meter = new TokenMeter(session, { tokenizerFor: byModel });
    w.startTurn();
    w.startStep();
    w.request({ provider: 'p', model: 'exact', tools: [] });
    w.user('hello there, general');
    meter.measure();
    w.endStep();
    w.startStep();
    w.request({ provider: 'p', model: 'cheap', tools: [] }); // not measured yet
    const text = 'a checkpoint summary of some length';
    expect(meter.priceUserText(text)).toBe(Math.ceil(text.length / 4) + 4 + 4);
    expect(meter.countText(text)).toBe(Math.ceil(text.length / 4));
    expect(meter.currentTokenizer.name).toBe('heuristic');
  });
});

// ---------------------------------------------------------------------------------------------

describe('replaces', () => {
  it('a compaction carries the anchor by what the provider counted for the span, not by our price × a ratio learned on other text', () => {
    // A provider that counts the pasted prose at 2× our price and everything else at 1×: the
    // calibration (a median over the code steps) learns 1×, which is wrong for the span.
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    const meter = meterWith(session, 'o200k_base');
    const factor = new Map<number, number>();
    const providerCount = (seqs: Iterable<number>) => {
      let n = meter.measure().envelopeTokens;
      for (const s of seqs) n += meter.priceOf(s) * (factor.get(s) ?? 1);
      return Math.round(n);
    };
    w.startTurn();
    w.startStep();
    w.request({ provider: 'p', model: 'm', systemPrompt: 'You read design notes and code.', tools: [READ_TOOL] });
    const prose = w.user('The retry policy decides when a failed request is sent again, and how long the client waits. '.repeat(60));
    factor.set(prose.seq, 2);
    for (let i = 0; i < 8; i++) {
      const prompt = providerCount(session.surface.seqs());
      w.assistant({ toolCalls: [{ id: `c${i}`, name: 'read', arguments: `{"path":"src/m${i}.ts"}` }], usage: { promptTokens: prompt, completionTokens: 0 } });
      w.toolResult(
        `c${i}`,
        Array.from({ length: 30 }, (_, j) => `export const limit${i}_${j} = { attempt: ${j}, delayMs: ${(i * 31 + j * 17) % 997} };`).join('\n'),
        { toolName: 'read' },
      );
      w.endStep();
      w.startStep();
      w.request({ provider: 'p', model: 'm', tools: [READ_TOOL] });
    }
    expect(meter.measure().calibration.ratio).toBeCloseTo(1, 1);
    // Compact the prose and the first five steps; the last three stay.
    const surface = [...session.surface.seqs()];
    const span = surface.slice(1, surface.length - 6);
    session.append({
      type: 'user/message',
      data: { content: [{ type: 'text', text: 'Notes on retries; modules m0–m4 define delay limits.' }] },
      surfaceOp: { op: 'replace', start: span[0]!, end: span[span.length - 1]! },
      sourceEventSeqs: span,
    });
    const truth = providerCount(session.surface.seqs());
    const m = meter.measure();
    expect(m.suspectUsage).toBe(false);
    expect(Math.abs(m.totalTokens - truth) / truth, `measured ${m.totalTokens}, the provider counts ${truth}`).toBeLessThanOrEqual(0.03);
  });

  function withResults() {
    const { session, w } = agentSession();
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', tools: [READ_TOOL] });
    w.assistant({ toolCalls: [{ id: 'c9', name: 'read', arguments: '{"path":"big.ts"}' }] });
    const big = w.toolResult('c9', 'const a = 1;\n'.repeat(400), { toolName: 'read' });
    w.endStep();
    w.endTurn();
    w.startTurn();
    w.user('next');
    return { session, w, big };
  }

  it('a content-only replace (prune) adjusts the total by the signed delta, equal to re-pricing from scratch', () => {
    const { session, big } = withResults();
    const meter = meterWith(session, 'o200k_base');
    const before = meter.measure();
    const oldPrice = meter.priceOf(big.seq);
    const data = { callId: 'c9', toolName: 'read', content: [{ type: 'text' as const, text: 'const a = 1;\n[… 399 lines pruned …]' }] };
    const pruned = session.append({ type: 'tool/result', data, surfaceOp: { op: 'replace', start: big.seq, end: big.seq }, sourceEventSeqs: [big.seq] });
    const after = meter.measure();
    const newPrice = meter.priceOf(pruned.seq);
    expect(after.surfaceTokens - before.surfaceTokens).toBe(newPrice - oldPrice);
    expect(newPrice - oldPrice).toBeLessThan(0);
    expect(() => meter.priceOf(big.seq)).toThrow(RangeError);
    const fresh = meterWith(session, 'o200k_base').measure();
    expect(after.surfaceTokens).toBe(fresh.surfaceTokens);
    expect(after.totalTokens).toBe(fresh.totalTokens);
  });

  it('a checkpoint replacing a span subtracts every shadowed node and adds the checkpoint', () => {
    const { session } = withResults();
    const meter = meterWith(session, 'o200k_base');
    const before = meter.measure();
    const cuts = session.balancedCuts();
    // Span from node 1 to the node before the last balanced cut but one.
    const endPos = cuts[cuts.length - 2]! - 1;
    const spanSeqs = session.surface.slice(1, endPos + 1);
    const shadowedSum = spanSeqs.reduce((s, seq) => s + meter.priceOf(seq), 0);
    const checkpoint = session.append({
      type: 'user/message',
      data: { content: [{ type: 'text', text: '<summary>renamed foo to bar</summary>' }] },
      surfaceOp: { op: 'replace', start: spanSeqs[0]!, end: spanSeqs[spanSeqs.length - 1]! },
      sourceEventSeqs: spanSeqs,
    });
    const after = meter.measure();
    expect(spanSeqs.length).toBeGreaterThan(3);
    expect(after.surfaceTokens - before.surfaceTokens).toBe(meter.priceOf(checkpoint.seq) - shadowedSum);
    for (const s of spanSeqs) expect(() => meter.priceOf(s)).toThrow(RangeError);
    expect(after.prices.length).toBe(session.surface.length);
    const fresh = meterWith(session, 'o200k_base').measure();
    expect(after.surfaceTokens).toBe(fresh.surfaceTokens);
    for (let p = 0; p < session.surface.length; p++) expect(after.prices.priceAt(p)).toBe(fresh.prices.priceAt(p));
  });
});

// ---------------------------------------------------------------------------------------------

describe('provider-usage anchor', () => {
  function anchored(usage = { promptTokens: 5_000, completionTokens: 300, reasoningTokens: 120 }) {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    const meter = meterWith(session, 'o200k_base');
    w.startTurn();
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', systemPrompt: 'sys', tools: [READ_TOOL] });
    w.user('read a.ts');
    const reply = w.assistant({ text: 'ok', toolCalls: [{ id: 'c1', name: 'read', arguments: '{"path":"a.ts"}' }], usage });
    return { session, w, meter, reply };
  }

  it('total = prompt + completion − reasoning right after the response, plus priced growth since', () => {
    const { w, meter, reply } = anchored();
    const atAnchor = meter.measure();
    expect(atAnchor.anchor).toEqual({ seq: reply.seq, providerTokens: 5_000 + 300 - 120, growthTokens: 0 });
    expect(atAnchor.totalTokens).toBe(5_180);
    expect(atAnchor.estimatedTokens).toBeLessThan(100); // our own estimate is reported alongside

    const result = w.toolResult('c1', 'export const foo = 1;\n'.repeat(20));
    w.endStep();
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', tools: [READ_TOOL] }); // same tools: anchor kept
    const m = meter.measure();
    const growth = meter.priceOf(result.seq);
    expect(m.anchor).toEqual({ seq: reply.seq, providerTokens: 5_180, growthTokens: growth });
    expect(m.totalTokens).toBe(5_180 + growth);
    expect(m.estimatedTokens - atAnchor.estimatedTokens).toBe(growth);
  });

  it('reasoning tokens never count for more than the completion they are part of', () => {
    const { meter } = anchored({ promptTokens: 100, completionTokens: 10, reasoningTokens: 50 });
    expect(meter.measure().totalTokens).toBe(100);
  });

  it('a response recorded with all-zero usage (an aborted reply) keeps the previous anchor', () => {
    const { w, meter, reply } = anchored();
    const result = w.toolResult('c1', 'content');
    w.endStep();
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', tools: [READ_TOOL] });
    const aborted = w.assistant({ usage: { promptTokens: 0, completionTokens: 0 }, finishReason: 'aborted' });
    const m = meter.measure();
    const growth = meter.priceOf(result.seq) + meter.priceOf(aborted.seq);
    expect(m.anchor).toEqual({ seq: reply.seq, providerTokens: 5_180, growthTokens: growth });
    expect(m.totalTokens).toBe(5_180 + growth);
  });

  it('a later response with usage moves the anchor', () => {
    const { w, meter } = anchored();
    w.toolResult('c1', 'content');
    w.endStep();
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', tools: [READ_TOOL] });
    const second = w.assistant({ text: 'Done.', usage: { promptTokens: 5_400, completionTokens: 7 } });
    expect(meter.measure().anchor).toEqual({ seq: second.seq, providerTokens: 5_407, growthTokens: 0 });
  });

  it('a changed tool list drops the anchor', () => {
    const { w, meter } = anchored();
    w.toolResult('c1', 'content');
    w.endStep();
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', tools: [READ_TOOL, BASH_TOOL] });
    const m = meter.measure();
    expect(m.anchor).toBeUndefined();
    expect(m.totalTokens).toBe(m.estimatedTokens);
    expect(m.envelopeTokens).toBe(3 + getTokenizer('o200k_base').count(JSON.stringify([READ_TOOL, BASH_TOOL])));
  });

  it('a changed system prompt drops the anchor (it is a replace of node 0)', () => {
    const { w, meter } = anchored();
    w.toolResult('c1', 'content');
    w.endStep();
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', systemPrompt: 'a new system prompt', tools: [READ_TOOL] });
    const m = meter.measure();
    expect(m.anchor).toBeUndefined();
    expect(m.totalTokens).toBe(m.estimatedTokens);
  });

  it('a replace keeps the anchor and moves the total by its signed delta; a new system prompt drops it', () => {
    const { session, w, meter } = anchored();
    const result = w.toolResult('c1', 'x'.repeat(3_000), { toolName: 'read' });
    const before = meter.measure();
    expect(before.anchor).toBeDefined();
    const oldPrice = meter.priceOf(result.seq);
    const pruned = session.append({
      type: 'tool/result',
      data: { callId: 'c1', toolName: 'read', content: [{ type: 'text', text: 'x…' }] },
      surfaceOp: { op: 'replace', start: result.seq, end: result.seq },
      sourceEventSeqs: [result.seq],
    });
    const after = meter.measure();
    expect(after.anchor?.seq).toBe(before.anchor!.seq);
    expect(after.totalTokens).toBe(before.totalTokens - oldPrice + meter.priceOf(pruned.seq));
    expect(after.totalTokens).not.toBe(after.estimatedTokens);

    w.system('a different system prompt');
    const changed = meter.measure();
    expect(changed.anchor).toBeUndefined();
    expect(changed.totalTokens).toBe(changed.estimatedTokens);
  });

  it('never reports a total below zero', () => {
    // A replace can make the growth since an anchor negative (that is its purpose), but never
    // below −(what the provider counted): the clamp guards a tokenizer that breaks its
    // contract; we construct exactly that: a count of −1000 for one text after an anchor of 10.
    const base = getTokenizer('o200k_base');
    const { tokenizer } = counting(base, (text) => (text === 'NEGATIVE' ? -1_000 : base.count(text)));
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    const meter = meterWith(session, tokenizer);
    w.startTurn();
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', tools: [] });
    w.user('hi');
    w.assistant({ text: 'hello', usage: { promptTokens: 8, completionTokens: 2 } });
    w.endStep();
    w.endTurn();
    w.startTurn();
    w.user('NEGATIVE');
    const m = meter.measure();
    expect(m.anchor?.growthTokens).toBe(-1_000 + 4);
    expect(m.anchor!.providerTokens + m.anchor!.growthTokens).toBeLessThan(0);
    expect(m.totalTokens).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------

describe('tokenizer switches', () => {
  const config = parseConfig({});
  const tokenizerFor = (h: Header) => getTokenizer(h ? tokenizerNameFor(config, h.data.provider, h.data.model) : 'o200k_base');

  it('switching to a model with another tokenizer re-prices every node and the envelope, and drops the anchor', () => {
    const { session, w } = agentSession();
    const meter = new TokenMeter(session, { tokenizerFor });
    w.endTurn();
    w.startTurn();
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4o', tools: [READ_TOOL] });
    w.assistant({ text: 'noted', usage: { promptTokens: 900, completionTokens: 3 } });
    w.endStep();
    const o200k = meter.measure();
    expect(o200k.tokenizer).toBe('o200k_base');
    expect(o200k.anchor).toBeDefined();

    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-4-turbo', tools: [READ_TOOL] });
    const cl100k = meter.measure();
    expect(cl100k.tokenizer).toBe('cl100k_base');
    expect(cl100k.anchor).toBeUndefined();
    const t = getTokenizer('cl100k_base');
    for (let p = 0; p < session.surface.length; p++) expect(cl100k.prices.priceAt(p)).toBe(expectedPrice(t, session.messageAt(p)));
    expect(cl100k.envelopeTokens).toBe(t.overhead.perRequest + t.count(JSON.stringify([READ_TOOL])));
    expect(cl100k.surfaceTokens).not.toBe(o200k.surfaceTokens); // the CJK text prices differently
    expect(cl100k.estimatedTokens).toBe(meterWith(session, 'cl100k_base').measure().estimatedTokens);
  });

  it('re-prices correctly when a checkpoint (high seq, early position) is already on the surface', () => {
    // The header is folded after a later checkpoint was appended: the current surface then
    // holds a seq newer than the header at position 1, and every node after it must still
    // be re-priced.
    const { session, w } = agentSession();
    const meter = new TokenMeter(session, { tokenizerFor });
    meter.measure();
    w.endTurn();
    w.startTurn();
    w.startStep();
    w.request({ provider: 'openai', model: 'gpt-3.5-turbo', tools: [READ_TOOL] });
    w.assistant({ text: 'switched' });
    w.endStep();
    const cuts = session.balancedCuts();
    const span = session.surface.slice(1, cuts[2]);
    session.append({
      type: 'user/message',
      data: { content: [{ type: 'text', text: 'summary of the start' }] },
      surfaceOp: { op: 'replace', start: span[0]!, end: span[span.length - 1]! },
      sourceEventSeqs: span,
    });
    const m = meter.measure();
    const fresh = meterWith(session, 'cl100k_base').measure();
    expect(m.tokenizer).toBe('cl100k_base');
    expect(m.surfaceTokens).toBe(fresh.surfaceTokens);
    for (let p = 0; p < session.surface.length; p++) expect([p, m.prices.priceAt(p)]).toEqual([p, fresh.prices.priceAt(p)]);
  });

  it('a header whose tokenizer fails to load is retried, not skipped', () => {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    let broken = true;
    const meter = new TokenMeter(session, {
      tokenizerFor: (h) => {
        if (h?.data.model === 'needs-package' && broken) throw new Error('package not installed');
        return getTokenizer(h?.data.model === 'needs-package' ? 'heuristic' : 'o200k_base');
      },
    });
    w.startTurn();
    w.startStep();
    w.request({ provider: 'p', model: 'needs-package', systemPrompt: 'sys', tools: [READ_TOOL] });
    expect(() => meter.measure()).toThrow('package not installed');
    broken = false;
    const m = meter.measure();
    expect(m.tokenizer).toBe('heuristic');
    expect(m.envelopeTokens).toBe(Math.ceil(JSON.stringify([READ_TOOL]).length / 4) + 4);
  });
});

// ---------------------------------------------------------------------------------------------

const pi = findPiData();

describe('the real pi transcript', () => {
  it('measured after every append equals a from-scratch measurement, and tracks the provider anchor', async () => {
    const session = Session.inMemory();
    const meter = meterWith(session, 'o200k_base');
    let measurements = 0;
    let lastUsage: { seq: number; tokens: number } | undefined;
    let zeroUsage = 0;
    session.subscribe((e) => {
      const m = meter.measure();
      measurements++;
      expect(m.logLength).toBe(e.seq + 1);
      expect(m.totalTokens).toBeGreaterThanOrEqual(0);
      if (e.type === 'assistant/message' && e.data.usage) {
        if (e.data.usage.promptTokens === 0) {
          // pi records all-zero usage on its aborted replies: the anchor stays where it was.
          zeroUsage++;
          if (lastUsage) expect(m.anchor?.seq).toBe(lastUsage.seq);
          return;
        }
        lastUsage = { seq: e.seq, tokens: e.data.usage.promptTokens + e.data.usage.completionTokens };
        expect(m.totalTokens).toBe(lastUsage.tokens);
      }
    });
    const report = await importPiFile(session, pi.path);
    expect(report.assistantMessages).toBe(453);
    expect(measurements).toBe(session.length);
    expect(zeroUsage).toBeGreaterThan(0);

    const final = meter.measure();
    const fresh = meterWith(session, 'o200k_base').measure();
    expect(final.surfaceTokens).toBe(fresh.surfaceTokens);
    expect(final.estimatedTokens).toBe(fresh.estimatedTokens);
    expect(final.totalTokens).toBe(fresh.totalTokens);
    expect(final.anchor?.seq).toBe(lastUsage!.seq);
    expect(final.totalTokens).toBe(lastUsage!.tokens + final.anchor!.growthTokens);
    // pi records neither tools nor a system prompt: the provider's figure carries its envelope.
    expect(final.totalTokens).toBeGreaterThan(final.estimatedTokens);
    let sum = 0;
    for (let p = 0; p < final.prices.length; p++) sum += final.prices.priceAt(p);
    expect(sum).toBe(final.surfaceTokens);
  });
});
