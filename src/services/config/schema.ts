/**
 * The configuration's shape: defaults, the zod schema of every field (the single source of the
 * config types) and the resolved policy types. Cross-field rules live in config-rules.ts,
 * resolution in config-policy.ts; config.ts puts them together.
 */
import { z } from 'zod';
import { PRUNED_RECALL_NOTE_MAX_CHARS } from '../recall';
import { isRedactionPattern } from '../redaction';
import { CONFIG_TOKENIZER_NAMES } from '../metering';

// ---------------------------------------------------------------------------------------------
// Defaults
// ---------------------------------------------------------------------------------------------

export const DEFAULT_THRESHOLD_RATIO = 0.8;
export const DEFAULT_HEADROOM_TOKENS = 65_536;

/**
 * Headroom when none is configured: the reference's 65 536 tokens, but never more than an
 * eighth of the window. A fixed 65 536 leaves no pressure budget at all below ~70k tokens, so
 * every local model (llama.cpp, Ollama, vLLM at 8k–32k) would have no automatic compaction
 * out of the box; for windows of 512k and more the two are the same.
 */
export function defaultHeadroom(window: number): number {
  return Math.min(DEFAULT_HEADROOM_TOKENS, Math.floor(window / 8));
}
/**
 * The room kept for the reply of a request that sets no output cap, on a model whose own cap
 * is unknown: an eighth of the window, at most 8,192 tokens. Without it such a request may be
 * sent with its prompt at the very edge of the window and the server cuts the reply after a few
 * tokens (llama.cpp: `-c` is prompt and reply together), mid tool call.
 */
export function defaultOutputReservation(window: number): number {
  return Math.min(DEFAULT_OUTPUT_RESERVATION_CAP, Math.floor(window / 8));
}
export const DEFAULT_OUTPUT_RESERVATION_CAP = 8_192;
/**
 * The most the user's own messages take in a checkpoint by default, beyond the summary's cap:
 * Codex keeps up to 20,000 tokens of them for the same reason (their goal and instructions are
 * what compaction loses most painfully). Smaller windows get less (see ResolvedBudget.userWords).
 */
export const DEFAULT_USER_WORDS_TOKENS = 20_000;
/** Applies only when neither retainRatio nor retainTokens is given (at any level). */
export const DEFAULT_RETAIN_RATIO = 0.16;
/**
 * The retained tail of a compaction the cost model starts before the threshold, as a share
 * of the message budget, when retainFloorTokens is not set: the economics bench
 * (bench/economics) shows a small tail is cheapest and, with the checkpoint ledger, forgets
 * nothing its retention proxy sees.
 */
export const DEFAULT_RETAIN_FLOOR_RATIO = 0.02;

/**
 * Summary stalls (docs/reliability.md): a provider silent for a minute is not coming back, and
 * ten minutes is past the longest compactions seen in the field (claude-code#94580: median
 * 137 s, max 435 s), so a slow model still finishes while a hung one frees the lock.
 */
export const DEFAULT_SUMMARY_IDLE_TIMEOUT_MS = 60_000;
export const DEFAULT_SUMMARY_TIMEOUT_MS = 600_000;

/**
 * Code points the pruner's marker line may use (including its newlines): the pruner owns the
 * figure, the config checks head + marker + tail against thresholdChars with it.
 */
/**
 * The longest marker line the pruner writes (pruning/text.ts), reserved between head and tail so a pruned
 * text always fits under thresholdChars.
 */
export const PRUNE_MARKER_MAX_CHARS = 64;

/** The largest default `prune.thresholdChars` (windows of 16k tokens and more), and the smallest. */
export const PRUNE_THRESHOLD_CHARS_MAX = 8192;
export const PRUNE_THRESHOLD_CHARS_MIN = 1024;

/**
 * The pruner's sizes for a window of `window` tokens: what is set, and for what is not, a
 * threshold of half a character per token of the window (about an eighth of the window in
 * tokens: a 4k window prunes results over ~2,000 characters, 16k and more over 8,192), a head of
 * half the threshold and a tail of an eighth. A fixed 8,192 let one result take half of a 4k
 * window, so a step that read five files could not fit it whatever was compacted.
 */
export function pruneSizes(
  prune: { thresholdChars?: number | undefined; headChars?: number | undefined; tailChars?: number | undefined },
  window: number | undefined,
  markerReserve: number,
): { thresholdChars: number; headChars: number; tailChars: number } {
  if (prune.thresholdChars !== undefined) {
    // A threshold given: head and tail by its proportions (the config refuses a set that does not fit).
    const t = prune.thresholdChars;
    return { thresholdChars: t, headChars: prune.headChars ?? Math.floor(t / 2), tailChars: prune.tailChars ?? Math.floor(t / 8) };
  }
  const scaled =
    window === undefined ? PRUNE_THRESHOLD_CHARS_MAX : Math.min(PRUNE_THRESHOLD_CHARS_MAX, Math.max(PRUNE_THRESHOLD_CHARS_MIN, Math.floor(window / 2)));
  const headChars = prune.headChars ?? Math.floor(scaled / 2);
  const tailChars = prune.tailChars ?? Math.floor(scaled / 8);
  // Raised as far as a given head and tail need: every pruned text stays under the threshold.
  return { thresholdChars: Math.max(scaled, headChars + markerReserve + tailChars), headChars, tailChars };
}
export const PRUNE_MARKER_RESERVE = PRUNE_MARKER_MAX_CHARS;
/** The reserve when recall is on anywhere in the config: the marker also names its recall handle. */
export const PRUNE_MARKER_RESERVE_WITH_RECALL = PRUNE_MARKER_MAX_CHARS + PRUNED_RECALL_NOTE_MAX_CHARS;

// ---------------------------------------------------------------------------------------------
// Schema: per-field rules. Rules across fields live in crossFieldIssues() so that they can
// also run when some unrelated field is invalid (one report lists every problem).
// ---------------------------------------------------------------------------------------------

const ratio = () => z.number().gt(0).lte(1); // (0, 1]
const nonNegativeInt = () => z.int().min(0);
const positiveInt = () => z.int().min(1);
const name = () => z.string().min(1);

/** Fields a model policy may override. Optional here: merging needs to know what was given. */
const POLICY_FIELDS = {
  thresholdRatio: ratio().optional(),
  headroomTokens: nonNegativeInt().optional(),
  retainRatio: ratio().optional(),
  retainTokens: nonNegativeInt().optional(),
  maxTokens: positiveInt().optional(),
  /**
   * Tokens the user's own messages may take in a checkpoint, beyond the summary's cap (the
   * ledger's `<user-messages>`, verbatim, newest kept whole). Default: min(20,000, half of what
   * the threshold leaves above the retained tail and the summary cap). 0: they share the cap.
   */
  userWordsTokens: nonNegativeInt().optional(),
  compactionRetries: nonNegativeInt().optional(),
  maxOverflowRetries: nonNegativeInt().optional(),
  auto: z.boolean().optional(),
  /** docs/spec.md#13-background-compaction: prepare the summary in the background from the prepare point. */
  background: z.boolean().optional(),
  /** The prepare point as a share of the window (default: a quarter of the way from the threshold back to the retained tail). */
  prepareRatio: ratio().optional(),
  /**
   * When a summary prepared in the background is committed: 'threshold' holds it until a job
   * must wait (a step at the threshold, an overflow, /compact), so nothing is shadowed before
   * the threshold says so; 'ready' commits it as soon as it is ready (smaller requests sooner,
   * at the price of forgetting earlier). Unset: 'threshold', except on a route whose server has
   * one slot (`concurrency: 1`), where the summary has already evicted the slot's prompt cache
   * and a later commit would make the agent's prompt be evaluated twice (docs/background.md).
   */
  backgroundCommit: z.enum(['threshold', 'ready']).optional(),
  /**
   * docs/recall.md: checkpoints and pruned-result markers name the handle the recall tool brings the
   * originals back by (the host registers the tool: recallTool(session), or the AI SDK
   * adapter's `tools`). Off: frames and markers are byte-identical to those without recall.
   */
  recall: z.boolean().optional(),
  /** Longest silence of the summary provider (before the first byte, between chunks) before the summary is abandoned, ms. */
  summaryIdleTimeoutMs: positiveInt().optional(),
  /** Longest a summary may take as a whole (every request of a chunked one), ms: past it the compaction fails with summary-timeout. */
  summaryTimeoutMs: positiveInt().optional(),
};

export const ModelPolicySchema = z.strictObject({ provider: name(), model: name(), ...POLICY_FIELDS });

export const CircuitBreakerSchema = z.strictObject({
  failureLimit: positiveInt().default(3),
  cooldownMs: nonNegativeInt().default(300_000),
});

export const PruneSchema = z.strictObject({
  enabled: z.boolean().default(true),
  /** A text block over this many code points is pruned (default: scaled to the window, pruneSizes). */
  thresholdChars: positiveInt().optional(),
  /** Code points kept at the start (default: half the threshold). */
  headChars: nonNegativeInt().optional(),
  /** Code points kept at the end (default: an eighth of the threshold). */
  tailChars: nonNegativeInt().optional(),
  /** Newest tool results within this many tokens are never pruned (default: the retained tail). */
  protectRecentTokens: nonNegativeInt().optional(),
  /** Skip a prune pass that would free less (default: max(512, 2% of the window)). */
  minReclaimTokens: nonNegativeInt().optional(),
  /** Tool names whose results are never pruned. */
  neverPrune: z.array(name()).default([]),
});

/** Secret redaction where text leaves the log (services/redaction): on by default; extra patterns are regular expressions. */
export const RedactionSchema = z.strictObject({
  enabled: z.boolean().default(true),
  patterns: z.array(z.string().min(1).refine(isRedactionPattern, 'must be a valid regular expression')).default([]),
});

const price = () => z.number().min(0).refine(Number.isFinite, 'must be finite');
/** Per million tokens; any field left out comes from the built-in entry, else the neutral table. */
export const PricesSchema = z.strictObject({
  input: price().optional(),
  cacheRead: price().optional(),
  cacheWrite: price().optional(),
  output: price().optional(),
});

export const ModelEntrySchema = z.strictObject({
  prices: PricesSchema.optional(),
  contextWindow: positiveInt().optional(),
  maxOutputTokens: positiveInt().optional(),
  tokenizer: z.enum(CONFIG_TOKENIZER_NAMES).optional(),
  /** With tokenizer 'server': the tokenize endpoint itself (default: the client's base URL without /v1, then /tokenize). */
  tokenizerUrl: z.url({ protocol: /^https?$/ }).optional(),
  outputCapField: z.enum(['max_tokens', 'max_completion_tokens']).optional(),
  /** Requests the model's server works on at once (llama.cpp's -np): 1 for a local single-slot server. */
  concurrency: positiveInt().optional(),
});

export const FIELDS = {
  ...POLICY_FIELDS,
  thresholdRatio: ratio().default(DEFAULT_THRESHOLD_RATIO),
  // No default here: an unset headroom scales with the window (defaultHeadroom) at budget time.
  headroomTokens: nonNegativeInt().optional(),
  compactionRetries: nonNegativeInt().default(1),
  maxOverflowRetries: nonNegativeInt().default(1),
  auto: z.boolean().default(true),
  // On by default (docs/background.md): the agent does not wait for a summary below the threshold; see docs/spec.md#13-background-compaction.
  background: z.boolean().default(true),
  // No default here: unset means 'threshold', or 'ready' on a route whose server has one slot (measure.ts).
  backgroundCommit: z.enum(['threshold', 'ready']).optional(),
  recall: z.boolean().default(false),
  summaryIdleTimeoutMs: positiveInt().default(DEFAULT_SUMMARY_IDLE_TIMEOUT_MS),
  summaryTimeoutMs: positiveInt().default(DEFAULT_SUMMARY_TIMEOUT_MS),
  summarizationProvider: z.string().default(''),
  summarizationModel: z.string().default(''),
  modelPolicies: z.array(ModelPolicySchema).default([]),
  circuitBreaker: CircuitBreakerSchema.prefault({}), // prefault: parse {} so inner defaults apply
  /**
   * docs/reliability.md: when the summarizer cannot help (the breaker is open, a summary failed or came back
   * over its cap), relieve with a truncation checkpoint (the ledger alone, no model) so no request
   * goes over the window. false: the compaction fails, and the breaker pauses pressure compaction.
   */
  truncationFallback: z.boolean().default(true),
  minProgressRatio: z.number().min(0).lt(1).default(0.1),
  prune: PruneSchema.prefault({}),
  redaction: RedactionSchema.prefault({}),
  /**
   * The cost model (economics.ts): compact before the threshold once that pays, prune only when
   * the rewrite pays. false: the threshold alone decides (compaction at it, pruning first).
   */
  economics: z.boolean().default(true),
  /**
   * Memory in the cost model (economics/cost.ts): the share of what a compaction forgets that
   * the agent would have needed again, priced as reading it on every request to come. 1 (the
   * default): an early summary never pays, compaction waits for the threshold, early relief is
   * by pruning bulky outputs; 0 prices forgetting at zero (compact early whenever reads pay).
   */
  forgetting: z.number().min(0).max(1).default(1),
  /**
   * The smallest retained tail the cost model may keep in a compaction it starts before the
   * threshold (default floor(M × 0.02), never above the retained tail). Compactions at the
   * threshold and overflow recovery keep retainRatio/retainTokens.
   */
  retainFloorTokens: nonNegativeInt().optional(),
  tokenizer: z.enum(CONFIG_TOKENIZER_NAMES).optional(),
  models: z.record(z.string(), ModelEntrySchema).default({}),
};

/** The config object before cross-field rules and resolution (its shape lists every field). */
export const ConfigFieldsSchema = z.strictObject(FIELDS);
const FieldsSchema = ConfigFieldsSchema;
export type Fields = z.output<typeof FieldsSchema>;
export type PolicyInput = z.output<typeof ModelPolicySchema>;

/** A model policy after merging with the top level: every field resolved. */
export interface ModelPolicy {
  thresholdRatio: number;
  /** Undefined: defaultHeadroom(window), resolved per model by resolveBudget. */
  headroomTokens: number | undefined;
  /** Exactly one of retainRatio and retainTokens is set. */
  retainRatio?: number;
  retainTokens?: number;
  /** Summary output cap; undefined: the resolved headroom. */
  maxTokens: number | undefined;
  /** The user's words' own budget in a checkpoint; undefined: the default (resolveBudget). */
  userWordsTokens: number | undefined;
  compactionRetries: number;
  maxOverflowRetries: number;
  auto: boolean;
  background: boolean;
  /** Undefined: the default prepare point (docs/spec.md#13-background-compaction). */
  prepareRatio: number | undefined;
  /** When a background summary is committed: at the threshold (held until then), or once ready; undefined: by the route's concurrency. */
  backgroundCommit: 'threshold' | 'ready' | undefined;
  /** Checkpoints and markers name their recall handles (docs/recall.md). */
  recall: boolean;
  summaryIdleTimeoutMs: number;
  summaryTimeoutMs: number;
}

export interface ModelPolicyOverride extends ModelPolicy {
  provider: string;
  model: string;
}

/** The policy that applies to one route; `overridden` when a modelPolicies entry matched. */
export interface EffectivePolicy extends ModelPolicyOverride {
  overridden: boolean;
}
