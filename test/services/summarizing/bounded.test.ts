import { describe, expect, it } from 'vitest';
import {
  TEMPLATE_COST,
  blocksOfMessage,
  defaultSafetyMargin,
  inputBudget,
  priceMessage,
  priceRequest,
  truncateMiddle,
  truncateToFit,
  truncateToolArguments,
  truncationMarker,
  waterLevel,
} from '../../../src/services/summarizing';
import { chunkCuts, fitUnits, planChunks, takeUnits, unitsOf } from '../../../src/services/summarizing';
import type { ChatMessage } from '../../../src/session/derive';

/** One token per code point: makes every expected number readable. */
const chars = (text: string): number => Array.from(text).length;

const user = (content: string): ChatMessage => ({ role: 'user', content });
const text = (content: string): ChatMessage => ({ role: 'assistant', content });
const calls = (...ids: string[]): ChatMessage => ({
  role: 'assistant',
  content: null,
  tool_calls: ids.map((id) => ({ id, type: 'function' as const, function: { name: 'read', arguments: `{"path":"${id}.ts"}` } })),
});
const result = (id: string, content: string): ChatMessage => ({ role: 'tool', tool_call_id: id, content });

describe('budget', () => {
  it('margin is 512 plus 2% of the window, rounded up', () => {
    expect(defaultSafetyMargin(128_000)).toBe(3_072);
    expect(defaultSafetyMargin(1_000)).toBe(532);
    expect(inputBudget(128_000, 8_192, 3_072)).toBe(116_736);
  });
});

describe('pricing', () => {
  it('charges 4 per message, 9 per tool call, 3 per request, plus the counted texts, ids and names', () => {
    expect(priceMessage(user('hello'), chars)).toBe(4 + 5);
    // content null; call id "a" (1) + name "read" (4) + 9, arguments {"path":"a.ts"} (15)
    expect(priceMessage(calls('a'), chars)).toBe(4 + 1 + 4 + 9 + 15);
    expect(priceMessage(result('a', 'abc'), chars)).toBe(4 + 3 + 1);
    expect(
      priceMessage(
        {
          role: 'user',
          content: [
            { type: 'text', text: 'see' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
          ],
        },
        chars,
      ),
    ).toBe(4 + 3 + TEMPLATE_COST.perImage);
    const tools = [{ type: 'function', function: { name: 'x' } }];
    expect(priceRequest([user('hi')], tools, chars)).toBe(3 + JSON.stringify(tools).length + 4 + 2);
    expect(priceRequest([user('hi')], [], chars)).toBe(3 + 4 + 2);
  });

  it('lists the blocks truncation may cut, with their kind', () => {
    expect(blocksOfMessage(result('a', 'out')).map((b) => [b.kind, b.text])).toEqual([['tool-result', 'out']]);
    expect(blocksOfMessage({ ...calls('a', 'b'), content: 'why' }).map((b) => [b.kind, b.text])).toEqual([
      ['text', 'why'],
      ['tool-arguments', '{"path":"a.ts"}'],
      ['tool-arguments', '{"path":"b.ts"}'],
    ]);
  });
});

describe('truncateMiddle', () => {
  it('keeps two thirds of the kept characters from the head, one third from the tail, around one marker line', () => {
    const input = 'ABCDEFGHIJ'.repeat(10);
    const cut = truncateMiddle(input, 70, chars);
    expect(cut).toBe("ABCDEFGH\n[… 89 characters omitted to fit the summarizer's input …]\nHIJ");
    expect(chars(cut)).toBe(70);
  });

  it('returns the text itself when it fits, and never splits a surrogate pair', () => {
    expect(truncateMiddle('short', 70, chars)).toBe('short');
    const cut = truncateMiddle('😀'.repeat(100), 70, chars);
    expect(cut).toBe(`${'😀'.repeat(8)}\n${truncationMarker(89)}\n${'😀'.repeat(3)}`);
    expect(cut).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
  });

  it('stays within the cap with a real-ish counter too', () => {
    const words = (t: string) => t.split(/\s+/).filter(Boolean).length;
    const input = Array.from({ length: 500 }, (_, i) => `line ${i} of output`).join('\n');
    const cut = truncateMiddle(input, 100, words);
    expect(words(cut)).toBeLessThanOrEqual(100);
    expect(cut.startsWith('line 0 of output\nline 1 of output')).toBe(true);
    expect(cut.endsWith('line 499 of output')).toBe(true);
  });
});

describe('truncateToolArguments', () => {
  it('cuts the long string values and keeps the JSON valid, keys and short values intact', () => {
    const args = JSON.stringify({ path: 'src/a.ts', content: 'x'.repeat(200), n: 3 });
    const cut = truncateToolArguments(args, 120, chars);
    expect(cut).toBe(`{"path":"src/a.ts","content":"${'x'.repeat(14)}\\n${truncationMarker(180)}\\n${'x'.repeat(6)}","n":3}`);
    expect(chars(cut)).toBeLessThanOrEqual(120);
    expect(JSON.parse(cut)).toMatchObject({ path: 'src/a.ts', n: 3 });
  });

  it('cuts arguments that are not JSON as text', () => {
    const cut = truncateToolArguments(`not json ${'y'.repeat(300)}`, 100, chars);
    expect(cut.startsWith('not json y')).toBe(true);
    expect(chars(cut)).toBeLessThanOrEqual(100);
  });
});

describe('waterLevel', () => {
  it('finds the highest common cap that frees enough', () => {
    // cap 45: (100 − 45) + (50 − 45) = 60
    expect(waterLevel([100, 50, 10], 60, 0)).toBe(45);
    expect(waterLevel([100, 50, 10], 1, 0)).toBe(99);
    expect(waterLevel([100, 50], 50, 48)).toBe(50);
  });

  it('is undefined when even the floor frees too little', () => {
    expect(waterLevel([100, 50, 10], 200, 0)).toBeUndefined();
    expect(waterLevel([100, 50], 60, 48)).toBeUndefined();
  });
});

describe('truncateToFit', () => {
  const span = [user('look'), calls('a'), result('a', 'r'.repeat(1000)), text('t'.repeat(800))];
  // Prices: 8, 33, 1005, 804 = 1850

  it('leaves a span that fits untouched', () => {
    const fit = truncateToFit(span, 1850, { toolResult: 100, other: 100 }, chars);
    expect(fit).toMatchObject({ fits: true, tokens: 1850, cuts: [] });
    expect(fit.messages.every((m, i) => m === span[i])).toBe(true);
  });

  it('cuts tool results first, only as far as needed; other messages stay the same objects', () => {
    const fit = truncateToFit(span, 1350, { toolResult: 100, other: 100 }, chars);
    expect(fit.fits).toBe(true);
    expect(fit.cuts).toEqual([{ message: 2, kind: 'tool-result', tokensBefore: 1000, tokensAfter: 500 }]);
    expect(fit.tokens).toBe(1350);
    expect([0, 1, 3].every((i) => fit.messages[i] === span[i])).toBe(true);
    expect(span[2]!.content).toBe('r'.repeat(1000)); // the input is not mutated
  });

  it('then cuts the biggest other blocks when tool results at their floor are not enough', () => {
    const fit = truncateToFit(span, 800, { toolResult: 100, other: 100 }, chars);
    expect(fit.fits).toBe(true);
    expect(fit.cuts).toEqual([
      { message: 2, kind: 'tool-result', tokensBefore: 1000, tokensAfter: 100 },
      { message: 3, kind: 'text', tokensBefore: 800, tokensAfter: 650 },
    ]);
    expect(fit.tokens).toBe(800);
    expect(fit.messages[0]).toBe(span[0]);
  });

  it('leaves everything cut at the floors and says it does not fit when that is not enough', () => {
    const fit = truncateToFit(span, 100, { toolResult: 100, other: 100 }, chars);
    expect(fit.fits).toBe(false);
    expect(fit.cuts.map((c) => [c.message, c.tokensAfter])).toEqual([
      [2, 100],
      [3, 100],
    ]);
    expect(fit.tokens).toBe(8 + 33 + 105 + 104);
  });
});

describe('chunk boundaries', () => {
  const span = [
    user('u1'), // 0
    calls('a', 'b'), // 1: a parallel batch
    result('a', 'ra'), // 2
    result('b', 'rb'), // 3
    text('done'), // 4
    user('u2'), // 5
    calls('c'), // 6
    result('c', 'rc'), // 7
  ];

  it('cuts only where no tool call waits for its result (a parallel batch stays whole)', () => {
    expect(chunkCuts(span)).toEqual([0, 1, 4, 5, 6, 8]);
    expect(unitsOf(span).map((u) => u.length)).toEqual([1, 3, 1, 1, 2]);
  });

  it('always allows the end, even after an unanswered call', () => {
    expect(chunkCuts([user('u'), calls('x')])).toEqual([0, 1, 2]);
    expect(chunkCuts([])).toEqual([0]);
  });

  it('cuts a unit bigger than a chunk down to it, keeping the batch whole', () => {
    const batch = [calls('a', 'b'), result('a', 'x'.repeat(400)), result('b', 'y'.repeat(400))];
    const { units, cuts } = fitUnits([[user('u')], batch], 300, chars);
    expect(units[0]).toEqual([user('u')]);
    expect(units[1]!.map((m) => m.role)).toEqual(['assistant', 'tool', 'tool']);
    expect(cuts).toBe(2);
    expect(units[1]!.reduce((sum, m) => sum + priceMessage(m, chars), 0)).toBeLessThanOrEqual(300);
  });

  it('takes units greedily and plans chunks, an oversized unit alone', () => {
    expect(takeUnits([3, 4, 5], 0, 7)).toBe(2);
    expect(takeUnits([3, 4, 5], 1, 7)).toBe(1);
    expect(takeUnits([3, 4, 5], 0, 2)).toBe(0);
    expect(planChunks([3, 4, 5, 10, 1], 8, 6)).toEqual([
      { start: 0, end: 2, oversized: false },
      { start: 2, end: 3, oversized: false },
      { start: 3, end: 4, oversized: true },
      { start: 4, end: 5, oversized: false },
    ]);
  });
});
