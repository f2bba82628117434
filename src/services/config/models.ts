import { modelKey, type TokenizerName } from '../metering';

/** US dollars (or any one currency) per million tokens. */
export interface ModelPrices {
  input: number;
  cacheRead: number;
  cacheWrite: number;
  output: number;
}

/**
 * For models with no prices of their own. Not any one provider's: cache reads a tenth of input
 * and writes a quarter above it, output four times input — the shape of the big providers'
 * tables, in units of the input price. Decisions depend only on the ratios.
 */
export const NEUTRAL_PRICES: Readonly<ModelPrices> = Object.freeze({ input: 1, cacheRead: 0.1, cacheWrite: 1.25, output: 4 });

export interface ModelInfo {
  /** Total tokens the model accepts: prompt plus output (W). */
  contextWindow: number;
  /**
   * Output tokens the provider reserves when a request does not set max_tokens: its default
   * max_tokens where it documents one (DeepSeek), else the model's maximum output (OpenAI lets
   * a reply run to it). Used as O when the request sets no max_tokens.
   */
  maxOutputTokens?: number;
  /** How xcompact prices text for this model. */
  tokenizer: TokenizerName;
  /** With tokenizer 'server': the tokenize endpoint (default: the client's base URL without /v1, then /tokenize). */
  tokenizerUrl?: string;
  /**
   * The request field for an output cap. OpenAI's reasoning models (o-series, gpt-5) reject
   * `max_tokens` and want `max_completion_tokens`; every other endpoint reads `max_tokens`.
   */
  outputCapField?: 'max_tokens' | 'max_completion_tokens';
  /**
   * Requests the model's server works on at once (llama.cpp's `-np`, vLLM's max sequences): with
   * 1, a background summary runs while the agent executes its tools, never while its request is
   * open (it would queue the agent's request and evict the slot's prompt cache). Unset: unbounded.
   */
  concurrency?: number;
  /** List prices per million tokens, for the cost model (economics.ts); a user entry overrides them field by field. */
  prices?: Partial<ModelPrices>;
}

/**
 * List prices (USD per 1M tokens) of the built-in models. OpenAI bills a cached prefix at its
 * "cached input" price and charges nothing extra to write the cache (cacheWrite = input).
 * Source: OpenAI's pricing page, https://platform.openai.com/docs/pricing (now
 * https://developers.openai.com/api/docs/pricing), as copied with check dates by
 * pydantic/genai-prices prices/providers/openai.yml (checked 2025-07-04; gpt-5 family
 * 2025-11-13; o3 after its 2025-06-10 price cut) and by Vercel AI Gateway's model pages
 * (https://vercel.com/ai-gateway/models/o3: $2 / $8, cache read $0.50); every figure below
 * agreed with both when checked on 2026-11-30.
 *
 * DeepSeek carries no prices: deepseek-chat and deepseek-reasoner were retired on 2026-07-24
 * (https://api-docs.deepseek.com/news/news260424; the API now names deepseek-flash,
 * https://api-docs.deepseek.com/), and DeepSeek's current prices differ by time of day, which
 * one table cannot hold. Its models use the neutral table unless the user gives prices.
 */
const OPENAI_PRICES = {
  'gpt-4o': { input: 2.5, cacheRead: 1.25, cacheWrite: 2.5, output: 10 },
  'gpt-4o-mini': { input: 0.15, cacheRead: 0.075, cacheWrite: 0.15, output: 0.6 },
  'gpt-4.1': { input: 2, cacheRead: 0.5, cacheWrite: 2, output: 8 },
  'gpt-4.1-mini': { input: 0.4, cacheRead: 0.1, cacheWrite: 0.4, output: 1.6 },
  o3: { input: 2, cacheRead: 0.5, cacheWrite: 2, output: 8 },
  'o4-mini': { input: 1.1, cacheRead: 0.275, cacheWrite: 1.1, output: 4.4 },
  'gpt-5': { input: 1.25, cacheRead: 0.125, cacheWrite: 1.25, output: 10 },
  'gpt-5-mini': { input: 0.25, cacheRead: 0.025, cacheWrite: 0.25, output: 2 },
} as const;

/** The tokenizer for models that do not name one. */
export const DEFAULT_TOKENIZER: TokenizerName = 'o200k_base';

/**
 * Built-in models, keyed `provider/model`.
 *
 * DeepSeek: api-docs.deepseek.com "Models & Pricing" (DeepSeek-V3.2, from Dec 2025): context
 * length 128K for both; deepseek-chat output default 4K, maximum 8K; deepseek-reasoner default
 * 32K, maximum 64K. "128K" is 131072: the API's overflow error reads "This model's maximum
 * context length is 131072 tokens" (shared/notes/tokenizers-and-openai-sdk.md).
 * DeepSeek models default to o200k_base, not 'deepseek-v3': the exact tokenizer needs two
 * optional packages (58 MB), so a user opts in with
 * `models: { 'deepseek/deepseek-chat': { tokenizer: 'deepseek-v3' } }`.
 *
 * OpenAI: platform.openai.com model pages, as recorded in gpt-tokenizer 4.0.0's model specs
 * (context_window / max_output_tokens); gpt-5's 400K window with 128K output leaves the
 * published 272K input limit. Encodings per gpt-tokenizer's model-to-encoding map.
 */
export const BUILTIN_MODELS: Readonly<Record<string, ModelInfo>> = freezeTable({
  'deepseek/deepseek-chat': { contextWindow: 131_072, maxOutputTokens: 4_096, tokenizer: 'o200k_base' },
  'deepseek/deepseek-reasoner': { contextWindow: 131_072, maxOutputTokens: 32_768, tokenizer: 'o200k_base' },
  'openai/gpt-4o': { contextWindow: 128_000, maxOutputTokens: 16_384, tokenizer: 'o200k_base', prices: OPENAI_PRICES['gpt-4o'] },
  'openai/gpt-4o-mini': { contextWindow: 128_000, maxOutputTokens: 16_384, tokenizer: 'o200k_base', prices: OPENAI_PRICES['gpt-4o-mini'] },
  'openai/gpt-4.1': { contextWindow: 1_047_576, maxOutputTokens: 32_768, tokenizer: 'o200k_base', prices: OPENAI_PRICES['gpt-4.1'] },
  'openai/gpt-4.1-mini': { contextWindow: 1_047_576, maxOutputTokens: 32_768, tokenizer: 'o200k_base', prices: OPENAI_PRICES['gpt-4.1-mini'] },
  'openai/o3': {
    contextWindow: 200_000,
    maxOutputTokens: 100_000,
    tokenizer: 'o200k_base',
    outputCapField: 'max_completion_tokens',
    prices: OPENAI_PRICES['o3'],
  },
  'openai/o4-mini': {
    contextWindow: 200_000,
    maxOutputTokens: 100_000,
    tokenizer: 'o200k_base',
    outputCapField: 'max_completion_tokens',
    prices: OPENAI_PRICES['o4-mini'],
  },
  'openai/gpt-5': {
    contextWindow: 400_000,
    maxOutputTokens: 128_000,
    tokenizer: 'o200k_base',
    outputCapField: 'max_completion_tokens',
    prices: OPENAI_PRICES['gpt-5'],
  },
  'openai/gpt-5-mini': {
    contextWindow: 400_000,
    maxOutputTokens: 128_000,
    tokenizer: 'o200k_base',
    outputCapField: 'max_completion_tokens',
    prices: OPENAI_PRICES['gpt-5-mini'],
  },
  'openai/gpt-4-turbo': { contextWindow: 128_000, maxOutputTokens: 4_096, tokenizer: 'cl100k_base' },
  'openai/gpt-3.5-turbo': { contextWindow: 16_385, maxOutputTokens: 4_096, tokenizer: 'cl100k_base' },
  // The models the harnesses' shipped transcripts name (Codex, Claude Code, pi, Gemini CLI), so
  // `inspect` knows their windows. Codex models: gpt-5's 400K window and 128K output; Spark's
  // 128K is Codex's recorded `model_context_window` 121,600 over its 95% effective share.
  'openai/gpt-5.1-codex': { contextWindow: 400_000, maxOutputTokens: 128_000, tokenizer: 'o200k_base', outputCapField: 'max_completion_tokens' },
  'openai/gpt-5.3-codex-spark': { contextWindow: 128_000, tokenizer: 'o200k_base', outputCapField: 'max_completion_tokens' },
  // Anthropic: platform.claude.com model overviews (context window, max output), checked
  // 2026-12-02. Claude's tokenizer is not public: o200k_base prices, the meter calibrates.
  'anthropic/claude-opus-4-5': { contextWindow: 200_000, maxOutputTokens: 64_000, tokenizer: 'o200k_base' },
  'anthropic/claude-opus-4-5-20251101': { contextWindow: 200_000, maxOutputTokens: 64_000, tokenizer: 'o200k_base' },
  'anthropic/claude-opus-4-6': { contextWindow: 1_000_000, maxOutputTokens: 128_000, tokenizer: 'o200k_base' },
  'anthropic/claude-sonnet-4-5': { contextWindow: 200_000, maxOutputTokens: 64_000, tokenizer: 'o200k_base' },
  'anthropic/claude-sonnet-4-5-20250929': { contextWindow: 200_000, maxOutputTokens: 64_000, tokenizer: 'o200k_base' },
  // Google: ai.google.dev Gemini 2.5 Flash (input limit 1,048,576, output 65,536).
  'google/gemini-2.5-flash': { contextWindow: 1_048_576, maxOutputTokens: 65_536, tokenizer: 'o200k_base' },
});

/** The registry key of a route. */
export { modelKey };

/**
 * A model's figures: the built-in entry overridden field by field by the user's entry.
 * Undefined when neither gives a context window (capacity unknown). Pass `config.models`
 * (validated by parseConfig); this function does not validate.
 */
export function resolveModel(key: string, userModels?: Record<string, Partial<ModelInfo>>): ModelInfo | undefined {
  const builtin = Object.hasOwn(BUILTIN_MODELS, key) ? BUILTIN_MODELS[key] : undefined;
  const user = userModels !== undefined && Object.hasOwn(userModels, key) ? userModels[key] : undefined;
  const contextWindow = user?.contextWindow ?? builtin?.contextWindow;
  if (contextWindow === undefined) return undefined;
  const info: ModelInfo = { contextWindow, tokenizer: user?.tokenizer ?? builtin?.tokenizer ?? DEFAULT_TOKENIZER };
  const maxOutputTokens = user?.maxOutputTokens ?? builtin?.maxOutputTokens;
  if (maxOutputTokens !== undefined) info.maxOutputTokens = maxOutputTokens;
  const outputCapField = user?.outputCapField ?? builtin?.outputCapField;
  if (outputCapField !== undefined) info.outputCapField = outputCapField;
  if (user?.tokenizerUrl !== undefined) info.tokenizerUrl = user.tokenizerUrl;
  const concurrency = user?.concurrency ?? builtin?.concurrency;
  if (concurrency !== undefined) info.concurrency = concurrency;
  if (builtin?.prices !== undefined || user?.prices !== undefined) info.prices = { ...builtin?.prices, ...user?.prices };
  return info;
}

/**
 * The prices the cost model uses for a model: the neutral table (NEUTRAL_PRICES), overridden
 * by the built-in entry's, overridden field by field by the user's. Known whether or not the
 * model's window is.
 */
export function resolvePrices(key: string, userModels?: Record<string, Partial<ModelInfo>>): ModelPrices {
  const builtin = Object.hasOwn(BUILTIN_MODELS, key) ? BUILTIN_MODELS[key] : undefined;
  const user = userModels !== undefined && Object.hasOwn(userModels, key) ? userModels[key] : undefined;
  return { ...NEUTRAL_PRICES, ...builtin?.prices, ...user?.prices };
}

function freezeTable<T extends Record<string, object>>(table: T): Readonly<T> {
  for (const entry of Object.values(table)) Object.freeze(entry);
  return Object.freeze(table);
}
