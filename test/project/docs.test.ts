/**
 * The docs are part of the product: README.md is the front door and docs/*.md the manual.
 * Every relative link resolves (files and #anchors), every docs page is reachable from the
 * README, and every ```ts block type-checks against the package's own sources, imported by
 * the names a user writes ('xcompact', 'xcompact/ai-sdk', …).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { capabilityImports } from '../helpers/imports';
import { anchorsOf, codeBlocks, linksOf } from '../helpers/markdown';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const docsDir = join(root, 'docs');
const pages = [
  'README.md',
  ...readdirSync(docsDir)
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const read = (page: string) => readFileSync(join(root, page), 'utf8');

/**
 * Pages other branches of this round add (the README's map links them already). Until one is
 * merged, a link to it may dangle; once it exists it is checked like any other page.
 */
const PENDING = new Set<string>([]);

describe('docs: links', () => {
  for (const page of pages) {
    it(`${page}: every relative link resolves, #anchors included`, () => {
      const broken: string[] = [];
      for (const { target, line } of linksOf(read(page))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
        const [pathPart, anchor] = target.split('#', 2) as [string, string | undefined];
        const file = pathPart === '' ? page : relative(root, resolve(root, dirname(page), decodeURIComponent(pathPart)));
        if (!existsSync(join(root, file))) {
          if (!PENDING.has(file)) broken.push(`${page}:${line}: ${target} (no file ${file})`);
          continue;
        }
        if (anchor === undefined || anchor === '') continue;
        if (!file.endsWith('.md') || statSync(join(root, file)).isDirectory()) {
          broken.push(`${page}:${line}: ${target} (an anchor into a file that is not markdown)`);
          continue;
        }
        if (!anchorsOf(read(file)).has(anchor)) broken.push(`${page}:${line}: ${target} (no heading #${anchor} in ${file})`);
      }
      expect(broken).toEqual([]);
    });
  }

  it('every docs page is linked from the README', () => {
    const linked = new Set(
      linksOf(read('README.md'))
        .map((l) => l.target.split('#')[0]!)
        .filter((t) => t !== '')
        .map((t) => relative(root, resolve(root, t))),
    );
    const unlinked = pages.filter((p) => p !== 'README.md' && !linked.has(p));
    expect(unlinked, 'add these pages to the docs map in README.md').toEqual([]);
  });

  it('the checker finds what it must (a broken link, a missing anchor, a link in code is not one)', () => {
    const text = '# A title\n\nSee [x](missing.md) and [y](#a-title) and [z](#nope).\n\n```ts\nconst a = [b](c);\n```\n`[q](r)`\n';
    expect(linksOf(text).map((l) => l.target)).toEqual(['missing.md', '#a-title', '#nope']);
    expect(anchorsOf(text)).toEqual(new Set(['a-title']));
    expect(anchorsOf('## When to call `session.recover()`\n## Many workers: the PostgreSQL store\n## Twice\n## Twice\n')).toEqual(
      new Set(['when-to-call-sessionrecover', 'many-workers-the-postgresql-store', 'twice', 'twice-1']),
    );
  });
});

describe('docs/architecture.md', () => {
  const page = read('docs/architecture.md');
  const { capabilities, edges } = capabilityImports(join(root, 'src', 'services'));

  it('its picture shows every import between capabilities, and only those (read from src/services/)', () => {
    const picture = codeBlocks(page).find((b) => b.lang === 'mermaid' && /flowchart/.test(b.code));
    expect(picture, 'a mermaid flowchart of the capabilities').toBeDefined();
    const drawn = new Set(
      picture!.code
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l.includes('-->')),
    );
    const missing = [...edges].filter((e) => !drawn.has(e)).sort();
    const extra = [...drawn].filter((e) => !edges.has(e)).sort();
    expect({ missing, extra }, 'redraw it from `npx tsx scripts/check-architecture.ts --graph`').toEqual({ missing: [], extra: [] });
    for (const c of capabilities) expect(picture!.code, `${c} is drawn`).toMatch(new RegExp(`(^|\\s)${c}(\\s|$)`, 'm'));
  });

  it('its table names every capability folder', () => {
    expect(capabilities.length).toBeGreaterThan(5);
    for (const c of capabilities) expect(page, `services/${c}/ is described`).toContain(`| \`${c}/\` |`);
  });
});

/** The package's entry points, read from tsup.config.ts (every build's `entry`) so a new one is checked too. */
async function entryPoints(): Promise<Record<string, string>> {
  const config = (await import('../../tsup.config')).default as unknown;
  const builds = (Array.isArray(config) ? config : [config]) as Array<{ entry?: Record<string, string> }>;
  const out: Record<string, string> = {};
  for (const build of builds) {
    for (const [name, source] of Object.entries(build.entry ?? {})) {
      if (name.startsWith('cli/')) continue; // the bin, not an importable entry
      if (!source.startsWith('src/')) continue; // the declaration pass bundles tsc's output (.build/dts), not the sources
      out[name === 'index' ? 'xcompact' : `xcompact/${name}`] = source;
    }
  }
  if (!out.xcompact) throw new Error('tsup.config.ts: no index entry');
  return out;
}

/**
 * Names a snippet may use without defining: the reader's own parts (their system prompt, tools,
 * a function that runs one). Everything else a snippet uses must be imported or defined in it.
 */
const PLACEHOLDERS = `import type OpenAI from 'openai';
import type { SummaryRequest } from 'xcompact';
declare global {
  const systemPrompt: string;
  const tools: OpenAI.Chat.Completions.ChatCompletionTool[];
  function runTool(call: OpenAI.Chat.Completions.ChatCompletionMessageToolCall): Promise<string>;
  function readFileSomehow(path: string): Promise<string>;
  function callMyModel(request: SummaryRequest, instruction: string, signal?: AbortSignal): Promise<string>;
  const request: SummaryRequest;
  const signal: AbortSignal;
  function myAgentLoop(ctx: import('xcompact/testing').LoopContext): Promise<void>;
}
export {};
`;

/** Packages a page tells the reader to install themselves (not dependencies of this project): the part a snippet uses. */
const OPTIONAL_PACKAGES = `declare module '@statelyai/inspect' {
  export function createSkyInspector(): { inspect: (event: import('xstate').InspectionEvent) => void };
}
`;

describe('docs: code', () => {
  it('every ```ts block type-checks against the package (imported as a user would)', async () => {
    const dir = join(root, 'node_modules', '.cache', 'xcompact-doc-snippets');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    let n = 0;
    for (const page of pages) {
      for (const block of codeBlocks(read(page)).filter((b) => b.lang === 'ts')) {
        const name = `${page.replace(/[/.]/g, '_')}_L${block.line}.ts`;
        // `export {}` makes each block a module: its own scope, top-level await allowed.
        writeFileSync(join(dir, name), `${block.code}\nexport {};\n`);
        n++;
      }
    }
    expect(n).toBeGreaterThan(5);
    writeFileSync(join(dir, 'placeholders.d.ts'), PLACEHOLDERS);
    writeFileSync(join(dir, 'optional-packages.d.ts'), OPTIONAL_PACKAGES);
    const base = JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8')) as { compilerOptions: Record<string, unknown> };
    const paths = Object.fromEntries(Object.entries(await entryPoints()).map(([k, v]) => [k, [join(root, v)]]));
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { ...base.compilerOptions, noUnusedLocals: false, paths }, include: ['./*.ts'] }, null, 1),
    );
    let output = '';
    try {
      execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(dir, 'tsconfig.json')], { encoding: 'utf8', cwd: dir });
    } catch (err) {
      output = String((err as { stdout?: string }).stdout ?? err);
    }
    // Name the page and line of the block, not the temp file.
    const located = output.replace(
      /(\S+?)_L(\d+)\.ts\((\d+),(\d+)\)/g,
      (_m, p: string, l: string, r: string) => `${p.replace(/_md$/, '.md').replace(/^docs_/, 'docs/')} (block at line ${l}, its line ${r})`,
    );
    expect(located).toBe('');
  });
});
