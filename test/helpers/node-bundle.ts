/**
 * A TypeScript entry point bundled once into plain JavaScript, for tests that start it as a
 * process many times. Through `node --import tsx` each start costs about 2 s of CPU (tsx's
 * loader hooks compile and resolve the ~200 modules it pulls in); the bundle starts in a
 * fraction of that. The code run is the same: our sources bundled by esbuild (tsx's own
 * compiler), every package left to Node's resolver (`packages: 'external'`), so `pg`, `openai`
 * and the rest are the installed ones. Tests that show how a user runs a script (examples,
 * the CLI) keep tsx.
 *
 * Written under node_modules/.cache (inside the repository, so the externals resolve from
 * its node_modules), one file per entry and process, reused by later calls in the process. A
 * process removes its own at exit, and the first build of a process removes those of processes
 * no longer running (a test worker is often stopped without an exit event).
 */
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const OUT = join(ROOT, 'node_modules', '.cache', 'xcompact-test-bundles');
const built = new Map<string, Promise<string>>();
const written: string[] = [];

/** The path of `entry` bundled as an ES module for Node 20; start it with `node <path>` or `fork(path)`. */
export function nodeBundle(entry: string): Promise<string> {
  const key = resolve(entry);
  let out = built.get(key);
  if (!out) {
    out = (async () => {
      const { build } = await import('esbuild');
      mkdirSync(OUT, { recursive: true });
      const outfile = join(OUT, `${basename(key).replace(/\.[mc]?ts$/, '')}-${process.pid}-${built.size}.mjs`);
      if (written.length === 0) {
        removeOrphans();
        process.once('exit', () => written.forEach((f) => rmSync(f, { force: true })));
      }
      written.push(outfile);
      await build({
        entryPoints: [key],
        outfile,
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20',
        packages: 'external',
        sourcemap: 'inline',
        logLevel: 'silent',
        // Bundled ESM has no `require`; a CommonJS-only package (pg's native fallback) asks for one.
        banner: { js: "import { createRequire as __xcCreateRequire } from 'node:module'; const require = __xcCreateRequire(import.meta.url);" },
      });
      return outfile;
    })();
    built.set(key, out);
  }
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function removeOrphans(): void {
  for (const name of readdirSync(OUT)) {
    const pid = /-(\d+)-\d+\.mjs$/.exec(name)?.[1];
    if (pid !== undefined && Number(pid) !== process.pid && !alive(Number(pid))) rmSync(join(OUT, name), { force: true });
  }
}
