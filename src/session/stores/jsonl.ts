/**
 * JsonlStore: one `<id>.jsonl` file per session, one event per line.
 *
 * - A line is committed once its newline is written. A last line without one is a torn
 *   write from a crash: it is reported, kept aside in `<file>.torn-<time>` and cut off
 *   before the next write, never merged with what follows.
 * - Opening only reads. The file changes only when this writer appends, so a session that
 *   fails to open (a corrupt line in the middle) is left exactly as it was.
 * - One writer per file: the `<file>.lock` directory names the owning process (see
 *   jsonl-lock.ts: a dead owner's lock is taken over by at most one process); a second open
 *   while that process lives fails with `store-locked`.
 * - Writes never land on another writer's bytes: the file is opened for appending only
 *   (O_APPEND), and the size is checked before and after every write, so a foreign append is
 *   detected (`store-interleaved`) instead of silently interleaving lines. On open, a seq that
 *   repeats an earlier line's (the trace two writers leave) is `store-interleaved` naming the
 *   line, and the file is left as it is; only `repairInterleaved: true` (an explicit choice)
 *   keeps the lines before it and moves the rest aside to `<file>.interleaved-<time>`
 *   before the first write.
 * - Appends are queued synchronously and written in order; `flush()` waits for the writes
 *   and an fdatasync.
 */
import { isUtf8 } from 'node:buffer';
import { promises as fs, constants as fsc } from 'node:fs';
import { dirname, join } from 'node:path';
import { XcompactError } from '../../errors';
import { StoreError } from '../errors';
import type { SessionEvent } from '../events';
import { checkSessionId, type LoadReport, type SessionStore, type StoredLog } from '../store';
import { QueuedWriter } from './queued-writer';
import { acquireLock, errnoOf, releaseLock, type HeldLock } from './jsonl-lock';
import { readSnapshot, writeSnapshot } from './jsonl-snapshot';

export interface JsonlStoreOptions {
  /** fdatasync on flush (default true). Turn off only for throwaway sessions. */
  sync?: boolean;
  /**
   * Open a session whose file repeats a seq (two writers appended to it) instead of refusing:
   * the session is the lines before the first repeat; every line from it on is moved to
   * `<file>.interleaved-<time>` before the first write (as a torn tail is), and
   * `loadReport.interleavedTail` says what moves where. Off by default: which writer's lines
   * to keep is the caller's call.
   */
  repairInterleaved?: boolean;
}

const openInThisProcess = new Set<string>();

export class JsonlStore implements SessionStore {
  readonly dir: string;
  private readonly sync: boolean;
  private readonly repairInterleaved: boolean;

  constructor(dir: string, options: JsonlStoreOptions = {}) {
    if (typeof dir !== 'string' || dir === '') {
      throw new XcompactError(
        'config',
        `JsonlStore needs the directory its session files live in, as a non-empty string; got ${dir === '' ? 'an empty string' : typeof dir}.`,
      );
    }
    this.dir = dir;
    this.sync = options.sync ?? true;
    this.repairInterleaved = options.repairInterleaved ?? false;
  }

  pathOf(id: string): string {
    checkSessionId(id);
    return join(this.dir, `${id}.jsonl`);
  }

  async open(id: string): Promise<StoredLog> {
    const file = this.pathOf(id);
    await fs.mkdir(this.dir, { recursive: true });
    if (openInThisProcess.has(file)) {
      throw new StoreError('store-locked', `${file} is already open in this process: close the other Session first.`, { file });
    }
    // Claimed before the first await, so a second open in this process never races the lock.
    openInThisProcess.add(file);
    let lock: HeldLock | undefined;
    try {
      lock = await acquireLock(file, `${file}.lock`);
      const { records, report, validLength, torn, interleaved, bytes: logBytes } = await readLog(file, this.repairInterleaved);
      const snapshot = logBytes ? await readSnapshot(file, logBytes, validLength, records.length) : undefined;
      const stamp = new Date().toISOString().replace(/[:.]/g, '-');
      // What follows the kept lines is moved aside before the first write, as a torn tail is:
      // a session that then fails to replay leaves the file as it was.
      let cut: { bytes: Buffer; keptAt: string } | undefined;
      if (interleaved) {
        const { line, seq, firstAt, lines, bytes } = interleaved;
        cut = { bytes, keptAt: `${file}.interleaved-${stamp}` };
        report.interleavedTail = { line, seq, firstAt, lines, bytes: bytes.length, keptAt: cut.keptAt };
      } else if (torn && report.tornTail) {
        cut = { bytes: torn, keptAt: `${file}.torn-${stamp}` };
        report.tornTail.keptAt = cut.keptAt;
      }
      const writer = new JsonlWriter(file, lock, validLength, cut, this.sync, logBytes === undefined);
      return { records, report, location: file, writer, ...(snapshot ? { snapshot } : {}) };
    } catch (err) {
      openInThisProcess.delete(file);
      if (lock) await releaseLock(lock);
      throw err;
    }
  }
}

async function readLog(file: string, stopAtRepeatedSeq: boolean): Promise<ParsedLog & { bytes?: Buffer }> {
  let buf: Buffer;
  try {
    buf = await fs.readFile(file);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return { records: [], report: {}, validLength: 0, torn: undefined };
    throw new StoreError('store-io', `cannot read ${file}: ${String(err)}`, { file, cause: err });
  }
  return { ...parseLogBytes(buf, file, { stopAtRepeatedSeq }), bytes: buf };
}

export interface ParsedLog {
  records: { line: number; value: unknown }[];
  report: LoadReport;
  /** Bytes up to and including the last newline: the committed part of the file. */
  validLength: number;
  /** The bytes of a torn last line, if any. */
  torn: Buffer | undefined;
  /**
   * With `stopAtRepeatedSeq`: where the first repeated seq was met. `records` and
   * `validLength` then end before that line; `bytes` is everything from it on.
   */
  interleaved?: { line: number; seq: number; firstAt: number; lines: number; offset: number; bytes: Buffer };
}

/**
 * The lines of a session file, by the store's rules: a line is committed once its newline is
 * written, so a last line without one is a torn tail (reported, not parsed); any other line
 * that is not JSON is a StoreError naming the file and line. Pure: reads nothing, writes
 * nothing (tools that inspect a live session use it without taking the writer lock).
 */
export function parseLogBytes(buf: Buffer, file: string, options: { stopAtRepeatedSeq?: boolean } = {}): ParsedLog {
  const lastNewline = buf.lastIndexOf(0x0a);
  const validLength = lastNewline + 1;
  const torn = validLength < buf.length ? buf.subarray(validLength) : undefined;
  const text = buf.subarray(0, validLength).toString('utf8');
  const lines = text.length === 0 ? [] : text.slice(0, -1).split('\n');
  const records: { line: number; value: unknown }[] = [];
  // A log whose every line so far holds its own position as seq (line i+1, seq i) cannot repeat
  // one: the map of seqs to lines is built only once a line breaks that (a reopen reads 80k lines).
  let lineOfSeq: Map<number, number> | undefined;
  for (let i = 0; i < lines.length; i++) {
    let value: unknown;
    try {
      value = JSON.parse(lines[i]!) as unknown;
    } catch (err) {
      throw new StoreError('store-corrupt', `${file}:${i + 1}: not valid JSON (${(err as Error).message}); the file was not changed.`, {
        file,
        line: i + 1,
        cause: err,
      });
    }
    // Two writers that each believed they owned the file leave the same seq twice.
    const seq = (value as { seq?: unknown } | null)?.seq;
    if (seq === i && lineOfSeq === undefined) {
      records.push({ line: i + 1, value });
      continue;
    }
    if (lineOfSeq === undefined) {
      lineOfSeq = new Map<number, number>();
      for (let j = 0; j < i; j++) lineOfSeq.set(j, j + 1);
    }
    if (typeof seq === 'number') {
      const first = lineOfSeq.get(seq);
      if (first !== undefined) {
        if (options.stopAtRepeatedSeq) {
          const offset = Buffer.byteLength(lines.slice(0, i).join('\n'), 'utf8') + (i > 0 ? 1 : 0);
          const interleaved = { line: i + 1, seq, firstAt: first, lines: lines.length - i + (torn ? 1 : 0), offset, bytes: buf.subarray(offset) };
          return { records, report: {}, validLength: offset, torn: undefined, interleaved };
        }
        throw new StoreError(
          'store-interleaved',
          `${file}:${i + 1}: seq ${seq} again (first at line ${first}): two writers appended to this session; the file was not changed. ` +
            `To keep lines 1-${i} and move the rest aside, open it with JsonlStore option repairInterleaved.`,
          { file, line: i + 1 },
        );
      }
      lineOfSeq.set(seq, i + 1);
    }
    records.push({ line: i + 1, value });
  }
  const report: LoadReport = torn ? { tornTail: { line: lines.length + 1, bytes: torn.length } } : {};
  const invalid = invalidUtf8Lines(buf.subarray(0, validLength));
  if (invalid) report.invalidUtf8 = invalid;
  return { records, report, validLength, torn };
}

/** The lines (1-based) of committed bytes that are not valid UTF-8, the first 20 of them; undefined when all are. */
function invalidUtf8Lines(committed: Buffer): { lines: number[]; count: number } | undefined {
  if (isUtf8(committed)) return undefined; // the fast path: one pass, no copies
  const lines: number[] = [];
  let count = 0;
  let start = 0;
  for (let line = 1; start < committed.length; line++) {
    const end = committed.indexOf(0x0a, start);
    const stop = end === -1 ? committed.length : end;
    if (!isUtf8(committed.subarray(start, stop))) {
      count++;
      if (lines.length < 20) lines.push(line);
    }
    start = stop + 1;
  }
  return { lines, count };
}

class JsonlWriter extends QueuedWriter<string> {
  private handle: fs.FileHandle | undefined;

  constructor(
    private readonly file: string,
    private readonly lock: HeldLock,
    private offset: number,
    /** Bytes after the kept lines (a torn tail, or interleaved lines), moved aside before the first write. */
    private cut: { bytes: Buffer; keptAt: string } | undefined,
    private readonly sync: boolean,
    /** The file did not exist when opened: its directory entry is synced after the first durable flush. */
    private newFile: boolean,
  ) {
    super(file);
  }

  protected encode(event: SessionEvent): string {
    return `${this.json(event)}\n`;
  }

  protected asFailure(err: unknown): StoreError {
    return err instanceof StoreError ? err : new StoreError('store-io', `write to ${this.file} failed: ${String(err)}`, { file: this.file, cause: err });
  }

  protected override async durable(): Promise<void> {
    if (!this.sync || !this.handle) return;
    try {
      await this.handle.datasync();
      // fdatasync makes the bytes durable, not the new name: without this a power loss right
      // after the first acknowledged flush can lose the whole file.
      if (this.newFile) {
        await syncDirectory(dirname(this.file));
        this.newFile = false;
      }
    } catch (err) {
      this.fail(new StoreError('store-io', `fdatasync of ${this.file} failed: ${String(err)}`, { file: this.file, cause: err }));
      throw this.failure;
    }
  }

  protected async release(): Promise<void> {
    await this.handle?.close().catch(() => undefined);
    this.handle = undefined;
    openInThisProcess.delete(this.file);
    const stuck = await releaseLock(this.lock);
    if (stuck) {
      const earlier = this.failure ? ` The writer had stopped before: ${this.failure.message}` : '';
      throw new StoreError(
        'store-io',
        `closing ${this.file}: its lock ${this.lock.lockPath} could not be removed (${String(stuck)}), so other processes get store-locked until this process exits; ` +
          `reopening the session in this process takes the lock back once the file system is writable.${earlier}`,
        { file: this.file, cause: stuck },
      );
    }
  }

  /** Once flushed, the first `offset` bytes hold the `events` lines the snapshot covers (and any appended since). */
  async saveSnapshot(events: number, payload: string): Promise<void> {
    await this.flush();
    await writeSnapshot(this.file, events, this.offset, payload);
  }

  protected async writeBatch(lines: string[]): Promise<void> {
    const chunk = Buffer.from(lines.join(''), 'utf8');
    const fh = await this.fileHandle();
    const { size } = await fh.stat();
    if (size !== this.offset) {
      throw new StoreError(
        'store-interleaved',
        `${this.file} is ${size} bytes but this writer wrote up to byte ${this.offset}: another writer appended to the session. Stopped writing to avoid interleaved lines.`,
        { file: this.file },
      );
    }
    let written = 0;
    while (written < chunk.length) {
      // No position: with O_APPEND every write lands at the end, never on bytes already there.
      const r = await fh.write(chunk, written, chunk.length - written, null);
      written += r.bytesWritten;
    }
    const after = (await fh.stat()).size;
    if (after !== this.offset + chunk.length) {
      // Another writer appended between the check above and this write: both sets of lines
      // are in the file, in some order. Nothing of this chunk is acknowledged.
      throw new StoreError(
        'store-interleaved',
        `${this.file} grew to ${after} bytes while this writer appended ${chunk.length} bytes at byte ${this.offset}: another writer appended at the same time. Stopped writing; reopening the session reports the interleaved line.`,
        { file: this.file },
      );
    }
    this.offset += chunk.length;
  }

  private async fileHandle(): Promise<fs.FileHandle> {
    if (this.handle) return this.handle;
    const fh = await fs.open(this.file, fsc.O_WRONLY | fsc.O_APPEND | fsc.O_CREAT, 0o644);
    this.handle = fh;
    if (this.cut) {
      // Cut only what we saw at open: bytes appended since then belong to another writer.
      const { size } = await fh.stat();
      if (size !== this.offset + this.cut.bytes.length) {
        throw new StoreError(
          'store-interleaved',
          `${this.file} is ${size} bytes but was ${this.offset + this.cut.bytes.length} when opened: another writer appended to the session. Stopped writing to avoid interleaved lines.`,
          { file: this.file },
        );
      }
      // Keep the bytes aside (durably) before cutting them off: nothing is thrown away.
      await keepAside(this.file, this.cut.keptAt, this.cut.bytes);
      await fh.truncate(this.offset);
      this.cut = undefined;
    }
    return fh;
  }
}

/**
 * Writes `bytes` to a new file `keptAt` and syncs it; on failure (a full disk, say) removes
 * what was created, so no empty or partial copy is left, and the log is not cut.
 */
async function keepAside(file: string, keptAt: string, bytes: Buffer): Promise<void> {
  let fh: fs.FileHandle | undefined;
  try {
    fh = await fs.open(keptAt, 'wx', 0o644);
    await fh.writeFile(bytes);
    await fh.sync();
  } catch (err) {
    await fh?.close().catch(() => undefined);
    fh = undefined;
    await fs.unlink(keptAt).catch(() => undefined);
    throw new StoreError(
      'store-io',
      `cannot keep the ${bytes.length} bytes after the last complete line of ${file} aside in ${keptAt}: ${String(err)}. The file was not changed; free some space and append again.`,
      {
        file,
        cause: err,
      },
    );
  } finally {
    await fh?.close().catch(() => undefined);
  }
}

/** fsync of a directory: some file systems cannot (EINVAL and the like), and then there is nothing more to do. */
async function syncDirectory(dir: string): Promise<void> {
  let dh: fs.FileHandle | undefined;
  try {
    dh = await fs.open(dir, 'r');
    await dh.sync();
  } catch (err) {
    const code = errnoOf(err);
    if (code !== 'EINVAL' && code !== 'ENOTSUP' && code !== 'EISDIR' && code !== 'EBADF' && code !== 'EPERM' && code !== 'EACCES') throw err;
  } finally {
    await dh?.close().catch(() => undefined);
  }
}
