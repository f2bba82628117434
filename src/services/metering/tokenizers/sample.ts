/**
 * Sampled pricing of long dense text. Splitting (split.ts) makes pricing linear, but some text
 * stays slow at a linear rate: base64 or hex is ~250k distinct short pieces per MB, each a BPE
 * merge the tokenizer cannot cache (about 1 µs per character with gpt-tokenizer: 1 MB ≈ 1 s).
 * Such text is uniform, so a sample prices it well.
 *
 * Where: a dense region is a stretch made only of non-space runs of at least
 * `minDenseRunChars` characters separated by single whitespace characters (one unbroken run,
 * base64 wrapped at 76 columns, a hex dump without spaces), at least `minRegionChars` long.
 * Words are shorter than that, so prose, code and logs never form a region and are priced
 * exactly (through the split) as before.
 *
 * How: the region is split into the segments split.ts would price one by one; they are grouped
 * into k strata of consecutive segments; one block of about `blockChars` characters from the
 * middle of each stratum is counted, and its tokens per character stand for its stratum. The
 * standard error of the total is estimated from the differences between neighbouring blocks
 * (the successive-difference estimator for systematic samples); while it is above
 * `targetRelativeError`, k doubles; when the sample would exceed `maxSampledShare` of the
 * region, every segment is counted instead (exactly the split price).
 *
 * Error (tested in test/services/metering/tokenizer-sample.test.ts against the split price, and in
 * bench/calibration.ts against exact): the price is the estimate plus two standard errors,
 * rounded up, so it errs high. Its standard error is at most 0.5% of the region by
 * construction, so it lies within [−0.5%, +2%] of the split price unless a block's content
 * differs from its stratum's systematically (measured: 0.1–0.6% high on base64, hex, random
 * letters, one character, minified JSON and CJK runs; a region alternating between two kinds
 * of content at the stratum's period is the adversarial case, and is within 2% at 256k chars
 * because its neighbouring blocks disagree, which raises k until it is counted in full).
 * Determinism: the same text always gives the same price (no randomness), so replay and
 * reopen price it the same.
 */
import { isSpace } from './chars';

export const SAMPLING = Object.freeze({
  minRegionChars: 65_536,
  minDenseRunChars: 48,
  blockChars: 512,
  strata: 16,
  targetRelativeError: 0.005,
  maxSampledShare: 0.25,
});

/** [start, end) of each dense region of `text`, in order. */
export function denseRegions(text: string): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  if (text.length < SAMPLING.minRegionChars) return out;
  let regionStart = -1;
  let regionEnd = -1;
  let i = 0;
  const close = () => {
    if (regionStart >= 0 && regionEnd - regionStart >= SAMPLING.minRegionChars) out.push([regionStart, regionEnd]);
    regionStart = -1;
  };
  while (i < text.length) {
    const space = isSpace(text.charCodeAt(i));
    let j = i + 1;
    while (j < text.length && isSpace(text.charCodeAt(j)) === space) j++;
    if (space) {
      // A single separator keeps the region open; anything longer ends it.
      if (j - i > 1) close();
    } else if (j - i >= SAMPLING.minDenseRunChars) {
      if (regionStart < 0) regionStart = i;
      regionEnd = j;
    } else close();
    i = j;
  }
  close();
  return out;
}

export interface SampledPrice {
  tokens: number;
  /** Estimated standard error over the price, 0 when every segment was counted. */
  relativeError: number;
  /** Characters actually tokenized. */
  sampledChars: number;
}

/** The price of a dense region given as the segments split.ts prices one by one. */
export function sampleSegments(segments: readonly string[], count: (text: string) => number): SampledPrice {
  const n = segments.length;
  const offsets = new Array<number>(n + 1);
  offsets[0] = 0;
  for (let i = 0; i < n; i++) offsets[i + 1] = offsets[i]! + segments[i]!.length;
  const chars = offsets[n]!;
  const block = SAMPLING.blockChars;
  for (let k = SAMPLING.strata; 2 * k * block <= chars * SAMPLING.maxSampledShare && k <= n; k *= 2) {
    // Positions are pseudo-random but fixed (a seeded xorshift): periodic content cannot alias
    // with the strata, and the same text always gets the same price.
    let seed = 0x9e3779b9 ^ k;
    const random = () => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) / 0x1_0000_0000;
    };
    let estimate = 0;
    let variance = 0;
    let sampled = 0;
    for (let s = 0; s < k; s++) {
      const lo = Math.floor((s * n) / k);
      const hi = Math.floor(((s + 1) * n) / k);
      const stratumChars = offsets[hi]! - offsets[lo]!;
      if (stratumChars <= 2 * block) {
        for (let i = lo; i < hi; i++) estimate += count(segments[i]!);
        sampled += stratumChars;
        continue;
      }
      // Two blocks per stratum: their disagreement estimates the stratum's variance.
      const d: number[] = [];
      for (let b = 0; b < 2; b++) {
        const at = offsets[lo]! + Math.floor(random() * (stratumChars - block));
        let i = segmentAt(offsets, at, lo, hi);
        let tokens = 0;
        let taken = 0;
        for (; i < hi && taken < block; i++) {
          tokens += count(segments[i]!);
          taken += segments[i]!.length;
        }
        sampled += taken;
        d.push(tokens / Math.max(taken, 1));
      }
      estimate += ((d[0]! + d[1]!) / 2) * stratumChars;
      // Var of the mean of two: s²/2 with s² = (d₀ − d₁)²/2; less the share the blocks cover.
      variance += stratumChars * stratumChars * Math.max(0, 1 - (2 * block) / stratumChars) * ((d[0]! - d[1]!) ** 2 / 4);
    }
    const se = Math.sqrt(variance);
    if (estimate > 0 && se / estimate <= SAMPLING.targetRelativeError) {
      return { tokens: Math.ceil(estimate + 2 * se), relativeError: se / estimate, sampledChars: sampled };
    }
  }
  let tokens = 0;
  for (const s of segments) tokens += count(s);
  return { tokens, relativeError: 0, sampledChars: chars };
}

/** Index of the segment holding character `at` (binary search over the offsets, within [lo, hi)). */
function segmentAt(offsets: readonly number[], at: number, lo: number, hi: number): number {
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (offsets[mid]! <= at) lo = mid;
    else hi = mid;
  }
  return lo;
}
