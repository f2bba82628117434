export * from './events';
export * from './errors';
export { toChatMessage, isCutToolCall, sendableArguments, CUT_CALL_ARGUMENTS, type ChatMessage } from './derive';
export type { SurfaceView, SurfaceChange } from './surface';
export { argumentPruneProblem, withPrunedArguments } from './argument-prune';
export { Session, type SessionOptions, type SessionListener, type LockState, type RecoveryReport } from './session';
export { checkSessionId, type SessionStore, type StoredLog, type StoredSnapshot, type LogWriter, type LoadReport } from './store';
export { MemoryStore } from './stores/memory';
export { JsonlStore, parseLogBytes, type JsonlStoreOptions, type ParsedLog } from './stores/jsonl';
export {
  SessionWriter,
  usageFromOpenAI,
  type RequestEnvelope,
  type AssistantReply,
  type UserContent,
  type CompletionMessage,
  type CompletionToolCall,
  type CompletionUsage,
} from './writer';
export { PostgresStore, type PostgresStoreOptions, type PgPool } from './stores/postgres';
