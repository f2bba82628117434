/**
 * What the demo says when a model request fails for good: the request's error is the
 * provider's, not a bug in xcompact, so the user gets what failed, what the engine decided and
 * why, as one CliError line (exit code 1), instead of the raw 400 reported as "unexpected".
 */
import type { RequestErrorAction } from '../../engine/facade';
import { CliError } from '../errors';

const WHY: Record<string, string> = {
  'not-overflow': 'it is not a context overflow, so compaction cannot help',
  disabled: 'overflow recovery is turned off',
  'retries-exhausted': 'the overflow retries for this step are used up',
  busy: 'another compaction holds the session',
  'no-progress': 'recovery left the history as it was',
  'summary-failed': 'condensing the history failed',
  stuck: 'nothing can be compacted (the newest step alone is too big)',
  cancelled: 'the request was cancelled',
  internal: 'the engine failed internally',
};

/** `action` is what engine.onRequestError answered (undefined: the demo's own retry cap was hit). */
export function requestFailure(step: number, error: unknown, action: RequestErrorAction | undefined): CliError {
  const message = error instanceof Error ? error.message : String(error);
  if (!action || action.kind === 'retry') {
    return new CliError(`step ${step}: the model request still failed after the engine's recoveries: ${message}`, 1, { cause: error });
  }
  const overflow = action.classification?.kind === 'context-overflow';
  const why = WHY[action.reason] ?? action.reason;
  const detail = action.compactionError ? ` (${action.compactionError.message})` : '';
  const what = overflow ? 'the provider rejected the request as longer than the context window and it could not be recovered' : 'the model request failed';
  return new CliError(`step ${step}: ${what}: ${why}${detail}. The provider said: ${message}`, 1, { cause: error });
}
