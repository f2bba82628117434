/**
 * Linear-time pricing of pathological text. BPE merges inside one pre-tokenizer piece cost
 * O(piece²): a 100k-character run of one letter took 4.3 s to price, a 1 MB run minutes.
 * Real text has short pieces (words, numbers, punctuation runs), so only overlong runs are
 * cut, into chunks of at most `maxRun` characters, each priced on its own.
 *
 * A run is a maximal stretch of whitespace or of non-whitespace: every tokenizer we know
 * pre-splits at whitespace boundaries, so any piece lies inside one run and text without an
 * overlong run is priced in one call, exactly as before.
 *
 * Where a run is cut: at the last likely piece boundary (letter↔digit, lower→upper, a word
 * ending in punctuation; digits in their groups of three) in the chunk's second half, else at
 * the limit. Non-space runs are cut every ≤ 64 characters (a 1 MB run of one letter: ~0.1 s
 * instead of minutes), whitespace runs every 512 (o200k spends one token on up to 128 spaces).
 *
 * Error (tested in test/services/metering/tokenizer-linear.test.ts against the uncut count): a cut only changes
 * how the tokens next to it merge, so each cut over-counts by at most 1 token, and never
 * under-counts (pressure errs high, never toward an overflow). A non-space run of n characters
 * is off by ≤ ⌈n/32⌉ tokens: ≤ 2% for runs that cost ≥ 1 token per 1.6 characters of cut
 * text at worst; measured 0% (one character, JSON, digits), 0.01% (CJK), 0.5% (random
 * lowercase), 1.4% (base64). Text without a run over 64 characters (whitespace: 512) is priced
 * in one call, exactly as before.
 *
 * Linear is not always fast enough: base64 or hex costs ~1 µs per character to price even in
 * short pieces. A dense region (≥ 64k characters of long runs) is priced from a sample of its
 * segments instead (sample.ts, with its own stated error); other text is never sampled.
 */
import { isSpace } from './chars';
import { denseRegions, sampleSegments } from './sample';
import type { Tokenizer } from './types';

export const MAX_RUN_CHARS = 64;
/**
 * Whitespace runs are cheap (o200k spends one token on up to 128 spaces), so they are cut at a
 * multiple of 128, where a cut costs nothing for runs of one whitespace character.
 */
export const MAX_SPACE_RUN_CHARS = 512;

/**
 * Finds a run the loop below would cut (a non-space run over `maxRun` code units, a space run
 * over `maxSpaceRun`): most texts have none, and the regular expression scans them many times
 * faster than the loop. Its classes are isSpace's (JavaScript's \s plus U+0085), per code unit.
 * Each alternative only starts where a run starts (the lookbehind): unanchored, a failed try at
 * every position of a run re-read the rest of it, O(run²) on JSON and paths (5× slower on a
 * real transcript's texts, a tenth of a reopen's fold).
 */
const overlongRun = new Map<string, RegExp>();
export function hasOverlongRun(text: string, maxRun: number, maxSpaceRun: number): boolean {
  const key = `${maxRun},${maxSpaceRun}`;
  let re = overlongRun.get(key);
  if (!re) overlongRun.set(key, (re = new RegExp(`(?<![^\\s\\u0085])[^\\s\\u0085]{${maxRun + 1}}|(?<![\\s\\u0085])[\\s\\u0085]{${maxSpaceRun + 1}}`)));
  return re.test(text);
}

/** The text's segments, split only inside runs longer than `maxRun` code units. */
export function splitOverlongRuns(text: string, maxRun: number = MAX_RUN_CHARS, maxSpaceRun: number = Math.max(maxRun, MAX_SPACE_RUN_CHARS)): string[] {
  if (text.length <= maxRun || !hasOverlongRun(text, maxRun, maxSpaceRun)) return [text];
  const out: string[] = [];
  let segmentStart = 0;
  let runStart = 0;
  let runSpace = isSpace(text.charCodeAt(0));
  for (let i = 1; i <= text.length; i++) {
    const space = i < text.length ? isSpace(text.charCodeAt(i)) : !runSpace;
    const limit = runSpace ? maxSpaceRun : maxRun;
    if (space === runSpace && i - runStart < limit) continue;
    if (space === runSpace) {
      // The run reached maxRun: cut at the last likely piece boundary in its second half, else
      // here; never between the halves of a surrogate pair.
      let cut = runSpace ? i : softBoundary(text, i, runStart + (maxRun >> 1), runStart);
      if (isLowSurrogate(text.charCodeAt(cut))) cut++;
      if (cut >= text.length) break;
      out.push(text.slice(segmentStart, cut));
      segmentStart = cut;
      runStart = cut;
      i = cut;
      continue;
    }
    runStart = i;
    runSpace = space;
  }
  out.push(text.slice(segmentStart));
  return out;
}

/** The same tokenizer, with `count` linear in the length of any run. */
export function withLinearPricing(tokenizer: Tokenizer, maxRun: number = MAX_RUN_CHARS): Tokenizer {
  const inner = tokenizer.count;
  const split = (text: string): number => {
    if (text.length <= maxRun) return inner(text);
    const parts = splitOverlongRuns(text, maxRun);
    if (parts.length === 1) return inner(text);
    let total = 0;
    for (const part of parts) total += inner(part);
    return total;
  };
  // Long dense regions (a 1 MB base64 run) are priced by a sample: see sample.ts.
  const count = (text: string): number => {
    const regions = denseRegions(text);
    if (regions.length === 0) return split(text);
    let total = 0;
    let at = 0;
    for (const [start, end] of regions) {
      total += split(text.slice(at, start));
      total += sampleSegments(splitOverlongRuns(text.slice(start, end), maxRun), inner).tokens;
      at = end;
    }
    return total + split(text.slice(at));
  };
  return Object.freeze({ ...tokenizer, count });
}

/**
 * The last position in (floor, at] where pre-tokenizers start a new piece in non-space text:
 * letter→digit, digit→letter, lowercase→uppercase, or a letter/digit followed by punctuation
 * (not an apostrophe: `'s` can belong to the word before). Punctuation→letter is not one:
 * a leading quote or dot joins the word after it.
 */
function softBoundary(text: string, at: number, floor: number, chunkStart: number): number {
  for (let j = at; j > floor; j--) {
    const a = charClass(text.charCodeAt(j - 1));
    const b = charClass(text.charCodeAt(j));
    if (a === b) continue;
    if (a === OTHER) continue;
    if (b === OTHER && text.charCodeAt(j) === 39) continue;
    if (a === LOWER && b === UPPER) return j;
    if (a === UPPER && b === LOWER) continue;
    return j;
  }
  // Inside a run of digits, keep the pre-tokenizers' groups of three (counted from where the
  // digits start, or from the previous cut, which was aligned the same way).
  if (charClass(text.charCodeAt(at - 1)) === DIGIT && charClass(text.charCodeAt(at)) === DIGIT) {
    let d = at - 1;
    while (d > chunkStart && charClass(text.charCodeAt(d - 1)) === DIGIT) d--;
    const aligned = d + Math.floor((at - d) / 3) * 3;
    if (aligned > chunkStart) return aligned;
  }
  return at;
}

const LOWER = 0;
const UPPER = 1;
const DIGIT = 2;
const OTHER = 3;
const WIDE = 4;

function charClass(code: number): number {
  if (code >= 97 && code <= 122) return LOWER;
  if (code >= 65 && code <= 90) return UPPER;
  if (code >= 48 && code <= 57) return DIGIT;
  // Outside ASCII we cannot tell letters from symbols cheaply: one class, never a boundary
  // with itself.
  if (code >= 0x80) return WIDE;
  return OTHER;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
