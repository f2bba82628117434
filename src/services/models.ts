import type { TokenizerName } from './tokenizers/types.js';

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
  /**
   * The request field for an output cap. OpenAI's reasoning models (o-series, gpt-5) reject
   * `max_tokens` and want `max_completion_tokens`; every other endpoint reads `max_tokens`.
   */
  outputCapField?: 'max_tokens' | 'max_completion_tokens';
}

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
  'openai/gpt-4o': { contextWindow: 128_000, maxOutputTokens: 16_384, tokenizer: 'o200k_base' },
  'openai/gpt-4o-mini': { contextWindow: 128_000, maxOutputTokens: 16_384, tokenizer: 'o200k_base' },
  'openai/gpt-4.1': { contextWindow: 1_047_576, maxOutputTokens: 32_768, tokenizer: 'o200k_base' },
  'openai/gpt-4.1-mini': { contextWindow: 1_047_576, maxOutputTokens: 32_768, tokenizer: 'o200k_base' },
  'openai/o3': { contextWindow: 200_000, maxOutputTokens: 100_000, tokenizer: 'o200k_base', outputCapField: 'max_completion_tokens' },
  'openai/o4-mini': { contextWindow: 200_000, maxOutputTokens: 100_000, tokenizer: 'o200k_base', outputCapField: 'max_completion_tokens' },
  'openai/gpt-5': { contextWindow: 400_000, maxOutputTokens: 128_000, tokenizer: 'o200k_base', outputCapField: 'max_completion_tokens' },
  'openai/gpt-5-mini': { contextWindow: 400_000, maxOutputTokens: 128_000, tokenizer: 'o200k_base', outputCapField: 'max_completion_tokens' },
  'openai/gpt-4-turbo': { contextWindow: 128_000, maxOutputTokens: 4_096, tokenizer: 'cl100k_base' },
  'openai/gpt-3.5-turbo': { contextWindow: 16_385, maxOutputTokens: 4_096, tokenizer: 'cl100k_base' },
});

/** The registry key of a route. */
export function modelKey(provider: string, model: string): string {
  return `${provider}/${model}`;
}

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
  return info;
}

function freezeTable<T extends Record<string, object>>(table: T): Readonly<T> {
  for (const entry of Object.values(table)) Object.freeze(entry);
  return Object.freeze(table);
}
