/**
 * `XcompactErrorCode`: every code an xcompact error can carry, from the layers that own them, and
 * the public `XcompactError`: the base class of src/errors.ts, typed so that its `code` is that
 * union (a typo does not compile, a `switch` can be exhaustive). Nothing inside xcompact imports
 * this file; src/index.ts exports it.
 */
import { XcompactError as BaseError } from './errors';
import type { CompactionErrorCode } from './services/core';
import type { BudgetErrorCode } from './services/config';
import type { SummarizerErrorCode } from './services/summarizing';
import type { StoreErrorCode } from './session/errors';
import type { RecallErrorCode } from './services/recall';
import type { ConversationErrorCode } from './adapters/conversation/errors';

/**
 * Every `code` an XcompactError can carry. The subclasses narrow it: `CompactionError` to
 * {@link CompactionErrorCode}, `SummarizerError` to {@link SummarizerErrorCode}, `StoreError`
 * to {@link StoreErrorCode}, `BudgetError` to {@link BudgetErrorCode}. A new code is added
 * here (or to its family's union), so a `switch` over the codes stays exhaustive.
 */
export type XcompactErrorCode =
  | CompactionErrorCode
  | SummarizerErrorCode
  | StoreErrorCode
  | BudgetErrorCode
  | RecallErrorCode // RecallError: recall arguments that cannot run (the tool answers them as a tool error)
  | 'config' // ConfigError, or a bad option passed to a constructor
  | 'session-rule' // SessionRuleError: an append broke a log rule; the session is unchanged
  | 'invalid-session-id' // a session id that cannot be a file name
  | 'import' // PiImportError, TranscriptImportError: a transcript that cannot be imported
  | 'not-a-regular-file' // FileReadError: a directory, FIFO, socket or device where a file was expected (refused before it is opened)
  | 'file-too-large' // FileReadError: a file over the size limit ($XCOMPACT_MAX_FILE_BYTES)
  | 'file-unreadable' // FileReadError: missing, no permission, or another read failure
  | 'eval-window' // WindowTooSmallError: a replay window smaller than what the recorded harness sent unrecorded
  | 'tokenizer-unavailable' // TokenizerUnavailableError: unknown name or optional package missing
  | 'prune-settings' // PruneSettingsError
  | 'prune-pricing' // PrunePricingError
  | 'prune-plan-stale' // PrunePlanStaleError: the surface changed since the plan
  | 'invalid-context-window' // isSilentOverflow without a positive window
  | 'service-not-provided' // a chart invoked a service nobody provided
  | 'unrouted' // no request/header yet, so no provider/model to measure against
  | 'span-invalid' // the selected span is no longer a balanced run of surface nodes
  | 'engine-stopped' // a call on, or pending in, a stopped engine
  | ConversationErrorCode; // ConversationError: every face's refusals (nothing recorded or sent) and a failed recovery

/** The public face of the base class: the same constructor, with `code` typed as {@link XcompactErrorCode}. */
export interface XcompactError extends BaseError {
  readonly code: XcompactErrorCode;
}
export const XcompactError = BaseError as unknown as {
  new (code: XcompactErrorCode, message: string, options?: { cause?: unknown }): XcompactError;
  readonly prototype: XcompactError;
};
