/**
 * Finds a Chromium for the browser tests on any Linux machine, with nothing installed via apt:
 * `XCOMPACT_CHROMIUM` (the caller's choice), else Debian's `/usr/bin/chromium` if present, else
 * the Chromium shipped inside the npm package `@sparticuz/chromium`, unpacked once into a
 * private folder keyed by the package's version.
 *
 * The package's own `executablePath()` reuses any `$TMPDIR/chromium` without a version check
 * (another project's, or an older release's); a private folder, filled in a staging folder and
 * renamed into place whole, means a concurrent or interrupted unpack is never used half-written.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser } from 'playwright-core';

export const DEBIAN_CHROMIUM = '/usr/bin/chromium';
const NPM_PACKAGE = '@sparticuz/chromium';
const STAGING_PREFIX = '.xcompact-chromium-staging-';
/** An unpack takes seconds; a staging folder this old was left by a process that was killed. */
const ABANDONED_MS = 60 * 60 * 1000;

/**
 * Flags that start Chromium here as root on a closed network: without the background-networking
 * ones it phones home at start and every refused connection is logged. Playwright adds
 * `--headless` and a fresh `--user-data-dir` of its own.
 */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export class ChromiumNotFoundError extends Error {
  readonly code = 'chromium-not-found';
  override readonly name = 'ChromiumNotFoundError';
}

export type ChromiumChoice = { source: 'XCOMPACT_CHROMIUM'; executablePath: string } | { source: 'debian'; executablePath: string } | { source: 'npm' };

/** The lookup order, on its own so that a test can check it without touching the machine. */
export function chooseChromium(env: Readonly<Record<string, string | undefined>>, exists: (path: string) => boolean): ChromiumChoice {
  const chosen = env.XCOMPACT_CHROMIUM;
  if (chosen !== undefined && chosen !== '') {
    // A path the caller named must exist: silently falling back would test another browser.
    if (!exists(chosen)) throw new ChromiumNotFoundError(`XCOMPACT_CHROMIUM names ${chosen}, which does not exist`);
    return { source: 'XCOMPACT_CHROMIUM', executablePath: chosen };
  }
  if (exists(DEBIAN_CHROMIUM)) return { source: 'debian', executablePath: DEBIAN_CHROMIUM };
  return { source: 'npm' };
}

export interface LocatedChromium {
  source: ChromiumChoice['source'];
  executablePath: string;
  /** The environment to launch it with (the bundled libraries / fonts added where needed). */
  env: Record<string, string>;
}

export interface LocateOptions {
  env?: Readonly<Record<string, string | undefined>>;
  exists?: (path: string) => boolean;
  /** Where the npm Chromium is unpacked (a folder per package version inside it); default the temp folder. */
  cacheRoot?: string;
  /** `auto`: the bundled NSS libraries only when the system's are missing; `bundled`: always. */
  libs?: 'auto' | 'bundled';
}

export async function locateChromium(options: LocateOptions = {}): Promise<LocatedChromium> {
  const env = options.env ?? process.env;
  const choice = chooseChromium(env, options.exists ?? existsSync);
  const baseEnv = definedEntries(env);
  if (choice.source !== 'npm') return { ...choice, env: baseEnv };

  const dir = await unpackNpmChromium(options.cacheRoot ?? tmpdir());
  const executablePath = join(dir, 'chromium');
  const launchEnv = { ...baseEnv };
  const bundledLibs = join(dir, 'al2023', 'lib');
  const systemMissing = options.libs === 'bundled' ? null : missingLibraries(executablePath, launchEnv);
  if (systemMissing === null || systemMissing.length > 0) {
    launchEnv.LD_LIBRARY_PATH = [bundledLibs, launchEnv.LD_LIBRARY_PATH].filter(Boolean).join(':');
    const stillMissing = missingLibraries(executablePath, launchEnv);
    if (stillMissing !== null && stillMissing.length > 0) {
      throw new ChromiumNotFoundError(`the npm Chromium at ${executablePath} lacks ${stillMissing.join(', ')} even with its bundled libraries`);
    }
  }
  // Without any fontconfig setup Chromium renders no text; the package brings Open Sans.
  if (!existsSync('/etc/fonts/fonts.conf') && launchEnv.FONTCONFIG_FILE === undefined) launchEnv.FONTCONFIG_FILE = join(dir, 'xcompact-fonts.conf');
  return { source: 'npm', executablePath, env: launchEnv };
}

/** Launches the located Chromium headless with {@link CHROMIUM_ARGS}. */
export async function launchChromium(options: LocateOptions = {}): Promise<{ browser: Browser; located: LocatedChromium }> {
  const located = await locateChromium(options);
  const browser = await chromium.launch({ executablePath: located.executablePath, headless: true, args: CHROMIUM_ARGS, env: located.env });
  return { browser, located };
}

/** The package's version, the key of its private folder. */
export function npmChromiumVersion(): string {
  const require = createRequire(import.meta.url);
  const entry = require.resolve(NPM_PACKAGE);
  // The entry lives in build/cjs/; package.json is two folders up.
  const pkg = JSON.parse(readFileSync(join(dirname(entry), '..', '..', 'package.json'), 'utf8')) as { name: string; version: string };
  if (pkg.name !== NPM_PACKAGE) throw new ChromiumNotFoundError(`expected ${NPM_PACKAGE}'s package.json next to ${entry}`);
  return pkg.version;
}

/** Unpacks the npm Chromium into `<root>/xcompact-chromium-<version>` unless a complete copy is there. */
export async function unpackNpmChromium(root: string): Promise<string> {
  const final = join(root, `xcompact-chromium-${npmChromiumVersion()}`);
  if (existsSync(join(final, 'chromium'))) return final;

  const require = createRequire(import.meta.url);
  const buildDir = dirname(require.resolve(NPM_PACKAGE)); // build/cjs
  const binDir = join(buildDir, '..', '..', 'bin');
  const { default: Chromium } = (await import(pathToFileURL(join(buildDir, '..', 'esm', 'index.js')).href)) as {
    default: { executablePath(input?: string): Promise<string> };
  };
  // `inflate` is exported by the package's lambdafs module, not by its entry point.
  const { inflate } = (await import(pathToFileURL(join(buildDir, '..', 'esm', 'lambdafs.js')).href)) as {
    inflate: (file: string) => Promise<string>;
  };

  removeAbandonedStaging(root);
  const staging = mkdtempSync(join(root, STAGING_PREFIX));
  let unpacking: Promise<string[]>;
  const savedTmp = process.env.TMPDIR;
  // Both functions pick their destination from os.tmpdir() (which reads TMPDIR) synchronously,
  // before their first await: TMPDIR is put back at once, so nothing else sees it changed.
  process.env.TMPDIR = staging;
  try {
    unpacking = Promise.all([Chromium.executablePath(binDir), inflate(join(binDir, 'al2023.tar.br'))]);
  } finally {
    if (savedTmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmp;
  }
  try {
    const [binary, libs] = await unpacking;
    if (binary !== join(staging, 'chromium') || libs !== join(staging, 'al2023')) {
      throw new ChromiumNotFoundError(`${NPM_PACKAGE} unpacked to ${binary} and ${libs}, not into ${staging}`);
    }
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    throw error;
  }
  writeFileSync(
    join(staging, 'xcompact-fonts.conf'),
    `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig><dir>${join(final, 'fonts')}</dir></fontconfig>\n`,
  );
  try {
    renameSync(staging, final);
  } catch (error) {
    // Another process finished first: its copy is complete (it was renamed in whole), use it.
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(join(final, 'chromium'))) throw error;
  }
  return final;
}

/** Each abandoned staging folder holds ~200 MB: clear them, leaving any unpack still under way alone. */
function removeAbandonedStaging(root: string): void {
  for (const name of readdirSync(root)) {
    if (!name.startsWith(STAGING_PREFIX)) continue;
    const path = join(root, name);
    try {
      if (Date.now() - statSync(path).mtimeMs > ABANDONED_MS) rmSync(path, { recursive: true, force: true });
    } catch {
      // Renamed or removed by its own process meanwhile.
    }
  }
}

/**
 * The shared libraries the dynamic loader cannot find for `binary`, per `ldd`; null when ldd
 * itself is unavailable (then the bundled libraries are the safe choice).
 */
export function missingLibraries(binary: string, env: Record<string, string>): string[] | null {
  const run = spawnSync('ldd', [binary], { env, encoding: 'utf8' });
  if (run.error || run.status !== 0) return null;
  return run.stdout
    .split('\n')
    .filter((line) => line.includes('not found'))
    .map((line) => line.trim().split(/\s+/)[0]!);
}

function definedEntries(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
  return out;
}
