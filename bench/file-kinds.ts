/**
 * How long a refusal takes (docs/reliability.md#files-that-are-not-files): a FIFO, a unix
 * socket, /dev/zero and a directory through every importer's `*File` function and the CLI's
 * input read, five times each, then an ordinary file read of the same process. Before the
 * file-kind check, a FIFO never returned and four of them stalled every later read.
 *
 *   npx tsx bench/file-kinds.ts
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readInput } from '../src/cli/load';
import { Session } from '../src/session/session';
import { importClaudeCodeFile, importCodexFile, importPiFile, importTranscriptFile } from '../src/transcripts/index';

const dir = mkdtempSync(join(tmpdir(), 'xcompact-kinds-bench-'));
const fifo = join(dir, 'fifo.jsonl');
execFileSync('mkfifo', [fifo]);
const sock = join(dir, 'socket.jsonl');
const server = createServer();
await new Promise<void>((r) => server.listen(sock, r));
mkdirSync(join(dir, 'dir.jsonl'));
const plain = join(dir, 'plain.txt');
writeFileSync(plain, 'ok');

const entries: Array<[string, (p: string) => Promise<unknown>]> = [
  ['importTranscriptFile', (p) => importTranscriptFile(Session.inMemory(), p)],
  ['importClaudeCodeFile', (p) => importClaudeCodeFile(Session.inMemory(), p)],
  ['importCodexFile', (p) => importCodexFile(Session.inMemory(), p)],
  ['importPiFile', (p) => importPiFile(Session.inMemory(), p)],
  ['CLI readInput', (p) => readInput(p)],
];
const kinds: Array<[string, string]> = [
  ['FIFO', fifo],
  ['socket', sock],
  ['/dev/zero', '/dev/zero'],
  ['directory', join(dir, 'dir.jsonl')],
];

console.log('| entry point | kind | 5 refusals, slowest (ms) | error |');
console.log('|---|---|---|---|');
for (const [name, fn] of entries) {
  for (const [kind, path] of kinds) {
    let slowest = 0;
    let code = '';
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      try {
        await fn(path);
        code = 'READ (not refused!)';
      } catch (err) {
        const e = err as { code?: string; fileError?: string; cause?: { reason?: string } };
        code = `${e.code ?? 'CliError'} / ${e.fileError ?? e.cause?.reason ?? ''}`;
      }
      slowest = Math.max(slowest, performance.now() - t);
    }
    console.log(`| ${name} | ${kind} | ${slowest.toFixed(2)} | ${code} |`);
  }
}
const t = performance.now();
await readFile(plain, 'utf8');
console.log(`\nan ordinary read after the ${entries.length * kinds.length * 5} refusals: ${(performance.now() - t).toFixed(2)} ms`);
server.close();
rmSync(dir, { recursive: true, force: true });
