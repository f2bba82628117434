import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_RUN_CHARS, getTokenizer, splitOverlongRuns, withLinearPricing } from '../../../src/services/metering';
import { createGptTokenizer } from '../../../src/services/metering';
import { randomText } from '../../helpers/random-text';
import { isSpace } from '../../../src/services/metering/tokenizers/chars';
import { hasOverlongRun } from '../../../src/services/metering/tokenizers/split';

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const minifiedJson = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ id: i, path: `src/file${i}.ts`, ok: i % 3 === 0, score: i * 1.25 })));

/** Pathological inputs: one character repeated, base64, minified JSON, random letters, CJK. */
const PATHOLOGICAL: Array<[string, string]> = [
  ['one letter', 'a'.repeat(20_000)],
  ['spaces', ' '.repeat(20_000)],
  ['one symbol', '='.repeat(20_000)],
  ['base64', randomText(20_000, BASE64)],
  ['minified JSON', minifiedJson(400).slice(0, 20_000)],
  ['random lowercase', randomText(20_000, 'abcdefghijklmnopqrstuvwxyz')],
  ['CJK run', randomText(20_000, '中文字符测试汉语模型上下文')],
  ['digits', randomText(20_000, '0123456789')],
];

describe('splitOverlongRuns', () => {
  it('keeps every character, in order, and cuts only runs longer than the limit', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom('a', 'B', '7', ' ', '\n', '"', '😀', '中', '-'), maxLength: 600 }),
        fc.integer({ min: 4, max: 80 }),
        (text, max) => {
          const parts = splitOverlongRuns(text, max);
          expect(parts.join('')).toBe(text);
          // A text whose whitespace and non-whitespace runs all fit is never cut.
          const longest = Math.max(0, ...(text.match(/\s+|\S+/g) ?? []).map((r) => r.length));
          if (longest <= max) expect(parts).toEqual([text]);
          for (const p of parts.slice(0, -1)) {
            expect(p.length).toBeGreaterThan(0);
            // Never between the halves of a surrogate pair.
            const last = p.charCodeAt(p.length - 1);
            expect(last >= 0xd800 && last <= 0xdbff).toBe(false);
          }
        },
      ),
    );
  });

  it("looks for an overlong run (its fast path) with the loop's own character classes: every Unicode space, U+0085 too", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom('a', '7', ' ', '\t', '\n', '\u0085', '\u00a0', '\u2009', '\u3000', '\ufeff', '😀', '中'), maxLength: 200 }),
        fc.integer({ min: 2, max: 12 }),
        fc.integer({ min: 0, max: 12 }),
        (text, max, extra) => {
          const maxSpace = max + extra;
          let overlong = false;
          for (let i = 0; i < text.length;) {
            const space = isSpace(text.charCodeAt(i));
            let j = i + 1;
            while (j < text.length && isSpace(text.charCodeAt(j)) === space) j++;
            if (j - i > (space ? maxSpace : max)) overlong = true;
            i = j;
          }
          expect(hasOverlongRun(text, max, maxSpace)).toBe(overlong);
          if (!overlong) expect(splitOverlongRuns(text, max, maxSpace)).toEqual([text]);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('prices ordinary text in one call, exactly as the tokenizer does', () => {
    const exact = createGptTokenizer('o200k_base');
    const prose = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
    expect(prose.split(/\s+/).every((w) => w.length <= MAX_RUN_CHARS)).toBe(true);
    expect(getTokenizer('o200k_base').count(prose)).toBe(exact.count(prose));
  });
});

describe('linear pricing error (stated in tokenizers/split.ts: ≤ 1 token per cut, over-counting)', () => {
  const exact = createGptTokenizer('o200k_base');
  const linear = withLinearPricing(exact);
  for (const [name, text] of PATHOLOGICAL) {
    it(`${name}: within one token per cut and 2% of exact`, () => {
      const cuts = splitOverlongRuns(text).length - 1;
      expect(cuts).toBeGreaterThan(0);
      const want = exact.count(text);
      const got = linear.count(text);
      expect(got).toBeGreaterThanOrEqual(want);
      expect(got - want).toBeLessThanOrEqual(cuts);
      // Whitespace runs are the exception: one token per 128 spaces makes any cut a large share.
      if (!/^\s+$/.test(text)) expect((got - want) / want).toBeLessThanOrEqual(0.02);
    });
  }

  it('the shared tokenizers price with the split (a 1 MB run is priced, not hung on)', () => {
    const run = 'x'.repeat(1 << 20);
    const count = getTokenizer('o200k_base').count(run);
    // Exact is unaffordable here; the chunk count times the exact price of one chunk is the answer.
    const chunks = splitOverlongRuns(run);
    const perChunk = exact.count(chunks[0]!);
    expect(chunks.every((c) => c.length === chunks[0]!.length || c === chunks[chunks.length - 1])).toBe(true);
    expect(count).toBe(perChunk * (chunks.length - 1) + exact.count(chunks[chunks.length - 1]!));
    expect(getTokenizer('cl100k_base').count(run)).toBeGreaterThan(0);
  });
});
