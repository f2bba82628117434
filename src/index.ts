// xcompact public API: re-exports only.
export { XcompactError } from './errors';

// The durable session model.
export * from './session/index';

// The engine an agent loop embeds.
export {
  createCompactionEngine,
  CompactionError,
  type CompactionEngine,
  type CompactionEngineOptions,
  type CompactionRecord,
  type AfterStepResult,
  type RequestErrorAction,
  type EngineNotification,
  type EngineServices,
} from './engine';
export type { CompactionErrorCode, ErrorInfo, SelectInput, PruneInput } from './machines/types';
// The engine as a machine a host machine invokes (examples/xstate-agent.ts).
export { createCompactionMachine, type CompactionMachineOptions } from './compaction-machine';
export type { CompactionEmitted, EngineRequest, SettledResult, ShutdownEvent } from './machines/engine';
export type { PressureStatus } from './machines/pressure';
export type { DeclineReason } from './machines/overflow';

// Services, for hosts that want one piece on its own.
export {
  ConfigSchema,
  ConfigError,
  BudgetError,
  parseConfig,
  resolveBudget,
  policyFor,
  modelInfoFor,
  tokenizerNameFor,
  type CompactionConfig,
  type CompactionConfigInput,
  type ResolvedBudget,
  type EffectivePolicy,
} from './services/config';
export { BUILTIN_MODELS, resolveModel, modelKey, type ModelInfo } from './services/models';
export { getTokenizer, TOKENIZER_NAMES, TokenizerUnavailableError, type Tokenizer, type TokenizerName, type ChatOverhead } from './services/tokenizer';
export { TokenMeter, type Measurement, type NodePrices } from './services/meter';
export {
  classifyRequestError,
  isSilentOverflow,
  withErrorBodyRecovery,
  OVERFLOW_PATTERNS,
  type RequestErrorClass,
  type RequestErrorKind,
} from './services/overflow';
export { planPrune, applyPrune, truncateMiddle, type PruneSettings, type PrunePlan, type PruneResult } from './services/pruner';
export { selectRange, type RangeSelection, type SelectOptions } from './services/range';
export { frameCheckpoint, unframeCheckpoint, CHECKPOINT_PREAMBLE } from './services/checkpoint';
export { SummarizerError, type Summarizer, type SummaryRequest, type SummaryResult } from './services/summarizer';
export { OpenAISummarizer, type OpenAISummarizerOptions } from './services/summarizers/openai';
export { ExtractiveSummarizer, type ExtractiveSummarizerOptions } from './services/summarizers/extractive';

// The charts themselves, for inspection, visualisation and model-based tests.
export { engineMachine } from './machines/engine';
export { pressureMachine } from './machines/pressure';
export { overflowMachine } from './machines/overflow';
export { manualMachine } from './machines/manual';
export { transactionMachine } from './machines/transaction';

// Recording a compaction for the offline viewer (visualizer/index.html).
export {
  createTraceRecorder,
  type Trace,
  type TraceStep,
  type TraceStateStep,
  type TraceSessionStep,
  type TraceActor,
  type TraceTransition,
  type TraceRecorder,
  type TraceRecorderOptions,
} from './trace';
