import { HEURISTIC_OVERHEAD, UTF8_BYTES_OVERHEAD } from './overhead';
import type { Tokenizer } from './types';

/** The reference heuristic (docs/spec.md#2-token-measurement): `ceil(length / 4)` in UTF-16 code units. */
export function createHeuristicTokenizer(): Tokenizer {
  return Object.freeze({
    name: 'heuristic',
    exact: false,
    overhead: HEURISTIC_OVERHEAD,
    count: (text: string) => Math.ceil(text.length / 4),
  });
}

/**
 * `ceil(utf8Bytes / 4)`. A BPE token averages about 4 bytes of UTF-8 for English, code and
 * JSON alike, and a CJK character is 3 bytes where BPEs spend about one token per
 * 1-1.5 characters, so bytes price CJK within ~10% where chars/4 is 56-71% low.
 */
export function createUtf8BytesTokenizer(): Tokenizer {
  return Object.freeze({
    name: 'utf8-bytes',
    exact: false,
    overhead: UTF8_BYTES_OVERHEAD,
    count: (text: string) => Math.ceil(utf8ByteLength(text) / 4),
  });
}

/**
 * UTF-8 length without encoding (no allocation). A lone surrogate counts 3 bytes, as
 * TextEncoder replaces it with U+FFFD.
 */
export function utf8ByteLength(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit >= 0xd800 && unit <= 0xdbff && isLowSurrogate(text.charCodeAt(i + 1))) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}
