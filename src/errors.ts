/**
 * Every error xcompact throws on purpose is an XcompactError with a stable `code`,
 * so callers can branch on the code instead of parsing messages. Messages say what
 * was wrong and how to fix it.
 */
import type { CompactionErrorCode } from './machines/types';
import type { BudgetErrorCode } from './services/config';
import type { SummarizerErrorCode } from './services/summarizer';
import type { StoreErrorCode } from './session/errors';

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
  | 'config' // ConfigError, or a bad option passed to a constructor
  | 'session-rule' // SessionRuleError: an append broke a log rule; the session is unchanged
  | 'invalid-session-id' // a session id that cannot be a file name
  | 'import' // PiImportError: a transcript that cannot be imported
  | 'tokenizer-unavailable' // TokenizerUnavailableError: unknown name or optional package missing
  | 'prune-settings' // PruneSettingsError
  | 'prune-pricing' // PrunePricingError
  | 'prune-plan-stale' // PrunePlanStaleError: the surface changed since the plan
  | 'invalid-context-window' // isSilentOverflow without a positive window
  | 'service-not-provided' // a chart invoked a service nobody provided
  | 'unrouted' // no request/header yet, so no provider/model to measure against
  | 'span-invalid' // the selected span is no longer a balanced run of surface nodes
  | 'engine-stopped' // a call on, or pending in, a stopped engine
  | 'unmappable-part' // AiSdkAdapterError: a message part the session cannot represent
  | 'history-diverged' // AiSdkAdapterError: the app's conversation does not continue the recorded one
  | 'missing-tool-results' // AiSdkAdapterError: a prompt that leaves tool calls without a result
  | 'unexpected-tool-result' // AiSdkAdapterError: a tool result for a call that is not waiting for one
  | 'recovery-failed'; // AiSdkAdapterError: the engine failed while handling a provider's error

export class XcompactError extends Error {
  readonly code: XcompactErrorCode;

  constructor(code: XcompactErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}
