import { describe, expect, it } from 'vitest';
import { XcompactError } from '../../../src/errors';
import { frameCheckpoint, unframeCheckpoint } from '../../../src/services/summarizing';
import { SummarizerError, type Summarizer, type SummaryRequest, type SummaryResult } from '../../../src/services/summarizing';
import { inputBudget, priceRequest } from '../../../src/services/summarizing';
import { BoundedSummarizer, boundSummarizer } from '../../../src/services/summarizing';
import { ExtractiveSummarizer } from '../../../src/services/summarizing';
import { buildInstruction } from '../../../src/services/summarizing';
import type { ChatMessage } from '../../../src/session/derive';
import { isCheckpoint, type SurfaceEvent } from '../../../src/session/events';
import { Session } from '../../../src/session/session';
import { SessionWriter } from '../../../src/session/writer';

/** One token per code point: every budget below is readable. */
const chars = (text: string): number => Array.from(text).length;

/** A user's own summarizer: records what it was asked, answers with a numbered summary. */
class RecordingSummarizer implements Summarizer {
  readonly name = 'mine';
  readonly seen: SummaryRequest[] = [];
  constructor(private readonly answer: (request: SummaryRequest, call: number) => Partial<SummaryResult> = () => ({})) {}
  async summarize(request: SummaryRequest): Promise<SummaryResult> {
    this.seen.push(request);
    return { text: `summary ${this.seen.length}`, requests: 1, ...this.answer(request, this.seen.length - 1) };
  }
}

/** A session of `turns` turns, each a request, a read with a `resultChars` result, and an answer. */
function span(turns: number, resultChars: number) {
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  w.startTurn();
  w.startStep();
  w.request({ provider: 'local', model: 'm', systemPrompt: 'System prompt.', tools: [] });
  for (let t = 0; t < turns; t++) {
    w.user(`Request ${t}: look at src/file${t}.ts`);
    w.assistant({ toolCalls: [{ id: `c${t}`, name: 'read', arguments: JSON.stringify({ path: `src/file${t}.ts` }) }] });
    w.toolResult(`c${t}`, `// file ${t}\n${'x'.repeat(resultChars)}\n// end of file ${t}`, { toolName: 'read' });
    w.assistant({ text: `File ${t} read.` });
  }
  const messages = session.deriveMessages();
  const events = session.surface.slice(0).map((s) => session.event(s) as SurfaceEvent);
  return { messages, events };
}

function request(messages: readonly ChatMessage[], events: readonly SurfaceEvent[], extra: Partial<SummaryRequest> = {}): SummaryRequest {
  return {
    system: messages[0],
    tools: [],
    context: [],
    messages: messages.slice(1),
    events: events.slice(1),
    target: { provider: 'local', model: 'm' },
    maxTokens: 500,
    countTokens: chars,
    ...extra,
  };
}

/** What a chat-completions summarizer would send for this request (system, context, span, instruction). */
function priceOf(r: SummaryRequest): number {
  const instruction = buildInstruction({ keptCheckpoints: r.context.length, focus: r.focus });
  return priceRequest([...(r.system ? [r.system] : []), ...r.context, ...r.messages, { role: 'user', content: instruction }], r.tools, r.countTokens);
}

const signal = () => new AbortController().signal;
const INSTRUCTION = chars(buildInstruction());

describe('BoundedSummarizer around any summarizer', () => {
  it('passes a request that fits to the inner summarizer unchanged, with the window, and reports as-is', async () => {
    const { messages, events } = span(2, 100);
    const inner = new RecordingSummarizer();
    const bounded = boundSummarizer(inner, { window: 20_000 });
    const r = request(messages, events);
    const result = await bounded.summarize(r, signal());
    expect(bounded.name).toBe('mine');
    expect(inner.seen).toHaveLength(1);
    expect(inner.seen[0]).toEqual({ ...r, contextWindow: 20_000 });
    expect(result).toEqual({
      text: 'summary 1',
      requests: 1,
      bounding: { mode: 'as-is', budget: inputBudget(20_000, 500, 512 + 400), cutBlocks: 0, chunks: 1 },
    });
  });

  it('without a window (option or request) passes everything through', async () => {
    const { messages, events } = span(3, 50_000);
    const inner = new RecordingSummarizer();
    const result = await new BoundedSummarizer(inner).summarize(request(messages, events), signal());
    expect(inner.seen[0]!.messages).toBe(inner.seen[0]!.messages); // same request
    expect(inner.seen[0]!.messages).toHaveLength(messages.length - 1);
    expect(result.bounding).toEqual({ mode: 'as-is', cutBlocks: 0, chunks: 1 });
  });

  it("cuts oversized blocks when that is enough: one inner call, within the budget, the span's events whole", async () => {
    const { messages, events } = span(2, 3_000);
    const inner = new RecordingSummarizer();
    const window = INSTRUCTION + 500 + 2_500;
    const r = request(messages, events, { contextWindow: window });
    const result = await boundSummarizer(inner, { safetyMarginTokens: 0 }).summarize(r, signal());
    expect(result.bounding).toMatchObject({ mode: 'truncated', chunks: 1 });
    expect(result.bounding!.cutBlocks).toBeGreaterThan(0);
    expect(inner.seen).toHaveLength(1);
    const got = inner.seen[0]!;
    expect(priceOf(got)).toBeLessThanOrEqual(inputBudget(window, 500, 0));
    const tool = got.messages.find((m) => m.role === 'tool')!.content as string;
    expect(tool.startsWith('// file 0\n')).toBe(true);
    expect(tool).toContain("characters omitted to fit the summarizer's input");
    expect(got.events).toBe(r.events);
  });

  it('chunks with a rolling merge: every inner request fits, each carries the previous summary (message and event), results add up', async () => {
    const { messages, events } = span(12, 400);
    const inner = new RecordingSummarizer((_r, call) => ({ usage: { promptTokens: 100 + call, completionTokens: 10 } }));
    // A tokenizer object (as getTokenizer returns) overrides the request's counter.
    const window = INSTRUCTION + 500 + 1_400;
    const bounded = boundSummarizer(inner, { window, tokenizer: { count: chars }, safetyMarginTokens: 0 });
    const result = await bounded.summarize(request(messages, events, { countTokens: () => 0 }), signal());

    const n = inner.seen.length;
    expect(n).toBeGreaterThan(2);
    expect(result).toMatchObject({ text: `summary ${n}`, requests: n, bounding: { mode: 'chunked', chunks: n, budget: inputBudget(window, 500, 0) } });
    expect(result.usage).toEqual({ promptTokens: Array.from({ length: n }, (_, i) => 100 + i).reduce((a, b) => a + b), completionTokens: 10 * n });
    const sentUsers: string[] = [];
    inner.seen.forEach((got, i) => {
      expect(got.countTokens('abcd')).toBe(4);
      expect(got.context).toEqual([]);
      expect(priceOf(got)).toBeLessThanOrEqual(inputBudget(window, 500, 0));
      const body = i === 0 ? got.messages : got.messages.slice(1);
      if (i > 0) {
        expect(got.messages[0]).toEqual({ role: 'user', content: frameCheckpoint(`summary ${i}`) });
        expect(isCheckpoint(got.events[0]!)).toBe(true);
        expect(got.events[0]!.seq).toBe(-1);
      }
      // The chunk's events are its messages' events, in order.
      const own = i === 0 ? got.events : got.events.slice(1);
      expect(own).toHaveLength(body.length);
      own.forEach((e, j) => expect(e.type.split('/')[0]).toBe(body[j]!.role));
      for (const m of body) if (m.role === 'user') sentUsers.push(m.content as string);
    });
    // Every request of the span went to exactly one chunk, in order.
    expect(sentUsers).toEqual(Array.from({ length: 12 }, (_, t) => `Request ${t}: look at src/file${t}.ts`));
  });

  it('wraps the ExtractiveSummarizer: the final chunk merges what earlier chunks found', async () => {
    const { messages, events } = span(8, 800);
    const window = INSTRUCTION + 1_000 + 3_000;
    const bounded = boundSummarizer(new ExtractiveSummarizer(), { window, safetyMarginTokens: 0 });
    const result = await bounded.summarize(request(messages, events, { maxTokens: 1_000 }), signal());
    expect(result.bounding?.mode).toBe('chunked');
    expect(result.bounding!.chunks).toBeGreaterThanOrEqual(2);
    expect(result.requests).toBe(0); // model-free, however many chunks
    for (let t = 0; t < 8; t++) expect(result.text).toContain(`Request ${t}: look at src/file${t}.ts`);
    expect(unframeCheckpoint(result.text)).toBeUndefined();
  });

  it('refuses, calling nothing, when system + instruction alone do not fit', async () => {
    const { messages, events } = span(1, 10);
    const inner = new RecordingSummarizer();
    const err = await boundSummarizer(inner, { window: INSTRUCTION, safetyMarginTokens: 0 })
      .summarize(request(messages, events), signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SummarizerError);
    expect((err as SummarizerError).code).toBe('summary-input-too-large');
    expect(inner.seen).toHaveLength(0);
  });

  it('stops between chunks when the signal aborts, keeping no partial summary', async () => {
    const { messages, events } = span(12, 400);
    const controller = new AbortController();
    const inner = new RecordingSummarizer((_r, call) => {
      if (call === 0) controller.abort(new Error('user pressed Esc'));
      return {};
    });
    const window = INSTRUCTION + 500 + 1_400;
    const err = await boundSummarizer(inner, { window, safetyMarginTokens: 0 })
      .summarize(request(messages, events), controller.signal)
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'summary-cancelled', message: expect.stringContaining('user pressed Esc') });
    expect(inner.seen).toHaveLength(1);
  });

  it('rejects options that are not whole token counts', () => {
    const inner = new RecordingSummarizer();
    for (const bad of [{ window: 0 }, { window: 1.5 }, { safetyMarginTokens: -1 }, { toolResultFloorTokens: Number.NaN }]) {
      const err = (() => {
        try {
          boundSummarizer(inner, bad);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(XcompactError);
      expect((err as XcompactError).code).toBe('config');
    }
  });
});
