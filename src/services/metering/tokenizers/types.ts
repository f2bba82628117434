/** Names of the tokenizers xcompact prices text with in process (`getTokenizer` makes them). */
export const TOKENIZER_NAMES = ['o200k_base', 'cl100k_base', 'deepseek-v3', 'heuristic', 'utf8-bytes'] as const;
export type LocalTokenizerName = (typeof TOKENIZER_NAMES)[number];
/**
 * The model's own server counts (llama.cpp's and vLLM's `POST /tokenize`, tokenizers/server.ts):
 * one instance per endpoint and model, built by the engine from the route's base URL.
 */
export const SERVER_TOKENIZER = 'server';
export type TokenizerName = LocalTokenizerName | typeof SERVER_TOKENIZER;
/** Every name a config may give. */
export const CONFIG_TOKENIZER_NAMES = [...TOKENIZER_NAMES, SERVER_TOKENIZER] as const;

/** Roles whose chat-template cost can differ (DeepSeek's template frames each role differently). */
export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';

/**
 * What a chat request costs beyond the token counts of its texts, so that
 *   request tokens = Σ text counts + Σ messageOverhead(message) + perRequest.
 * Each tokenizer states its figures and their source in `overhead.ts`.
 */
export interface ChatOverhead {
  /** Framing per message (role markers, separators). Used for roles absent from `perRole`. */
  perMessage: number;
  /** Once per request: BOS and/or the assistant reply priming. */
  perRequest: number;
  /** Per tool call in an assistant message, on top of the counted name and argument texts. */
  perToolCall: number;
  /** Added when a message carries a `name`; the name text itself is counted as text. */
  perName?: number;
  /** Exact per-role framing where the template differs by role; overrides `perMessage`. */
  perRole?: Partial<Record<ChatRole, number>>;
  /**
   * Per content block (text, reasoning, other; not tool calls). Only the reference heuristic
   * charges this (docs/spec.md#2-token-measurement: "+4" per block); real templates concatenate blocks for free.
   */
  perBlock?: number;
}

export interface Tokenizer {
  readonly name: TokenizerName;
  /** True for a real BPE tokenizer; false for the character/byte estimates. */
  readonly exact: boolean;
  /**
   * Token count of `text` as ordinary text. Never throws: special-token literals such as
   * `<|endoftext|>` are counted as the ordinary tokens they are made of.
   */
  count(text: string): number;
  readonly overhead: ChatOverhead;
  /**
   * Which instance this is, where one name covers many (`server`: the endpoint and model it asks,
   * tokenizers/server.ts). Prices from two ids are never mixed, nor a snapshot restored across them.
   */
  readonly id?: string;
  /**
   * Tokenizers whose own counts arrive asynchronously (`server`): how many counts so far were a
   * stand-in's (the fallback tokenizer's). A price taken while it grew is provisional.
   */
  fallbacks?(): number;
}

/** The tokenizer's identity: its `id` where it has one, else its name. */
export function tokenizerId(t: Pick<Tokenizer, 'name' | 'id'>): string {
  return t.id ?? t.name;
}

/** The shape of a message as far as its template overhead is concerned. */
export interface MessageShape {
  role: ChatRole;
  /** Number of tool calls (assistant messages). */
  toolCalls?: number;
  /** Number of non-tool-call content blocks (only priced by tokenizers with `perBlock`). */
  blocks?: number;
  /** True when the message carries a `name` field. */
  named?: boolean;
}

/** Template cost of one message, excluding its texts (which the caller counts). */
export function messageOverhead(overhead: ChatOverhead, message: MessageShape): number {
  const framing = overhead.perRole?.[message.role] ?? overhead.perMessage;
  const name = message.named === true ? (overhead.perName ?? 0) : 0;
  const calls = (message.toolCalls ?? 0) * overhead.perToolCall;
  const blocks = (message.blocks ?? 0) * (overhead.perBlock ?? 0);
  return framing + name + calls + blocks;
}
