// `xcompact/advanced`: the building blocks under the engine, for hosts that use one piece on
// its own, visualise or model-test the charts, or read logs without a Session. Less stable
// than the main entry: these follow the internals. Everything in `xcompact` is not repeated.

// The charts themselves, for inspection, visualisation and model-based tests.
export { compactionMachine } from './machines/compaction';
export { pressureMachine } from './machines/pressure';
export { overflowMachine } from './machines/overflow';
export { manualMachine } from './machines/manual';
export { transactionMachine } from './machines/transaction';
export { fitMachine, type FitInput, type FitOutput, type FitStatus, type FitEvent } from './machines/fit';
export type { WindowReading, WindowResult, RequestCore } from './services/pressure';
export type { Mode, ReadingResult, SpanCheck, SummaryOutcome, Verdict, CommitRecord, TransactionInput, TransactionOutput, LockProbe } from './machines/types';

// Configuration internals: the zod schema, per-route policy and budget resolution, the model registry.
export {
  ConfigSchema,
  resolveBudget,
  policyFor,
  modelInfoFor,
  tokenizerNameFor,
  type BudgetArgs,
  type ModelPolicy,
  type ModelPolicyOverride,
  type ConfigIssue,
} from './services/config';
export { BUILTIN_MODELS, resolveModel, resolvePrices, modelKey } from './services/config';
export { NEUTRAL_PRICES, compactionEconomics, pruneEconomics, type CompactionEstimate, type PruneEstimate } from './services/economics';
export { TOKENIZER_NAMES } from './services/metering';

// Building an argument-prune replace (docs/spec.md#15-pruning-what-the-agent-wrote) for a custom pruner.
export { argumentPruneProblem, withPrunedArguments } from './session/index';

// Single services.
export { TokenMeter, type TokenMeterOptions } from './services/metering';
// The meter's provisional prices (the server tokenizer's stand-in counts) and the server tokenizer itself.
export {
  ProvisionalPrices,
  ServerTokenizer,
  serverTokenizeUrl,
  type RefreshBase,
  type ServerTokenizerOptions,
  type ServerTokenizerState,
  type PrefetchReport,
} from './services/metering';
export type { UnclosedBracket } from './services/transaction';
export { classifyRequestError, isSilentOverflow, OVERFLOW_PATTERNS } from './services/overflow';
export {
  planPrune,
  applyPrune,
  truncateMiddle,
  PruneSettingsError,
  PrunePricingError,
  PrunePlanStaleError,
  type Pricing,
  type PruneTarget,
  type PruneSkip,
  type PruneKeepReason,
} from './services/pruning';
export { selectRange } from './services/selection';
// The recall index and its parts (the tool itself is in the main entry).
export {
  RecallIndex,
  runRecall,
  searchIndex,
  whereOf,
  parseRecallArgs,
  RecallArgsSchema,
  RECALL_TOOL_DEFINITION,
  RECALL_TOOL_NAME,
  RECALL_DEFAULT_MAX_TOKENS,
  RECALL_MAX_TOKENS_CAP,
  RECALL_DESCRIPTION,
  RECALL_PARAMETERS,
  checkpointHandle,
  prunedHandle,
  parseHandle,
  checkpointRecallNote,
  prunedRecallNote,
  PRUNED_RECALL_NOTE_MAX_CHARS,
  type SearchOptions,
  type HandleKind,
  type CheckpointInfo,
  type RecallIndexStats,
  type RecallEntry,
  type RecallSource,
  type RecallArgs,
  type RecallQuery,
  type RecallRequest,
  type LinearPattern,
  type SearchBudget,
} from './services/recall';
export type { TruncationReason } from './services/core';
export { frameCheckpoint, unframeCheckpoint, CHECKPOINT_PREAMBLE } from './services/summarizing';
export { COMPACTION_INSTRUCTION, SUMMARY_SECTIONS, type SummarySection } from './services/summarizing';

// The session log's schemas and helpers, for tools that read or write logs themselves.
export {
  EVENT_TYPES,
  SURFACE_TYPES,
  isSurfaceType,
  toolCallsOf,
  toChatMessage,
  isCutToolCall,
  sendableArguments,
  COMPACTION_CHECKPOINT_SOURCE,
  EventDataSchemas,
  StoredEventSchema,
  UsageSchema,
  SurfaceOpSchema,
  TextBlockSchema,
  ImageBlockSchema,
  ReasoningBlockSchema,
  ToolCallBlockSchema,
  parseLogBytes,
  checkSessionId,
  usageFromOpenAI,
  type ParsedLog,
} from './session/index';
// The file check every importer and CLI command reads through, and its size limit.
export { readRegularFile, DEFAULT_MAX_FILE_BYTES, MAX_FILE_BYTES_ENV, type ReadFileOptions } from './regular-file';
