/**
 * JsonlStore: one `<id>.jsonl` file per session, one event per line.
 *
 * - A line is committed once its newline is written. A last line without one is a torn
 *   write from a crash: it is reported, kept aside in `<file>.torn-<time>` and cut off
 *   before the next write, never merged with what follows.
 * - Opening only reads. The file changes only when this writer appends, so a session that
 *   fails to open (a corrupt line in the middle) is left exactly as it was.
 * - One writer per file: a `<file>.lock` sidecar names the owning process; a second open
 *   while that process lives fails with `store-locked`. Before every write the file size
 *   must equal what this writer last wrote, so an append by anyone else is detected
 *   (`store-interleaved`) instead of silently interleaving lines.
 * - Appends are queued synchronously and written in order; `flush()` waits for the writes
 *   and an fdatasync.
 */
import { promises as fs, constants as fsc } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { StoreError } from '../errors';
import type { SessionEvent } from '../events';
import { checkSessionId, type LoadReport, type LogWriter, type SessionStore, type StoredLog } from '../store';

export interface JsonlStoreOptions {
  /** fdatasync on flush (default true). Turn off only for throwaway sessions. */
  sync?: boolean;
}

const openInThisProcess = new Set<string>();

function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errnoOf(err) === 'EPERM';
  }
}

export class JsonlStore implements SessionStore {
  readonly dir: string;
  private readonly sync: boolean;

  constructor(dir: string, options: JsonlStoreOptions = {}) {
    this.dir = dir;
    this.sync = options.sync ?? true;
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
    const lockPath = `${file}.lock`;
    await acquireLock(file, lockPath);
    openInThisProcess.add(file);
    try {
      const { records, report, validLength, torn } = await readLog(file);
      const keptAt = `${file}.torn-${new Date().toISOString().replace(/[:.]/g, '-')}`;
      if (report.tornTail) report.tornTail.keptAt = keptAt;
      const writer = new JsonlWriter(file, lockPath, validLength, torn && { bytes: torn, keptAt }, this.sync);
      return { records, report, location: file, writer };
    } catch (err) {
      openInThisProcess.delete(file);
      await fs.unlink(lockPath).catch(() => undefined);
      throw err;
    }
  }
}

async function acquireLock(file: string, lockPath: string): Promise<void> {
  const mine = JSON.stringify({ pid: process.pid, host: hostname(), since: new Date().toISOString() });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await fs.writeFile(lockPath, mine, { flag: 'wx' });
      return;
    } catch (err) {
      if (errnoOf(err) !== 'EEXIST') throw new StoreError('store-io', `cannot create lock ${lockPath}: ${String(err)}`, { file, cause: err });
    }
    let owner: { pid?: number; host?: string } = {};
    try {
      owner = JSON.parse(await fs.readFile(lockPath, 'utf8')) as typeof owner;
    } catch {
      // An unreadable lock is treated like a live one: refusing is safe, guessing is not.
    }
    const sameHost = owner.host === hostname();
    // Our own pid on a lock this process does not hold: left by an earlier life of a process
    // that got the same pid (a restarted container's pid 1, say). Stale.
    const ownStale = sameHost && owner.pid === process.pid && !openInThisProcess.has(file);
    if (!ownStale && (typeof owner.pid !== 'number' || !sameHost || processAlive(owner.pid))) {
      throw new StoreError(
        'store-locked',
        `${file} is locked by ${typeof owner.pid === 'number' ? `process ${owner.pid} on ${owner.host}` : 'an unreadable lock'}: ` +
          `only one writer may append to a session. Close that session, or delete ${lockPath} if its process is gone.`,
        { file },
      );
    }
    // The owner died without closing: its lock is stale and can be taken over.
    await fs.unlink(lockPath).catch(() => undefined);
  }
  throw new StoreError('store-locked', `${file}: lost the race for ${lockPath} to another process.`, { file });
}

async function readLog(file: string): Promise<ParsedLog> {
  let buf: Buffer;
  try {
    buf = await fs.readFile(file);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return { records: [], report: {}, validLength: 0, torn: undefined };
    throw new StoreError('store-io', `cannot read ${file}: ${String(err)}`, { file, cause: err });
  }
  return parseLogBytes(buf, file);
}

export interface ParsedLog {
  records: { line: number; value: unknown }[];
  report: LoadReport;
  /** Bytes up to and including the last newline: the committed part of the file. */
  validLength: number;
  /** The bytes of a torn last line, if any. */
  torn: Buffer | undefined;
}

/**
 * The lines of a session file, by the store's rules: a line is committed once its newline is
 * written, so a last line without one is a torn tail (reported, not parsed); any other line
 * that is not JSON is a StoreError naming the file and line. Pure: reads nothing, writes
 * nothing (tools that inspect a live session use it without taking the writer lock).
 */
export function parseLogBytes(buf: Buffer, file: string): ParsedLog {
  const lastNewline = buf.lastIndexOf(0x0a);
  const validLength = lastNewline + 1;
  const torn = validLength < buf.length ? buf.subarray(validLength) : undefined;
  const text = buf.subarray(0, validLength).toString('utf8');
  const lines = text.length === 0 ? [] : text.slice(0, -1).split('\n');
  const records: { line: number; value: unknown }[] = [];
  for (let i = 0; i < lines.length; i++) {
    try {
      records.push({ line: i + 1, value: JSON.parse(lines[i]!) as unknown });
    } catch (err) {
      throw new StoreError('store-corrupt', `${file}:${i + 1}: not valid JSON (${(err as Error).message}); the file was not changed.`, {
        file,
        line: i + 1,
        cause: err,
      });
    }
  }
  const report: LoadReport = torn ? { tornTail: { line: lines.length + 1, bytes: torn.length } } : {};
  return { records, report, validLength, torn };
}

class JsonlWriter implements LogWriter {
  failure: Error | undefined;
  private queue: string[] = [];
  private draining: Promise<void> | undefined;
  private handle: fs.FileHandle | undefined;
  private closed = false;

  constructor(
    private readonly file: string,
    private readonly lockPath: string,
    private offset: number,
    private torn: { bytes: Buffer; keptAt: string } | undefined,
    private readonly sync: boolean,
  ) {}

  append(event: SessionEvent): void {
    if (this.closed) throw new StoreError('store-closed', `${this.file} was closed; reopen the session to append.`, { file: this.file });
    this.queue.push(`${JSON.stringify(event)}\n`);
    this.draining ??= this.drain();
  }

  async flush(): Promise<void> {
    while (this.draining) await this.draining;
    if (this.failure) throw this.failure;
    if (this.sync && this.handle) {
      try {
        await this.handle.datasync();
      } catch (err) {
        this.fail(new StoreError('store-io', `fdatasync of ${this.file} failed: ${String(err)}`, { file: this.file, cause: err }));
        throw this.failure;
      }
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.flush();
    } finally {
      this.closed = true;
      await this.handle?.close().catch(() => undefined);
      this.handle = undefined;
      openInThisProcess.delete(this.file);
      await fs.unlink(this.lockPath).catch(() => undefined);
    }
  }

  private fail(err: StoreError): void {
    this.failure ??= err;
  }

  private async drain(): Promise<void> {
    // Yield once so a burst of synchronous appends becomes one write.
    await Promise.resolve();
    try {
      while (this.queue.length > 0 && !this.failure) {
        const chunk = Buffer.from(this.queue.join(''), 'utf8');
        this.queue = [];
        const fh = await this.fileHandle();
        const { size } = await fh.stat();
        if (size !== this.offset) {
          this.fail(
            new StoreError(
              'store-interleaved',
              `${this.file} is ${size} bytes but this writer wrote up to byte ${this.offset}: another writer appended to the session. Stopped writing to avoid interleaved lines.`,
              { file: this.file },
            ),
          );
          return;
        }
        let written = 0;
        while (written < chunk.length) {
          const r = await fh.write(chunk, written, chunk.length - written, this.offset + written);
          written += r.bytesWritten;
        }
        this.offset += chunk.length;
      }
    } catch (err) {
      this.fail(err instanceof StoreError ? err : new StoreError('store-io', `write to ${this.file} failed: ${String(err)}`, { file: this.file, cause: err }));
    } finally {
      this.draining = undefined;
      if (this.queue.length > 0 && !this.failure) this.draining = this.drain();
    }
  }

  private async fileHandle(): Promise<fs.FileHandle> {
    if (this.handle) return this.handle;
    const fh = await fs.open(this.file, fsc.O_RDWR | fsc.O_CREAT, 0o644);
    this.handle = fh;
    if (this.torn) {
      // Cut only what we saw at open: bytes appended since then belong to another writer.
      const { size } = await fh.stat();
      if (size !== this.offset + this.torn.bytes.length) {
        throw new StoreError(
          'store-interleaved',
          `${this.file} is ${size} bytes but was ${this.offset + this.torn.bytes.length} when opened: another writer appended to the session. Stopped writing to avoid interleaved lines.`,
          { file: this.file },
        );
      }
      // Keep the torn bytes aside before cutting them off: nothing is thrown away.
      await fs.writeFile(this.torn.keptAt, this.torn.bytes);
      await fh.truncate(this.offset);
      this.torn = undefined;
    }
    return fh;
  }
}
