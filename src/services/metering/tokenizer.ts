/**
 * Tokenizer service: exact or estimated token counts per text, plus each tokenizer's chat
 * template overhead. Heavy tables load on the first request of a tokenizer, never at import.
 */
import { createHeuristicTokenizer, createUtf8BytesTokenizer } from './tokenizers/approximate';
import { createDeepseekV3Tokenizer } from './tokenizers/deepseek';
import { TokenizerUnavailableError } from './tokenizers/errors';
import { createGptTokenizer } from './tokenizers/gpt';
import { withLinearPricing } from './tokenizers/split';
import { CONFIG_TOKENIZER_NAMES, SERVER_TOKENIZER, TOKENIZER_NAMES, type LocalTokenizerName, type Tokenizer, type TokenizerName } from './tokenizers/types';

export { CONFIG_TOKENIZER_NAMES, SERVER_TOKENIZER, TOKENIZER_NAMES, messageOverhead, tokenizerId } from './tokenizers/types';
export type { ChatOverhead, ChatRole, LocalTokenizerName, MessageShape, Tokenizer, TokenizerName } from './tokenizers/types';
export { TokenizerUnavailableError } from './tokenizers/errors';
export { utf8ByteLength } from './tokenizers/approximate';
export { MAX_RUN_CHARS, splitOverlongRuns, withLinearPricing } from './tokenizers/split';
export { DEEPSEEK_V3_CHAT_OVERHEAD, HEURISTIC_OVERHEAD, OPENAI_CHAT_OVERHEAD, UTF8_BYTES_OVERHEAD } from './tokenizers/overhead';

const FACTORIES: Record<LocalTokenizerName, () => Tokenizer> = {
  // BPE is quadratic inside one pre-tokenizer piece: overlong runs are priced in chunks.
  o200k_base: () => withLinearPricing(createGptTokenizer('o200k_base')),
  cl100k_base: () => withLinearPricing(createGptTokenizer('cl100k_base')),
  'deepseek-v3': () => withLinearPricing(createDeepseekV3Tokenizer()),
  heuristic: createHeuristicTokenizer,
  'utf8-bytes': createUtf8BytesTokenizer,
};

const instances = new Map<LocalTokenizerName, Tokenizer>();

/**
 * The shared instance of a tokenizer, created on first request (synchronously).
 * Throws TokenizerUnavailableError for an unknown name or when an optional package is missing;
 * a failed load is not cached, so installing the package and asking again works.
 */
export function getTokenizer(name: TokenizerName): Tokenizer {
  if (name === SERVER_TOKENIZER) {
    throw new TokenizerUnavailableError(
      name,
      `tokenizer 'server' counts with the model's own server: the engine builds it per route from the client's base URL (or the model's tokenizerUrl); getTokenizer makes only ${TOKENIZER_NAMES.map((n) => `'${n}'`).join(', ')}`,
    );
  }
  const existing = instances.get(name);
  if (existing) return existing;
  if (!isTokenizerName(name)) {
    throw new TokenizerUnavailableError(
      String(name),
      `unknown tokenizer ${JSON.stringify(name)}: use one of ${TOKENIZER_NAMES.map((n) => `'${n}'`).join(', ')}`,
    );
  }
  const created = FACTORIES[name]();
  instances.set(name, created);
  return created;
}

export function isTokenizerName(value: unknown): value is LocalTokenizerName {
  return typeof value === 'string' && (TOKENIZER_NAMES as readonly string[]).includes(value);
}

/** A name a config may give (the in-process tokenizers and `server`). */
export function isConfigTokenizerName(value: unknown): value is TokenizerName {
  return typeof value === 'string' && (CONFIG_TOKENIZER_NAMES as readonly string[]).includes(value);
}
