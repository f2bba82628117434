/**
 * recall/: the shadowed-history index and the recall tool. Nothing a checkpoint or a prune took
 * off the surface is lost: the model asks for it by text, regular expression, path or handle,
 * and gets the original text back with where it was.
 */
export { recallTool, runRecall, RECALL_TOOL_DEFINITION, type RecallTool, type RecallToolDefinition, type RecallToolOptions } from './tool';
export { searchIndex, whereOf, type RecallAnswer, type SearchOptions } from './search';
export { RecallIndex, type CheckpointInfo, type RecallIndexStats } from './recall-index';
export type { RecallEntry, RecallSource } from './entries';
export {
  RecallArgsSchema,
  RecallError,
  type RecallErrorCode,
  parseRecallArgs,
  RECALL_DEFAULT_MAX_TOKENS,
  RECALL_MAX_TOKENS_CAP,
  RECALL_DESCRIPTION,
  RECALL_PARAMETERS,
  type RecallArgs,
  type RecallQuery,
  type RecallRequest,
} from './args';
export {
  RECALL_TOOL_NAME,
  checkpointHandle,
  prunedHandle,
  parseHandle,
  checkpointRecallNote,
  prunedRecallNote,
  PRUNED_RECALL_NOTE_MAX_CHARS,
  type HandleKind,
} from './handles';
export type { LinearPattern, SearchBudget } from './linear-regex';
