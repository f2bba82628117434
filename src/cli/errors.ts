/**
 * How the CLI reports a failure: one line on stderr saying what went wrong, why, and what
 * to do; the stack (and the cause chain) only with --verbose.
 */
import { inspect } from 'node:util';
import { XcompactError } from '../errors';

/** A failure the CLI explains itself. `exitCode` 2 = the command line was wrong. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'CliError';
  }
}

/** One line: library errors already say what and how to fix; anything else is unexpected. */
export function errorLine(err: unknown): string {
  if (err instanceof CliError) return oneLine(err.message);
  if (err instanceof XcompactError) return oneLine(err.message);
  const sys = err as NodeJS.ErrnoException;
  if (typeof sys?.code === 'string' && typeof sys.syscall === 'string') {
    // A file-system refusal (EACCES, ENOSPC, EROFS, …): the user's environment, not a bug.
    const what =
      {
        EACCES: 'permission denied',
        EPERM: 'not permitted',
        ENOSPC: 'no space left on the device',
        EROFS: 'read-only file system',
        ENOENT: 'no such file or directory',
      }[sys.code] ?? sys.code;
    return `cannot ${sys.syscall} ${sys.path ?? ''}: ${what}; check the path and its permissions, or choose another location.`.replace(/ :/, ':');
  }
  const message = err instanceof Error ? err.message : String(err);
  return `unexpected error: ${oneLine(message)} (this is a bug in xcompact; run again with --verbose and report the stack trace)`;
}

export function oneLine(text: string): string {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .join(' ');
}

export function reportError(err: unknown, verbose: boolean, write: (s: string) => void): number {
  write(`xcompact: ${errorLine(err)}\n`);
  if (verbose) {
    let e: unknown = err;
    let depth = 0;
    while (e !== undefined && depth < 5) {
      write(`${depth === 0 ? '' : 'caused by: '}${e instanceof Error ? (e.stack ?? e.message) : inspect(e)}\n`);
      e = e instanceof Error ? e.cause : undefined;
      depth++;
    }
  }
  return err instanceof CliError ? err.exitCode : 1;
}
