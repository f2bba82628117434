/**
 * docs/drop-in.md as written: every ```ts block compiles against xcompact's sources (strict, as
 * a user's project would: `xcompact`, `xcompact/ai-sdk` and `xcompact/testing` mapped to src/).
 * A block with `require` is compiled as CommonJS (.cts), every other one as an ES module (.mts,
 * top-level await allowed).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = resolve(__dirname, '..');
const page = readFileSync(join(ROOT, 'docs', 'drop-in.md'), 'utf8');
const blocks = [...page.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
const dir = mkdtempSync(join(ROOT, 'test', '.docs-drop-in-'));
afterAll(() => { if (!process.env.KEEP) rmSync(dir, { recursive: true, force: true }); });

describe('docs/drop-in.md', () => {
  it('has TypeScript snippets, and every one compiles', { timeout: 120_000 }, async () => {
    expect(blocks.length).toBeGreaterThanOrEqual(4);
    const files = blocks.map((code, i) => {
      const name = `block-${i}.${/\brequire\(|= require\(/.test(code) ? 'cts' : 'mts'}`;
      // Each block is its own module.
      writeFileSync(join(dir, name), /\bimport\b|\bexport\b/.test(code) ? code : `${code}\nexport {};\n`);
      return name;
    });
    const tsconfig = {
      compilerOptions: {
        // How a bundler or tsx reads a user's file: ESM with top-level await in .mts, `import x = require()` in .cts.
        module: 'preserve',
        moduleResolution: 'bundler',
        target: 'es2022',
        lib: ['es2023'],
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        esModuleInterop: true,
        types: ['node'],
        paths: { xcompact: ['../../src/index.ts'], 'xcompact/ai-sdk': ['../../src/adapters/ai-sdk/index.ts'], 'xcompact/testing': ['../../src/testing/index.ts'] },
      },
      files,
    };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(tsconfig));
    const r = await new Promise<{ code: number; out: string }>((done) =>
      execFile(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(dir, 'tsconfig.json')], { cwd: dir, timeout: 110_000 }, (err, stdout, stderr) =>
        done({ code: err ? 1 : 0, out: `${stdout}${stderr}` }),
      ),
    );
    const ours = r.out.split('\n').filter((l) => /error TS\d+/.test(l) && /block-\d+\.[cm]ts/.test(l));
    expect(ours, r.out).toEqual([]);
  });
});
