// xcompact public API: re-exports only. What an agent loop needs: the engine, the durable
// session and its stores, summarizers (built-in, bounded, or your own), config validation and
// the errors. The building blocks (charts, single services, zod schemas, log parsing) are in
// `xcompact/advanced` (src/advanced.ts); the local test server is `xcompact/testing`.
export { XcompactError, type XcompactErrorCode } from './error-codes';

// The engine an agent loop embeds.
export {
  createCompactionEngine,
  CompactionError,
  type CompactionEngine,
  type CompactionEngineOptions,
  type CompactionRecord,
  type AfterStepResult,
  type AfterStepStatus,
  type RequestErrorAction,
  type EngineNotification,
  type EngineServices,
} from './engine/facade';
export type {
  CompactionErrorCode,
  ErrorInfo,
  SelectInput,
  PruneInput,
  PruneSummary,
  PressureReading,
  PressureEconomics,
  Trigger,
  OpenedBracket,
} from './machines/types';
export type { EngineMeasurement } from './services/pressure';
// The drop-in: your own openai loop and messages, with `withCompaction(new OpenAI(), { session })`.
export { withCompaction, sessionMessages, type WithCompactionOptions, type Compaction, type CompactingClient } from './adapters/drop-in/index';
// Every face's one error: a refused call (nothing recorded or sent), a diverged history, a failed recovery.
export {
  ConversationError,
  DropInError,
  ShapeError,
  type ConversationErrorCode,
  type DropInErrorCode,
  type ShapeErrorCode,
} from './adapters/conversation/index';
// The same drop-in for the Responses API (`client.responses.create`) and Anthropic Messages (`withCompaction(new Anthropic(), …)`).
export { sessionInput } from './adapters/responses/create';
export type { AnthropicClientLike, AnthropicCompaction, AnthropicCompactingClient } from './adapters/anthropic/client';
export type { AnthropicMessage, AnthropicBlock } from './adapters/anthropic/map';
export type { ResponsesItem } from './adapters/responses/map';
export type { RedactionSettings } from './services/redaction';
// The engine as a machine a host machine invokes (examples/xstate-agent.ts).
export { createCompactionMachine, type CompactionMachineOptions } from './engine/assembly';
export type { CompactionEmitted, EngineRequest, SettledResult, ShutdownEvent } from './machines/compaction';
export type { PressureStatus, PressureOutput, EconomicDecision } from './machines/pressure';
export type { ModelPrices, SessionPace, EconomicVerdict, ReliefVerdict, ReliefChoice } from './services/economics';
export type { DeclineReason, OverflowOutput } from './machines/overflow';
export type { ManualOutput } from './machines/manual';

// The durable session model.
export {
  Session,
  SessionWriter,
  MemoryStore,
  JsonlStore,
  PostgresStore,
  StoreError,
  SessionRuleError,
  isCheckpoint,
  type SessionOptions,
  type SessionListener,
  type LockState,
  type RecoveryReport,
  type SessionStore,
  type StoredLog,
  type LogWriter,
  type LoadReport,
  type StoredSnapshot,
  type JsonlStoreOptions,
  type PostgresStoreOptions,
  type PgPool,
  type RequestEnvelope,
  type AssistantReply,
  type CompletionMessage,
  type CompletionToolCall,
  type CompletionUsage,
  type UserContent,
  type SurfaceView,
  type SurfaceChange,
  type ChatMessage,
  type StoreErrorCode,
  type TextBlock,
  type ReasoningBlock,
  type ToolCallBlock,
  type ImageBlock,
  type ContentBlock,
  type Usage,
  type EventType,
  type EventData,
  type SurfaceType,
  type SurfaceOp,
  type ReplaceOp,
  type SessionEvent,
  type AppendInput,
  type SurfaceEvent,
} from './session/index';
export {
  importPiFile,
  importPiTranscript,
  PiImportError,
  importClaudeCodeFile,
  importClaudeCodeTranscript,
  importCodexFile,
  importCodexTranscript,
  importGeminiFile,
  importGeminiTranscript,
  importTranscript,
  importTranscriptFile,
  detectTranscriptFormat,
  describeUnread,
  TranscriptImportError,
  type PiImportReport,
  type PiImportOptions,
  type TranscriptImportOptions,
  type TranscriptImportReport,
  type TranscriptHarness,
  type TranscriptFormat,
  type Detection,
  type DocumentKind,
} from './transcripts/index';
// Reading a file a user named: a regular file within the size limit, or a typed refusal at once.
export { FileReadError, type FileKind, type FileReadReason } from './regular-file';

// Configuration: validate early; the engine validates again at creation.
export {
  parseConfig,
  ConfigError,
  BudgetError,
  type BudgetErrorCode,
  type CompactionConfig,
  type CompactionConfigInput,
  type ResolvedBudget,
  type EffectivePolicy,
} from './services/config';
export type { ModelInfo } from './services/config';
export { getTokenizer, TokenizerUnavailableError, type Tokenizer, type TokenizerName, type ChatOverhead, type ChatRole } from './services/metering';
export type { Measurement, NodePrices } from './services/metering';
export type { Calibration } from './services/metering';
export { withErrorBodyRecovery, type RequestErrorClass, type RequestErrorKind } from './services/overflow';
export type { PruneSettings, PrunePlan, PruneResult } from './services/pruning';
export type { ArgumentPruneTarget } from './services/pruning';
export type { CheckpointBound, RangeSelection, SelectOptions } from './services/selection';

// Summarizers: the built-in ones, bounding for any summarizer, and the contract for your own.
export {
  SummarizerError,
  type Summarizer,
  type SummaryRequest,
  type SummaryResult,
  type BoundingReport,
  type SummarizerErrorCode,
} from './services/summarizing';
export { OpenAISummarizer, type OpenAISummarizerOptions } from './services/summarizing';
export type { OpenAIClient } from './services/overflow';
export { ExtractiveSummarizer, type ExtractiveSummarizerOptions } from './services/summarizing';
export { BoundedSummarizer, boundSummarizer, type BoundingOptions } from './services/summarizing';
export type { CountTokens } from './services/summarizing';
export { buildInstruction, type InstructionOptions } from './services/summarizing';

// Nothing is lost (docs/recall.md): the recall tool for the host's tool list and dispatcher (config `recall: true`).
export {
  recallTool,
  RecallError,
  type RecallTool,
  type RecallToolDefinition,
  type RecallToolOptions,
  type RecallAnswer,
  type RecallErrorCode,
} from './services/recall';

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
