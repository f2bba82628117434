import type { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { utf8ByteLength } from './approximate';
import { TokenizerUnavailableError } from './errors';
import { nodeRequire, type RequireLike } from './node-require';
import { OPENAI_CHAT_OVERHEAD } from './overhead';
import type { Tokenizer } from './types';

export type GptEncodingName = 'o200k_base' | 'cl100k_base';

interface GptEncodingModule {
  countTokens: typeof countTokens;
}

/** Encoding-specific entry points: each loads only its own rank table. */
const ENTRY_POINTS: Record<GptEncodingName, string> = {
  o200k_base: 'gpt-tokenizer/encoding/o200k_base',
  cl100k_base: 'gpt-tokenizer/encoding/cl100k_base',
};

/**
 * Special-token literals in user text are text, not control tokens. gpt-tokenizer throws on
 * them by default; an empty disallow set makes them count as their ordinary tokens.
 * Built once: countTokens re-derives its config from this object on every call otherwise.
 */
const SPECIAL_TOKENS_AS_TEXT = Object.freeze({ disallowedSpecial: new Set<string>() });

/** The same encodings in ai-tokenizer (an optional peer): the same counts in 0.25–0.5× the CPU. */
const AI_ENTRY_POINTS: Record<GptEncodingName, string> = {
  o200k_base: 'ai-tokenizer/encoding/o200k_base',
  cl100k_base: 'ai-tokenizer/encoding/cl100k_base',
};

interface AiEncoding {
  name: string;
  pat_str: string;
  special_tokens: Record<string, number>;
  stringEncoder: Record<string, number>;
}

interface AiTokenizerModule {
  Tokenizer: new (data: AiEncoding) => { encode(text: string): number[] };
}

/**
 * ai-tokenizer's counter for `name`, or undefined when the package is not installed (or does
 * not load). Built without special tokens, so their literals are ordinary text, as
 * SPECIAL_TOKENS_AS_TEXT makes them for gpt-tokenizer. Its counts are the same as
 * gpt-tokenizer's on the shared transcripts, the project's code, digit-heavy and CJK text and
 * random Unicode (test/services/metering/tokenizer-ai.test.ts), so which of the two counted a
 * log does not change a price (the meter snapshot's spot checks would notice if it did).
 */
export function loadAiCounter(name: GptEncodingName, load: RequireLike = nodeRequire()): ((text: string) => number) | undefined {
  let encoder: { encode(text: string): number[] };
  try {
    const { Tokenizer } = load('ai-tokenizer') as AiTokenizerModule;
    const encoding = load(AI_ENTRY_POINTS[name]) as AiEncoding;
    // ai-tokenizer looks pieces up in a plain object, so a piece like "valueOf" or
    // "constructor" finds Object.prototype's function and counts as one token. The table is
    // made prototype-free in place (a copy of its 200k pieces took ~0.3 s of CPU): it then
    // finds only the encoding's own pieces, which only corrects any other user of it.
    if (Object.getPrototypeOf(encoding.stringEncoder) !== null) Object.setPrototypeOf(encoding.stringEncoder, null);
    encoder = new Tokenizer({ ...encoding, special_tokens: {} });
  } catch {
    return undefined;
  }
  return (text) => encoder.encode(text).length;
}

/**
 * An exact OpenAI BPE counter: ai-tokenizer's when it is installed, gpt-tokenizer's otherwise
 * (the same counts). Which package counts is settled here (neither installed: this call's
 * TokenizerUnavailableError); its rank table (o200k: ~0.4–1.3 s of CPU, ~100 MB) loads on the
 * first count, so a tokenizer that is only named (the meter's one before any request header,
 * a route the log never uses) costs nothing.
 */
export function createGptTokenizer(name: GptEncodingName, load: RequireLike = nodeRequire()): Tokenizer {
  const ai = resolves(load, 'ai-tokenizer') && resolves(load, AI_ENTRY_POINTS[name]);
  if (!ai && !resolves(load, ENTRY_POINTS[name])) loadEncoding(name, load);
  let countWith: ((text: string) => number) | undefined;
  const counter = (): ((text: string) => number) => {
    if (countWith) return countWith;
    const fast = ai ? loadAiCounter(name, load) : undefined;
    if (fast) return (countWith = fast);
    const encoding = loadEncoding(name, load);
    return (countWith = (text: string) => encoding.countTokens(text, SPECIAL_TOKENS_AS_TEXT));
  };
  const count = (text: string): number => {
    if (text.length === 0) return 0;
    const countText = counter();
    try {
      // Either counter counts without building anything the caller keeps.
      return countText(text);
    } catch {
      // count() must never throw (it runs inside an agent step); a byte estimate is the
      // least-wrong answer for input the encoder rejects.
      return Math.ceil(utf8ByteLength(text) / 4);
    }
  };
  return Object.freeze({ name, exact: true, overhead: OPENAI_CHAT_OVERHEAD, count });
}

function resolves(load: RequireLike, id: string): boolean {
  try {
    load.resolve(id);
    return true;
  } catch {
    return false;
  }
}

function loadEncoding(name: GptEncodingName, load: RequireLike): GptEncodingModule {
  try {
    return load(ENTRY_POINTS[name]) as GptEncodingModule;
  } catch (cause) {
    throw new TokenizerUnavailableError(
      name,
      `tokenizer '${name}' could not be loaded from ${ENTRY_POINTS[name]}: install gpt-tokenizer@4 (npm install gpt-tokenizer@4.0.0) or choose tokenizer 'utf8-bytes'`,
      { packageName: 'gpt-tokenizer', cause },
    );
  }
}
