import { XcompactError } from '../errors';

/**
 * A rejected append. `rule` names the log rule that was broken; the session is unchanged.
 */
export class SessionRuleError extends XcompactError {
  readonly rule: string;

  constructor(rule: string, message: string) {
    super('session-rule', `${message} [rule: ${rule}]`);
    this.rule = rule;
  }
}

export type StoreErrorCode =
  | 'store-corrupt' // a line that is not valid JSON or breaks a log rule before the last line
  | 'store-locked' // another live writer holds the session file
  | 'store-interleaved' // the file changed under us: someone else appended
  | 'store-io' // the file system refused a read or a write
  | 'store-closed' // an append after close()
  | 'store-conflict' // another writer took the session (a seq already stored, or the writer lease taken over): reload
  | 'store-read-only' // an append to a session opened without a writer lease
  | 'store-unreachable' // the database server (or database) cannot be reached
  | 'store-auth' // the database refused the credentials
  | 'store-schema' // the stored schema is newer than this version understands
  | 'store-driver-missing'; // PostgresStore without the optional `pg` package installed

export class StoreError extends XcompactError {
  readonly file: string | undefined;
  readonly line: number | undefined;

  constructor(code: StoreErrorCode, message: string, where?: { file?: string; line?: number; cause?: unknown }) {
    super(code, message, where?.cause === undefined ? undefined : { cause: where.cause });
    this.file = where?.file;
    this.line = where?.line;
  }
}
