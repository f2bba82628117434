/**
 * The drop-in client's own errors. Their codes are the ones the AI SDK adapter uses for the same
 * faults (a prompt that does not continue the recording, a message the session cannot hold, a
 * tool call left without its result), so one `switch` over `XcompactErrorCode` covers both paths.
 */
import { XcompactError } from '../../errors';

export type DropInErrorCode = 'history-diverged' | 'unmappable-part' | 'missing-tool-results' | 'unexpected-tool-result' | 'recovery-failed';

export class DropInError extends XcompactError {
  declare readonly code: DropInErrorCode;
  /** For `missing-tool-results`: the calls that have no result; for `unexpected-tool-result`: the result's call. */
  readonly toolCallIds: readonly string[] | undefined;
  /** For `recovery-failed`: the provider's error the engine was handling. */
  readonly requestError: unknown;
  constructor(code: DropInErrorCode, message: string, options?: { cause?: unknown; toolCallIds?: readonly string[]; requestError?: unknown }) {
    super(code, message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.toolCallIds = options?.toolCallIds;
    this.requestError = options?.requestError;
  }
}

const describe = (e: unknown): string => (e instanceof XcompactError ? `${e.message} [${e.code}]` : e instanceof Error ? e.message : String(e));

/** The engine failed while handling a provider's error: both kept, xcompact's as the cause. */
export function recoveryFailed(requestError: unknown, failure: unknown): DropInError {
  return new DropInError(
    'recovery-failed',
    `the provider rejected the request (${describe(requestError)}) and xcompact could not handle that error: ${describe(failure)}. The provider's error is in requestError, xcompact's in cause`,
    { cause: failure, requestError },
  );
}
