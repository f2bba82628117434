/**
 * Where a session's log lives. A store opens one session at a time per id, hands back the
 * stored lines (not yet checked against the log rules: the Session does that on replay)
 * and a writer that persists appends in order.
 */
import { XcompactError } from '../errors';
import type { SessionEvent } from './events';

export interface LoadReport {
  /** A last line cut short by a crash: dropped (and kept aside by stores that can), never merged. */
  tornTail?: { line: number; bytes: number; keptAt?: string };
  /**
   * Lines from a repeated seq on (two writers appended), left out of the session by a store
   * opened with an explicit repair option, and moved to `keptAt` before the first write.
   * `line` is the first line moved, `firstAt` the line that holds its seq first.
   */
  interleavedTail?: { line: number; seq: number; firstAt: number; lines: number; bytes: number; keptAt: string };
  /**
   * Stored lines whose bytes are not valid UTF-8 (damage on disk, or a foreign writer): read with
   * each bad sequence as U+FFFD, and named here (the first 20 line numbers) instead of silently.
   */
  invalidUtf8?: { lines: number[]; count: number };
  /** The writer lease was taken over from a writer that stopped renewing it (a dead process). */
  leaseTakenOver?: { from: string; expiredAt: string };
  /**
   * A flush of this store whose answer never came (the connection broke, or the server stopped
   * answering, once the rows were sent), resolved by this open: the seqs of its rows that
   * landed (they are in this session) and of those that did not (they are not: append them
   * again if they are still wanted). PostgresStore only.
   */
  unresolvedFlush?: { first: number; last: number; landed: number[]; missing: number[] };
}

export interface StoredLog {
  /** Parsed lines in order. `line` is 1-based, for error messages. */
  readonly records: ReadonlyArray<{ line: number; value: unknown }>;
  readonly report: LoadReport;
  /** Where the records came from, for error messages (a file path, or `memory:<id>`). */
  readonly location: string;
  readonly writer: LogWriter;
  /**
   * Derived state the writer saved for a prefix of this log (see LogWriter.saveSnapshot), handed
   * back only when the store checked that the prefix it was taken on is byte for byte the one
   * stored now; absent otherwise (none, stale, corrupt, or a store that keeps none).
   */
  readonly snapshot?: StoredSnapshot;
}

export interface StoredSnapshot {
  /** Events of the log it describes: the first `events` records. */
  readonly events: number;
  readonly payload: string;
  /**
   * True when those records are, byte for byte, lines a writer stored after this version's
   * log rules (LOG_RULES_VERSION) had accepted them: a replay may skip their shape checks
   * (the rules that rebuild the projections still run).
   */
  readonly checked?: boolean;
}

export interface LogWriter {
  /** Queue one committed event for persistence. Synchronous; order is preserved. */
  append(event: SessionEvent): void;
  /** Resolves when everything appended so far is durable; rejects with the first write error. */
  flush(): Promise<void>;
  /** Flushes, then releases the session for other writers. */
  close(): Promise<void>;
  /** The first write error, once one happened: further appends are refused. */
  readonly failure: Error | undefined;
  /**
   * Saves derived state of the first `events` events (everything appended so far; flushed
   * first), bound to those stored bytes so a reader can tell it is stale. Optional: a store
   * without it keeps no snapshot, and nothing depends on one but speed.
   */
  saveSnapshot?(events: number, payload: string): Promise<void>;
}

export interface SessionStore {
  open(id: string): Promise<StoredLog>;
}

/**
 * Windows device names: a file called `CON`, `nul.jsonl` or `COM1.txt` (any case, any
 * extension) opens the device, not a file, so a session under one would be lost (or hang).
 */
const WINDOWS_RESERVED = /^(?:con|prn|aux|nul|com[1-9]|lpt[1-9])(?:\..*)?$/i;

/** Session ids become file names (on every store alike): keep them to a portable alphabet. */
export function checkSessionId(id: string): void {
  if (typeof id !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(id)) {
    throw new XcompactError(
      'invalid-session-id',
      `session id ${JSON.stringify(id)} is not allowed: use 1-128 characters of letters, digits, '.', '_' or '-', starting with a letter or digit.`,
    );
  }
  if (WINDOWS_RESERVED.test(id)) {
    throw new XcompactError(
      'invalid-session-id',
      `session id ${JSON.stringify(id)} is not allowed: ${id.split('.')[0]!.toUpperCase()} is a reserved device name on Windows (CON, PRN, AUX, NUL, COM1-9, LPT1-9, with or without an extension); choose another id.`,
    );
  }
}
