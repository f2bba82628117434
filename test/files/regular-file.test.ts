/**
 * A FIFO, a socket, a device or a directory where a file was expected (docs/reliability.md#files-that-are-not-files):
 * every importer's `*File` function and every CLI command that reads a file refuse it with a
 * typed error at once, before opening it (opening a FIFO for reading waits for a writer and
 * holds one of libuv's four pool threads: four of them stalled every later file read of the
 * process). Five FIFO attempts through each entry point, then ordinary reads still work. A file
 * over the size limit is refused with the limit and how to raise it. Real FIFOs (mkfifo), a real
 * unix socket, /dev/zero, a real directory.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileReadError, readRegularFile, readRegularFileSync, MAX_FILE_BYTES_ENV } from '../../src/regular-file';
import { importClaudeCodeFile, importCodexFile, importPiFile, importTranscriptFile, TranscriptImportError, PiImportError } from '../../src/transcripts/index';
import { Session } from '../../src/session/session';
import { CliError } from '../../src/cli/errors';
import { readInput } from '../../src/cli/load';
import { loadConfig } from '../../src/cli/config-file';
import { xcompact } from '../helpers/cli';
import { CLAUDE_REAL } from '../helpers/transcripts';

// Made when the file loads: the cases below are named by these paths.
const dir = mkdtempSync(join(tmpdir(), 'xcompact-kinds-'));
const fifo = join(dir, 'session.jsonl');
execFileSync('mkfifo', [fifo]);
const socketPath = join(dir, 'socket.jsonl');
mkdirSync(join(dir, 'folder.jsonl'));
const regular = join(dir, 'config.json');
writeFileSync(regular, '{}');
let server: Server;

beforeAll(async () => {
  server = createServer();
  await new Promise<void>((r) => server.listen(socketPath, r));
});

afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

const kinds = () =>
  [
    ['a FIFO', fifo, 'not-a-regular-file', 'fifo'],
    ['a unix socket', socketPath, 'not-a-regular-file', 'socket'],
    ['a character device (/dev/zero)', '/dev/zero', 'not-a-regular-file', 'character-device'],
    ['a directory', join(dir, 'folder.jsonl'), 'is-a-directory', 'directory'],
  ] as const;

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => new Error('expected a refusal'),
    (e: unknown) => e,
  );
}

/** Every entry point that reads a file a user names, and what its refusal looks like. */
const ENTRY_POINTS: Array<[string, (path: string) => Promise<unknown>, (err: unknown, reason: string) => void]> = [
  ['readRegularFile', (p) => readRegularFile(p), (e, reason) => expect(e).toMatchObject({ reason })],
  ['readRegularFileSync', async (p) => readRegularFileSync(p), (e, reason) => expect(e).toMatchObject({ reason })],
  ...(
    [
      ['importTranscriptFile', importTranscriptFile],
      ['importClaudeCodeFile', importClaudeCodeFile],
      ['importCodexFile', importCodexFile],
    ] as const
  ).map(([name, fn]): [string, (path: string) => Promise<unknown>, (err: unknown, reason: string) => void] => [
    name,
    (p) => fn(Session.inMemory(), p),
    (e, reason) => {
      expect(e).toBeInstanceOf(TranscriptImportError);
      expect(e).toMatchObject({ code: 'import', fileError: reason });
      expect((e as Error).cause).toBeInstanceOf(FileReadError);
    },
  ]),
  [
    'importPiFile',
    (p) => importPiFile(Session.inMemory(), p),
    (e, reason) => {
      expect(e).toBeInstanceOf(PiImportError);
      expect((e as Error).cause).toMatchObject({ reason });
    },
  ],
  [
    'the CLI reading its input (readInput)',
    (p) => readInput(p),
    (e, reason) => {
      expect(e).toBeInstanceOf(CliError);
      expect((e as Error).cause).toMatchObject({ reason });
    },
  ],
  [
    'the CLI reading --config',
    async (p) => loadConfig(p, regular),
    (e, reason) => {
      expect(e).toBeInstanceOf(CliError);
      expect((e as Error).cause).toMatchObject({ reason });
    },
  ],
];

describe('a file that is not a regular file is refused at once, by every entry point', () => {
  for (const [name, call, check] of ENTRY_POINTS) {
    it.each(kinds().map((k) => [...k]))(`${name}: %s`, async (_label, path, reason, kind) => {
      // Five times: a blocked open would hold a pool thread each time, and four are all there are.
      for (let i = 0; i < 5; i++) {
        const err = await rejection(call(path));
        check(err, reason);
        const cause = err instanceof FileReadError ? err : (err as Error).cause;
        expect(cause).toBeInstanceOf(FileReadError);
        expect(cause).toMatchObject({ kind, path, code: 'not-a-regular-file' });
        expect((err as Error).message).toContain(path);
      }
      // Later reads of the process still work: no pool thread is stuck on the FIFO.
      expect(await readFile(regular, 'utf8')).toBe('{}');
      expect((await importTranscriptFile(Session.inMemory(), CLAUDE_REAL)).harness).toBe('claude-code');
    });
  }

  it.each([['inspect'], ['inspect --recall x'], ['compact'], ['eval']])(
    'xcompact %s <a FIFO> exits 1 naming it, and the next command still reads',
    async (command) => {
      const [name = '', ...rest] = command.split(' ');
      const args = name === 'compact' ? [name, fifo, '--output', join(dir, 'out.jsonl'), ...rest] : [name, fifo, ...rest];
      for (let i = 0; i < 5; i++) {
        const ran = await xcompact(args);
        expect(ran.code).toBe(1);
        expect(ran.stderr).toContain('FIFO');
        expect(ran.stderr).toContain(fifo);
      }
      const ok = await xcompact(['inspect', CLAUDE_REAL]);
      expect(ok.code).toBe(0);
    },
  );
});

describe('a file over the size limit is refused with the limit and how to raise it', () => {
  it('the maxBytes option and $XCOMPACT_MAX_FILE_BYTES set the limit; the importers and the CLI honour it', async () => {
    const big = join(dir, 'big.jsonl');
    writeFileSync(big, readFileSync(CLAUDE_REAL));
    const size = readFileSync(big).length;
    const err = await rejection(readRegularFile(big, { maxBytes: size - 1 }));
    expect(err).toMatchObject({ code: 'file-too-large', reason: 'too-large', size, limit: size - 1 });
    expect((err as Error).message).toContain(MAX_FILE_BYTES_ENV);
    expect((await readRegularFile(big, { maxBytes: size })).length).toBe(size);
    const before = process.env[MAX_FILE_BYTES_ENV];
    process.env[MAX_FILE_BYTES_ENV] = String(size - 1);
    try {
      expect(await rejection(importTranscriptFile(Session.inMemory(), big))).toMatchObject({ fileError: 'too-large' });
      expect(((await rejection(readInput(big))) as Error).message).toMatch(/over the .* limit\. Raise it with \$XCOMPACT_MAX_FILE_BYTES/);
      process.env[MAX_FILE_BYTES_ENV] = 'lots';
      expect(await rejection(readRegularFile(big))).toMatchObject({ code: 'config' });
    } finally {
      if (before === undefined) delete process.env[MAX_FILE_BYTES_ENV];
      else process.env[MAX_FILE_BYTES_ENV] = before;
    }
    expect((await importTranscriptFile(Session.inMemory(), big)).harness).toBe('claude-code');
  });
});
