/**
 * The `xcompact` command in tests, two ways:
 * - `xcompact(args)`: in this process (src/cli/program.ts's runCli, the code the bin runs), with
 *   its own stdout, stderr and environment; its exit code is returned. Cheap: most CLI tests.
 * - `spawnXcompact(args)`: a separate process (`node --import tsx src/cli/main.ts`, the entry
 *   tsup builds into dist/cli/main.js). Seconds per run (tsx compiles the CLI on start): kept for
 *   what only a real process shows (its exit status, what reaches its file descriptors).
 */
import { spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { runCli } from '../../src/cli/program';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CLI = join(ROOT, 'src', 'cli', 'main.ts');

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

type Env = Record<string, string | undefined>;

/** What a user's shell gives the command in these tests: no colours, whatever else is set. */
function testEnv(env: Env): Env {
  return { ...process.env, NO_COLOR: '1', FORCE_COLOR: undefined, ...env };
}

/** A stream that keeps what is written to it (not a TTY, like a pipe). */
export function sink(): NodeJS.WriteStream & { text(): string } {
  let text = '';
  const w = new Writable({
    write(chunk, _enc, done) {
      text += String(chunk);
      done();
    },
  });
  return Object.assign(w, { text: () => text }) as unknown as NodeJS.WriteStream & { text(): string };
}

export async function xcompact(args: string[], env: Env = {}): Promise<Ran> {
  const stdout = sink();
  const stderr = sink();
  const code = await runCli(['node', 'xcompact', ...args], { stdout, stderr, env: testEnv(env) });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

export function spawnXcompact(args: string[], env: Env = {}): Promise<Ran> {
  return spawnTsx(CLI, args, { env });
}

/**
 * A TypeScript entry point (the CLI, an example) run as its own process through tsx, from the
 * repository root, with the tests' environment plus `env` and, when given, `stdin` typed into it.
 */
export function spawnTsx(script: string, args: string[] = [], options: { env?: Env; stdin?: string } = {}): Promise<Ran> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
      cwd: ROOT,
      env: testEnv(options.env ?? {}),
      stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
    if (options.stdin !== undefined) child.stdin!.end(options.stdin);
  });
}
