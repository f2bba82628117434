/**
 * The tokens of a JSON text, for changing or comparing string values without parsing the text
 * into objects: parsing and re-serialising loses integers above 2^53, rewrites `1.50` or `1e3`,
 * drops a `__proto__` key when copied into a plain object, and recursion over the parsed value
 * overflows the stack on deep nesting. Scanning the text keeps every other token byte-identical.
 *
 * The text must already be valid JSON (check with JSON.parse first): the scanner does not
 * validate, it only finds token boundaries. Whitespace between tokens is skipped.
 */

export interface JsonToken {
  /**
   * `key`: a string literal followed by `:`; `string`: any other string literal; `punct`: one
   * of `{ } [ ] , :`; `scalar`: a number, `true`, `false` or `null`.
   */
  readonly kind: 'key' | 'string' | 'punct' | 'scalar';
  /** Offsets into the text; a string token includes its quotes. */
  readonly start: number;
  readonly end: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function isPunct(c: number): boolean {
  return c === 0x7b || c === 0x7d || c === 0x5b || c === 0x5d || c === 0x2c || c === COLON;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  return i;
}

/** The offset just past the string literal whose opening quote is at `start`. */
function stringEnd(text: string, start: number): number {
  let from = start + 1;
  for (;;) {
    const q = text.indexOf('"', from);
    if (q < 0) return text.length; // not valid JSON; the caller checked, so unreachable
    let slashes = 0;
    while (text.charCodeAt(q - 1 - slashes) === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return q + 1;
    from = q + 1;
  }
}

/** The tokens of `text` in order. Linear in its length; no recursion, so any nesting depth works. */
export function* jsonTokens(text: string): Generator<JsonToken> {
  let i = skipSpace(text, 0);
  while (i < text.length) {
    const c = text.charCodeAt(i);
    let end: number;
    let kind: JsonToken['kind'];
    if (c === QUOTE) {
      end = stringEnd(text, i);
      kind = text.charCodeAt(skipSpace(text, end)) === COLON ? 'key' : 'string';
    } else if (isPunct(c)) {
      end = i + 1;
      kind = 'punct';
    } else {
      end = i + 1;
      while (end < text.length && !isSpace(text.charCodeAt(end)) && !isPunct(text.charCodeAt(end))) end++;
      kind = 'scalar';
    }
    yield { kind, start: i, end };
    i = skipSpace(text, end);
  }
}
