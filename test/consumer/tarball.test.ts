/**
 * xcompact as a user gets it: `npm pack`, installed from the tarball into a fresh project in
 * the temp folder (outside this repository, so nothing resolves to its sources or its
 * node_modules), then every entry of package.json `exports` loaded with `import` and with
 * `require`, their types compiled, and the `xcompact` bin run. Catches files missing from the
 * tarball, broken `exports`, and runtime imports of packages that are only devDependencies.
 *
 * `npm pack` builds the package first (package.json `prepack`), so this needs nothing built
 * beforehand, as on a fresh clone. Not part of `npm test`: it builds, packs and installs, ~1–2 min.
 */
import { execFile, type ExecFileOptions } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

interface PackageJson {
  name: string;
  bin?: Record<string, string>;
  exports: Record<string, unknown>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageJson;

/** Every importable entry: `exports` keys except package.json, as specifiers (`xcompact`, `xcompact/testing`, …). */
const entries = Object.keys(pkg.exports)
  .filter((k) => k !== './package.json')
  .map((k) => (k === '.' ? pkg.name : `${pkg.name}/${k.slice(2)}`));

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** A child process with a user's environment: none of the `npm_*` variables of the `npm test` that runs us. */
function run(cmd: string, args: string[], cwd: string, timeout = 240_000): Promise<Ran> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) && k !== 'INIT_CWD' && k !== 'NODE_OPTIONS'));
  const opts: ExecFileOptions = { cwd, env: { ...env, NO_COLOR: '1' }, timeout, maxBuffer: 64 * 1024 * 1024 };
  return new Promise((done) => {
    execFile(cmd, args, opts, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      done({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

const NPM_INSTALL = ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];

let work: string;
let project: string;
let tarball: string;
/** What `npm pack` reported: the tarball's size in bytes and its files. */
let packedSize = 0;
let packedFiles: string[] = [];
/** Whether installing the tarball alone brought `pg` (it must not: an optional peer). */
let pgInstalledByDefault = false;
/** Optional peers the entries needed, installed at the versions this repo tests with. */
const peersInstalled: string[] = [];

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'xcompact-consumer-'));
  const packed = await run('npm', ['pack', '--json', '--pack-destination', work], ROOT, 600_000);
  expect(packed.code, packed.stderr).toBe(0);
  // The build's own output comes first on stdout (prepack); npm's report is the JSON array after it.
  const report = (
    JSON.parse(packed.stdout.slice(packed.stdout.lastIndexOf('\n[\n') + 1)) as Array<{ filename: string; size: number; files: Array<{ path: string }> }>
  )[0]!;
  tarball = join(work, report.filename);
  packedSize = report.size;
  packedFiles = report.files.map((f) => f.path);
  project = join(work, 'app');
  await run('mkdir', ['-p', project], work);
  writeFileSync(join(project, 'package.json'), `${JSON.stringify({ name: 'consumer-app', version: '1.0.0', private: true }, null, 2)}\n`);
  // What a user types: the tarball alone; npm adds the required peers (openai) itself.
  const installed = await run('npm', [...NPM_INSTALL, tarball], project);
  expect(installed.code, installed.stderr).toBe(0);
  pgInstalledByDefault = existsSync(join(project, 'node_modules', 'pg'));
}, 300_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Loads every entry both ways in a process of the consumer project; reports what loaded or which package was missing. */
async function loadEntries(): Promise<
  Record<string, { esm: string[] | { missing?: string; error?: string }; cjs: string[] | { missing?: string; error?: string } }>
> {
  const script = `
const { createRequire } = require('node:module');
const requireHere = createRequire(__filename);
const entries = ${JSON.stringify(entries)};
const missingOf = (e) => {
  const m = /Cannot find (?:package|module) '([^']+)'/.exec(String(e && e.message));
  if (!m) return undefined;
  const parts = m[1].split('/');
  return m[1].startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
};
const outcome = (e) => (missingOf(e) ? { missing: missingOf(e) } : { error: String(e && e.stack || e) });
(async () => {
  const out = {};
  for (const spec of entries) {
    out[spec] = {};
    try { out[spec].esm = Object.keys(await import(spec)).sort(); } catch (e) { out[spec].esm = outcome(e); }
    try { out[spec].cjs = Object.keys(requireHere(spec)).sort(); } catch (e) { out[spec].cjs = outcome(e); }
  }
  process.stdout.write(JSON.stringify(out));
})();
`;
  writeFileSync(join(project, 'load-entries.cjs'), script);
  const r = await run(process.execPath, ['load-entries.cjs'], project, 60_000);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Awaited<ReturnType<typeof loadEntries>>;
}

describe(`${pkg.name} installed from its packed tarball`, { timeout: 300_000 }, () => {
  it('packs the whole package: npm pack builds it first (prepack)', () => {
    for (const f of ['dist/index.js', 'dist/index.cjs', 'dist/index-full.js', 'dist/index-full.cjs', 'dist/index.d.ts', 'dist/index.d.cts'])
      expect(packedFiles, f).toContain(f);
    for (const bin of Object.values(pkg.bin ?? {})) expect(packedFiles).toContain(bin.replace(/^\.\//, ''));
    for (const spec of entries.filter((e) => e !== pkg.name)) expect(packedFiles).toContain(`dist/${spec.slice(pkg.name.length + 1)}.js`);
  });

  it('finds the entries to check in package.json exports', () => {
    expect(entries).toContain(pkg.name);
    expect(entries).toContain(`${pkg.name}/testing`);
  });

  it('loads every entry with import and with require, with the same exports both ways', async () => {
    let loaded = await loadEntries();
    // An entry may need an optional peer (an adapter's SDK): it may be missing only if it is
    // declared as one; install it at the version this repo tests with, and load again.
    for (let round = 0; round < 10; round++) {
      const needed = new Set<string>();
      for (const [spec, r] of Object.entries(loaded)) {
        for (const side of [r.esm, r.cjs]) {
          if (Array.isArray(side) || !side.missing) continue;
          const peer = side.missing;
          expect(pkg.peerDependencies?.[peer], `${spec} imports "${peer}", which is neither a dependency nor a declared peer`).toBeDefined();
          expect(pkg.peerDependenciesMeta?.[peer]?.optional, `${spec} needs the required peer "${peer}", which npm should have installed`).toBe(true);
          needed.add(peer);
        }
      }
      if (needed.size === 0) break;
      const specs = [...needed].map((p) => `${p}@${pkg.devDependencies?.[p] ?? pkg.peerDependencies![p]!}`);
      const r = await run('npm', [...NPM_INSTALL, ...specs], project);
      expect(r.code, r.stderr).toBe(0);
      peersInstalled.push(...specs);
      loaded = await loadEntries();
    }
    for (const spec of entries) {
      const r = loaded[spec]!;
      expect(r.esm, `import('${spec}')`).toBeInstanceOf(Array);
      expect(r.cjs, `require('${spec}')`).toBeInstanceOf(Array);
      expect((r.esm as string[]).length, `${spec} exports something`).toBeGreaterThan(0);
      // CJS adds `default`/`module.exports` only where ESM interop does; compare the named ones.
      const named = (names: string[]) => names.filter((n) => n !== 'default' && n !== 'module.exports');
      expect(named(r.cjs as string[]), `${spec}: require and import export the same names`).toEqual(named(r.esm as string[]));
    }
  });

  it('compiles a TypeScript file that imports every entry, as ESM and as CommonJS', async () => {
    const esm = entries.map((s, i) => `import * as e${i} from '${s}';\nexport const n${i}: number = Object.keys(e${i}).length;`).join('\n');
    const cjs = entries.map((s, i) => `import e${i} = require('${s}');\nexport const n${i}: number = Object.keys(e${i}).length;`).join('\n');
    writeFileSync(join(project, 'check-esm.mts'), `${esm}\n`);
    writeFileSync(join(project, 'check-cjs.cts'), `${cjs}\n`);
    const tsconfig = {
      compilerOptions: {
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        strict: true,
        noEmit: true,
        // The shipped declarations are checked too: one that names a package the user does not
        // have (a devDependency only) fails here.
        skipLibCheck: false,
        types: ['node'],
        typeRoots: [join(ROOT, 'node_modules', '@types')],
      },
      files: ['check-esm.mts', 'check-cjs.cts'],
    };
    writeFileSync(join(project, 'tsconfig.json'), `${JSON.stringify(tsconfig, null, 2)}\n`);
    const r = await run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], project, 180_000);
    // Errors inside another package's declarations (a peer's own loose typings) are that
    // package's business; ours and the check files must be clean. An error with no location
    // (a broken tsconfig) counts too.
    const errors = `${r.stdout}\n${r.stderr}`.split('\n').filter((l) => /error TS\d+/.test(l));
    const ours = errors.filter((l) => !l.startsWith('node_modules/') || l.startsWith(`node_modules/${pkg.name}/`));
    expect(ours, errors.join('\n')).toEqual([]);
    expect(r.code === 0 || errors.length > 0, `${r.stdout}\n${r.stderr}`).toBe(true);
  });

  it('runs `npx xcompact --help`', async () => {
    const r = await run('npx', ['--no-install', 'xcompact', '--help'], project, 60_000);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/Usage: xcompact/);
    for (const command of ['demo', 'inspect', 'compact']) expect(r.stdout).toContain(command);
  });

  it('runs a short `xcompact demo --quiet` and its session inspects', async () => {
    // 5 steps: too short for the scripted overflow (the table says so), long
    // enough for the manual /compact between its two turns.
    const r = await run('npx', ['--no-install', 'xcompact', 'demo', '--quiet', '--steps', '5', '--out', 'demo-out'], project, 120_000);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/steps\s+5 in 2 turns/);
    expect(r.stdout).toMatch(/compactions\s+1 \(1 manual\)/);
    expect(r.stdout).toMatch(/overflow recovery\s+not staged/);
    expect(existsSync(join(project, 'demo-out', 'demo.jsonl'))).toBe(true);
    const inspected = await run('npx', ['--no-install', 'xcompact', 'inspect', 'demo-out/demo.jsonl', '--json'], project, 60_000);
    expect(inspected.code, inspected.stderr).toBe(0);
    expect(() => JSON.parse(inspected.stdout) as unknown).not.toThrow();
  });
});

describe(`${pkg.name}: a light package`, { timeout: 300_000 }, () => {
  it('packs to at most 700 KB, without source maps', () => {
    console.log(`packed size: ${(packedSize / 1024).toFixed(0)} KB, ${packedFiles.length} files`);
    expect(packedSize).toBeLessThanOrEqual(700 * 1024);
    expect(packedFiles.filter((f) => f.endsWith('.map'))).toEqual([]);
    // The bin shares the library's chunks: it is not a second copy of the library.
    expect(readFileSync(join(ROOT, 'dist', 'cli', 'main.js'), 'utf8')).toMatch(/from "\.\.\/chunk-[\w-]+\.js"/);
  });

  it('does not install pg for everyone (an optional peer)', () => {
    expect(pkg.peerDependenciesMeta?.['pg']?.optional).toBe(true);
    expect(pgInstalledByDefault).toBe(false);
  });

  it('importing xcompact loads neither openai nor pg: it works with both unresolvable (import and require)', async () => {
    const openai = join(project, 'node_modules', 'openai');
    const aside = join(project, 'node_modules', 'openai.aside');
    const pgDir = join(project, 'node_modules', 'pg');
    const pgAside = join(project, 'node_modules', 'pg.aside');
    const script = `
const t0 = performance.now();
const cjs = require('xcompact');
const t1 = performance.now();
import('xcompact').then((esm) => {
  let openaiMissing = false;
  try { require.resolve('openai'); } catch { openaiMissing = true; }
  process.stdout.write(JSON.stringify({ openaiMissing, cjs: typeof cjs.withCompaction, esm: typeof esm.withCompaction, requireMs: Math.round(t1 - t0), rssMB: Math.round(process.memoryUsage().rss / 1048576) }));
});
`;
    writeFileSync(join(project, 'import-only.cjs'), script);
    const { renameSync } = await import('node:fs');
    renameSync(openai, aside);
    const hadPg = existsSync(pgDir);
    if (hadPg) renameSync(pgDir, pgAside);
    try {
      const r = await run(process.execPath, ['import-only.cjs'], project, 60_000);
      expect(r.code, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout) as { openaiMissing: boolean; cjs: string; esm: string; requireMs: number; rssMB: number };
      console.log(`require('xcompact') without openai: ${out.requireMs} ms, RSS ${out.rssMB} MB`);
      expect(out).toMatchObject({ openaiMissing: true, cjs: 'function', esm: 'function' });
    } finally {
      renameSync(aside, openai);
      if (hadPg) renameSync(pgAside, pgDir);
    }
  });

  it('requiring xcompact loads none of the library (no zod, no xstate) until an export is first used', async () => {
    const script = `
const loaded = () => Object.keys(require.cache).filter((f) => /[\\\\/]node_modules[\\\\/](zod|xstate)[\\\\/]/.test(f)).length;
const x = require('xcompact');
const before = loaded();
const session = x.Session.inMemory('s');
process.stdout.write(JSON.stringify({ before, after: loaded(), isSession: session instanceof x.Session }));
`;
    writeFileSync(join(project, 'lazy-root.cjs'), script);
    const r = await run(process.execPath, ['lazy-root.cjs'], project, 60_000);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { before: number; after: number; isSession: boolean };
    expect(out.before).toBe(0);
    expect(out.after).toBeGreaterThan(0);
    expect(out.isSession).toBe(true);
  });

  it('PostgresStore without pg fails with a typed error naming `npm i pg`', async () => {
    const pgDir = join(project, 'node_modules', 'pg');
    const pgAside = join(project, 'node_modules', 'pg.aside');
    const hadPg = existsSync(pgDir);
    const { renameSync } = await import('node:fs');
    if (hadPg) renameSync(pgDir, pgAside);
    writeFileSync(
      join(project, 'pg-missing.mjs'),
      `import { PostgresStore, Session } from 'xcompact';
try { await Session.open(new PostgresStore({ url: 'postgres://u@127.0.0.1:1/db' }), 's'); console.log('opened?'); }
catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code, message: e.message })); }
`,
    );
    try {
      const r = await run(process.execPath, ['pg-missing.mjs'], project, 60_000);
      expect(r.code, r.stderr).toBe(0);
      const e = JSON.parse(r.stdout) as { name: string; code: string; message: string };
      expect(e).toMatchObject({ name: 'StoreError', code: 'store-driver-missing' });
      expect(e.message).toContain('npm i pg');
    } finally {
      if (hadPg) renameSync(pgAside, pgDir);
    }
  });

  it('runs examples/openai-drop-in.ts in the fresh project, as ESM and as CommonJS; the second run continues the session', async () => {
    // The example as a user copies it: imports from the package, compiled to .mjs and .cjs.
    const esbuild = (await import('esbuild')) as typeof import('esbuild');
    const fromPackage = (source: string) =>
      source
        .replace(/from '\.\.\/src\/index'/g, "from 'xcompact'")
        .replace(/from '\.\.\/src\/testing\/index'/g, "from 'xcompact/testing'")
        .replace(/from '\.\/local-model'/g, "from './local-model.js'");
    for (const format of ['esm', 'cjs'] as const) {
      const ext = format === 'esm' ? 'mjs' : 'cjs';
      const dirOut = join(project, `drop-in-${format}`);
      await run('mkdir', ['-p', dirOut], project);
      for (const file of ['openai-drop-in', 'local-model']) {
        const source = fromPackage(readFileSync(join(ROOT, 'examples', `${file}.ts`), 'utf8'));
        const out = await esbuild.transform(source, { loader: 'ts', format, target: 'node20' });
        writeFileSync(join(dirOut, `${file}.${ext}`), out.code.replace(/\.\/local-model\.js/g, `./local-model.${ext}`));
      }
      writeFileSync(join(dirOut, 'package.json'), JSON.stringify({ type: format === 'esm' ? 'module' : 'commonjs' }));
    }
    const env: NodeJS.ProcessEnv = { ...process.env, SESSION_DIR: join(project, 'sessions') };
    delete env['OPENAI_BASE_URL']; // the example's own local model
    const runExample = (format: 'esm' | 'cjs', args: string[] = []) =>
      new Promise<Ran>((done) => {
        execFile(
          process.execPath,
          [`drop-in-${format}/openai-drop-in.${format === 'esm' ? 'mjs' : 'cjs'}`, ...args],
          { cwd: project, env, timeout: 120_000 },
          (err, stdout, stderr) => done({ code: err ? 1 : 0, stdout: String(stdout), stderr: String(stderr) }),
        );
      });
    const esm = await runExample('esm');
    expect(esm.code, esm.stderr).toBe(0);
    expect(esm.stdout).toContain('I looked up 12 topics; the answer is in topic 12.');
    expect(esm.stdout).toContain('1 overflow recovered');
    const cjs = await runExample('cjs', ['And again?']);
    expect(cjs.code, cjs.stderr).toBe(0);
    expect(cjs.stdout).toMatch(/continuing a conversation of \d+ messages/);
    expect(cjs.stdout).toContain('I looked up 12 topics');
  });

  it('xcompact/testing from the package checks a user loop under node --test: the drop-in loop passes every scenario, the same loop dropping its tool results fails', async () => {
    // The loop as a user writes it (plain JavaScript, imports from the package), run by the test
    // runner every Node has: one line per scenario from node --test's TAP output.
    const loop = (drops: boolean) => `
import { test } from 'node:test';
import OpenAI from 'openai';
import { Session, withCompaction } from 'xcompact';
import { assertLoop, checkLoop, loopScenarios } from 'xcompact/testing';

async function myLoop(ctx) {
  const session = await Session.open(ctx.store, ctx.sessionId);
  const client = withCompaction(new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 }), {
    session, provider: ctx.provider, models: ctx.models, config: ctx.config,
  });
  const messages = client.compaction.messages();
  if (messages.length === 0) messages.push({ role: 'system', content: 'You are a careful agent.' });
  try {
    for (const turn of ctx.turns) {
      messages.push({ role: 'user', content: turn });
      for (let step = 0; step < 10; step++) {
        const reply = await client.chat.completions.create({ model: ctx.model, messages, tools: [...ctx.tools], max_tokens: ctx.maxOutputTokens }, { signal: ctx.signal });
        const message = reply.choices[0].message;
        messages.push(message);
        if (!message.tool_calls?.length) break;
        for (const call of message.tool_calls) {
          const content = await ctx.runTool(call.function.name, call.function.arguments);
          ${drops ? '// (the bug: the result is never pushed)' : "messages.push({ role: 'tool', tool_call_id: call.id, content });"}
        }
      }
    }
  } finally {
    await client.compaction.close({ session: true }).catch(() => undefined);
  }
}

for (const scenario of loopScenarios()) test(scenario.name, async () => assertLoop(await checkLoop(myLoop, scenario)));
`;
    writeFileSync(join(project, 'loop-ok.test.mjs'), loop(false));
    writeFileSync(join(project, 'loop-drops.test.mjs'), loop(true));
    const tap = (out: string) => ({ pass: Number(/^# pass (\d+)/m.exec(out)?.[1] ?? -1), fail: Number(/^# fail (\d+)/m.exec(out)?.[1] ?? -1) });
    const [ok, drops] = await Promise.all([
      run(process.execPath, ['--test', '--test-reporter=tap', 'loop-ok.test.mjs'], project, 240_000),
      run(process.execPath, ['--test', '--test-reporter=tap', 'loop-drops.test.mjs'], project, 240_000),
    ]);
    expect(ok.code, ok.stdout.slice(-3000) + ok.stderr).toBe(0);
    const okCount = tap(ok.stdout);
    expect(okCount.fail).toBe(0);
    expect(okCount.pass).toBeGreaterThanOrEqual(30);
    expect(drops.code).not.toBe(0);
    const dropsCount = tap(drops.stdout);
    expect(dropsCount.pass + dropsCount.fail).toBe(okCount.pass);
    expect(dropsCount.fail, 'scenarios that caught the dropped results').toBeGreaterThan(0);
    expect(drops.stdout).toMatch(/tool-results-paired|expected-outcome/);
  });
});
