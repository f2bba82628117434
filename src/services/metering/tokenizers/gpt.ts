import type { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { utf8ByteLength } from './approximate.js';
import { TokenizerUnavailableError } from './errors.js';
import { nodeRequire, type RequireLike } from './node-require.js';
import { OPENAI_CHAT_OVERHEAD } from './overhead.js';
import type { Tokenizer } from './types.js';

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

/**
 * An exact OpenAI BPE counter. The rank table (o200k: ~0.4 s, ~100 MB) loads here, on first
 * request, not at module load.
 */
export function createGptTokenizer(name: GptEncodingName, load: RequireLike = nodeRequire()): Tokenizer {
  const encoding = loadEncoding(name, load);
  const count = (text: string): number => {
    if (text.length === 0) return 0;
    try {
      // countNative: counts without building the token-id array.
      return encoding.countTokens(text, SPECIAL_TOKENS_AS_TEXT);
    } catch {
      // count() must never throw (it runs inside an agent step); a byte estimate is the
      // least-wrong answer for input the encoder rejects.
      return Math.ceil(utf8ByteLength(text) / 4);
    }
  };
  return Object.freeze({ name, exact: true, overhead: OPENAI_CHAT_OVERHEAD, count });
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
