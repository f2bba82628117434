/**
 * Sampled pricing of long dense regions (src/services/metering/tokenizers/sample.ts): where it applies,
 * its stated error against the split price (every segment counted), determinism, and that a
 * 1 MB run is priced from a small sample. Timing is measured in bench/calibration.ts, not here.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { getTokenizer, splitOverlongRuns, withLinearPricing, type Tokenizer } from '../../../src/services/metering';
import { createGptTokenizer } from '../../../src/services/metering';
import { SAMPLING, denseRegions, sampleSegments } from '../../../src/services/metering';
import { randomText } from '../../helpers/random-text';

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const N = 131_072;
const wrap = (s: string, width: number) => s.match(new RegExp(`.{1,${width}}`, 'g'))!.join('\n');
const alternating = (n: number, period: number) => {
  const parts: string[] = [];
  for (let i = 0, len = 0; len < n; i++, len += period) parts.push(i % 2 ? 'a'.repeat(period) : randomText(period, BASE64, i + 1));
  return parts.join('').slice(0, n);
};
const DENSE: Array<[string, string]> = [
  ['base64', randomText(N, BASE64, 7)],
  ['base64 wrapped at 76 columns', wrap(randomText(N, BASE64, 8), 76)],
  ['hex', randomText(N, '0123456789abcdef', 9)],
  ['one character', 'a'.repeat(N)],
  ['random lowercase', randomText(N, 'abcdefghijklmnopqrstuvwxyz', 10)],
  ['minified JSON', JSON.stringify(Array.from({ length: N / 30 }, (_, i) => ({ id: i, p: `src/f${i}.ts`, ok: i % 2 === 0 }))).slice(0, N)],
  ['CJK', randomText(N, '中文字符测试汉语模型上下文', 11)],
  ['half one letter, half base64', 'a'.repeat(N / 2) + randomText(N / 2, BASE64, 12)],
  ['alternating every 1k (periodic content)', alternating(N, 1024)],
  ['alternating every 256', alternating(N, 256)],
];

const exact = createGptTokenizer('o200k_base');
const splitPrice = (text: string) => splitOverlongRuns(text).reduce((n, part) => n + exact.count(part), 0);

/** A tokenizer that counts the characters it was asked to price. */
function metered(inner: Tokenizer): { tokenizer: Tokenizer; chars: () => number } {
  let chars = 0;
  return { tokenizer: { ...inner, count: (t: string) => ((chars += t.length), inner.count(t)) }, chars: () => chars };
}

describe('dense regions (where pricing samples)', () => {
  it('prose and code never form one: they are priced exactly, as before', () => {
    const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
    const code = readFileSync(new URL('../../../src/services/metering/meter.ts', import.meta.url), 'utf8');
    const long = (readme + code).repeat(Math.ceil((2 * SAMPLING.minRegionChars) / (readme.length + code.length)));
    expect(denseRegions(long)).toEqual([]);
    expect(getTokenizer('o200k_base').count(long)).toBe(exact.count(long));
  });

  it('a long run inside ordinary text is one region, the text around it stays exact', () => {
    const before = 'Here is the attachment you asked for:\n\n';
    const run = randomText(SAMPLING.minRegionChars * 2, BASE64, 3);
    const text = `${before}${run}\n\nThat was all.`;
    expect(denseRegions(text)).toEqual([[before.length, before.length + run.length]]);
    // Too short a run is no region.
    expect(denseRegions(`${before}${run.slice(0, SAMPLING.minRegionChars - 1)} end`)).toEqual([]);
  });
});

describe('sampled price against the split price (stated in sample.ts: within −0.5% … +2%)', () => {
  const linear = withLinearPricing(exact);
  for (const [name, text] of DENSE) {
    it(name, () => {
      expect(denseRegions(text).length).toBe(1);
      const want = splitPrice(text);
      const got = linear.count(text);
      const error = (got - want) / want;
      expect(error).toBeGreaterThanOrEqual(-0.005);
      expect(error).toBeLessThanOrEqual(0.02);
      expect(linear.count(text)).toBe(got); // the same text always gets the same price
    });
  }

  it('periodic content is not aliased by the strata: it is sampled harder or counted in full', () => {
    const text = alternating(N, 1024);
    const [start, end] = denseRegions(text)[0]!;
    const r = sampleSegments(splitOverlongRuns(text.slice(start, end)), exact.count);
    expect(r.relativeError).toBeLessThanOrEqual(SAMPLING.targetRelativeError);
    expect(Math.abs(r.tokens - splitPrice(text)) / splitPrice(text)).toBeLessThanOrEqual(0.02);
  });
});

describe('a 1 MB run is priced from a sample', () => {
  it('base64: under 5% of it is tokenized, and the price is within the stated error of a full count of 256k', () => {
    const { tokenizer, chars } = metered(exact);
    const linear = withLinearPricing(tokenizer);
    const big = randomText(1 << 20, BASE64, 5);
    const price = linear.count(big);
    expect(chars()).toBeLessThan(0.05 * big.length);
    // Uniform text: the price per character of a full count of a quarter holds for the whole.
    const quarter = big.slice(0, 1 << 18);
    const perChar = splitPrice(quarter) / quarter.length;
    expect(price / (perChar * big.length)).toBeGreaterThan(0.99);
    expect(price / (perChar * big.length)).toBeLessThan(1.02);
  });
});
