/** The error a failed compaction is reported with (docs/spec.md#9-manual-compaction-compact's stable codes). */
import { XcompactError } from '../../errors';
import type { CompactionErrorCode, ErrorInfo } from './contracts';

/** A failed compaction, with the stable code of docs/spec.md#9-manual-compaction-compact. */
export class CompactionError extends XcompactError {
  declare readonly code: CompactionErrorCode;
  /** The underlying service error's code, e.g. 'summary-truncated'. */
  readonly causeCode: string | undefined;

  /** `cause` is the service error behind it (a SummarizerError, with the SDK error inside), when known. */
  constructor(info: ErrorInfo, cause?: unknown) {
    super(info.code, info.message, cause === undefined ? undefined : { cause });
    this.causeCode = info.cause;
  }
}
