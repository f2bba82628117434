/**
 * Reading a file a user named (a transcript to import, a session to inspect, a config): only a
 * regular file, and only up to a size limit, checked before anything reads it. Opening a FIFO
 * for reading waits for a writer, and each such wait holds one of libuv's four pool threads:
 * four of them stall every later file read of the process. A socket, a device (`/dev/zero` never
 * ends) or a directory is no transcript either. So the kind and the size are read with stat()
 * (which never opens), and the file is then opened non-blocking and checked again on the open
 * handle, so a path swapped for a FIFO in between is refused too, never waited on.
 *
 * The one place every importer's `*File` function and every CLI command that reads a file go
 * through (src/transcripts/common.ts, src/transcripts/pi.ts, src/cli/load.ts, src/cli/config-file.ts).
 */
import { closeSync, constants, fstatSync, openSync, readFileSync, statSync, type Stats } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { XcompactError } from './errors';

/** Default largest file read: 256 MiB (a longer text would not fit in one JavaScript string once decoded). */
export const DEFAULT_MAX_FILE_BYTES = 256 * 1024 * 1024;
/** Environment variable that raises (or lowers) the default, in bytes. */
export const MAX_FILE_BYTES_ENV = 'XCOMPACT_MAX_FILE_BYTES';

/** What a path named instead of a regular file. */
export type FileKind = 'directory' | 'fifo' | 'socket' | 'character-device' | 'block-device' | 'other';

/** Why a file could not be read. */
export type FileReadReason = 'not-found' | 'permission-denied' | 'is-a-directory' | 'not-a-regular-file' | 'too-large' | 'unreadable';

const KIND_WORDS: Record<FileKind, string> = {
  directory: 'a directory',
  fifo: 'a FIFO (named pipe): reading it would wait for a writer',
  socket: 'a socket',
  'character-device': 'a character device',
  'block-device': 'a block device',
  other: 'not a regular file',
};

/** A file that was not read: `reason` says why (and `kind`, `size`, `limit` when they apply). Nothing was read or changed. */
export class FileReadError extends XcompactError {
  readonly path: string;
  readonly reason: FileReadReason;
  readonly kind: FileKind | undefined;
  readonly size: number | undefined;
  readonly limit: number | undefined;
  constructor(path: string, reason: FileReadReason, message: string, extra: { kind?: FileKind; size?: number; limit?: number; cause?: unknown } = {}) {
    super(
      reason === 'too-large' ? 'file-too-large' : reason === 'not-a-regular-file' || reason === 'is-a-directory' ? 'not-a-regular-file' : 'file-unreadable',
      message,
      {
        cause: extra.cause,
      },
    );
    this.path = path;
    this.reason = reason;
    this.kind = extra.kind;
    this.size = extra.size;
    this.limit = extra.limit;
  }
}

export interface ReadFileOptions {
  /** Largest file read, in bytes (default: $XCOMPACT_MAX_FILE_BYTES, else DEFAULT_MAX_FILE_BYTES). */
  maxBytes?: number;
}

function limitOf(options: ReadFileOptions): number {
  const raw = options.maxBytes ?? process.env[MAX_FILE_BYTES_ENV];
  if (raw === undefined || raw === '') return DEFAULT_MAX_FILE_BYTES;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) {
    const from = options.maxBytes !== undefined ? 'the maxBytes option' : `$${MAX_FILE_BYTES_ENV}`;
    throw new XcompactError('config', `${from} must be a whole number of bytes ≥ 1; got ${JSON.stringify(raw)}.`);
  }
  return n;
}

function kindOf(info: Stats): FileKind {
  if (info.isDirectory()) return 'directory';
  if (info.isFIFO()) return 'fifo';
  if (info.isSocket()) return 'socket';
  if (info.isCharacterDevice()) return 'character-device';
  if (info.isBlockDevice()) return 'block-device';
  return 'other';
}

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(n < 1024 * 1024 ? 3 : 1)} MiB`;

/** Refuses anything but a regular file within the limit. */
function check(path: string, info: Stats, limit: number): void {
  if (!info.isFile()) {
    const kind = kindOf(info);
    throw new FileReadError(
      path,
      kind === 'directory' ? 'is-a-directory' : 'not-a-regular-file',
      `cannot read ${path}: it is ${KIND_WORDS[kind]}, not a regular file. Pass the path of a file (a transcript or session .jsonl); nothing was read.`,
      { kind },
    );
  }
  if (info.size > limit) {
    throw new FileReadError(
      path,
      'too-large',
      `cannot read ${path}: it is ${mib(info.size)} (${info.size} bytes), over the ${mib(limit)} limit. Raise it with $${MAX_FILE_BYTES_ENV}=<bytes> (or the maxBytes option); nothing was read.`,
      { size: info.size, limit },
    );
  }
}

function fromErrno(path: string, err: unknown): FileReadError {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT' || code === 'ENOTDIR')
    return new FileReadError(path, 'not-found', `cannot read ${path}: no such file; check the path (relative paths start from ${process.cwd()}).`, {
      cause: err,
    });
  if (code === 'EACCES' || code === 'EPERM')
    return new FileReadError(path, 'permission-denied', `cannot read ${path}: permission denied; check the file's permissions.`, { cause: err });
  if (code === 'EISDIR')
    return new FileReadError(path, 'is-a-directory', `cannot read ${path}: it is a directory, not a regular file.`, { kind: 'directory', cause: err });
  return new FileReadError(path, 'unreadable', `cannot read ${path}: ${(err as Error).message}.`, { cause: err });
}

// Non-blocking, so an open that meets a FIFO returns at once (and the check on the handle refuses it).
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0);

/** The bytes of a regular file within the size limit; anything else is a FileReadError, at once. */
export async function readRegularFile(path: string, options: ReadFileOptions = {}): Promise<Buffer> {
  const limit = limitOf(options);
  try {
    check(path, await stat(path), limit);
    const handle = await open(path, OPEN_FLAGS);
    try {
      check(path, await handle.stat(), limit);
      return await handle.readFile();
    } finally {
      await handle.close();
    }
  } catch (err) {
    throw err instanceof FileReadError ? err : fromErrno(path, err);
  }
}

/** readRegularFile for synchronous code (the CLI's config file). */
export function readRegularFileSync(path: string, options: ReadFileOptions = {}): Buffer {
  const limit = limitOf(options);
  try {
    check(path, statSync(path), limit);
    const fd = openSync(path, OPEN_FLAGS);
    try {
      check(path, fstatSync(fd), limit);
      return readFileSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    throw err instanceof FileReadError ? err : fromErrno(path, err);
  }
}
