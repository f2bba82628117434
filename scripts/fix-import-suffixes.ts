/**
 * `npx tsx scripts/fix-import-suffixes.ts [--check]`: one import-suffix convention. Relative
 * imports of TypeScript sources carry no suffix (`from './session'`, not `'./session.js'`): the
 * tsconfig resolves as a bundler does (`moduleResolution: Bundler`), tsup bundles every entry, and
 * tsx and vitest run the sources as they are, so a `.js` names a file that does not exist in the
 * tree. The codemod drops `.js` from every relative specifier (static and type imports, re-exports,
 * `import()`, `vi.mock()`) whose `.ts` file or `index.ts` exists; a specifier naming a real
 * JavaScript file (visualizer/layout.js) is left alone. Idempotent; prints counts; `--check`
 * writes nothing and exits 1 while a suffix is left.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const FOLDERS = ['src', 'test', 'bench', 'scripts', 'visualizer', 'examples'];
/**
 * Config files vite loads with Node's own resolver (no bundler), and the test helpers
 * vitest.config.ts imports that way: their relative imports keep `.js`.
 */
const LOADER_CONFIG = /^(?:(?:vitest|vite|tsup)\.config\.m?ts|sequencer\.ts|suite-plan\.ts)$/;

function files(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.name === 'node_modules' || e.name === 'out' || e.name.startsWith('.')) continue;
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(m?ts|tsx)$/.test(e.name) && !e.name.endsWith('.d.ts') && !LOADER_CONFIG.test(e.name)) out.push(p);
    }
  };
  for (const f of FOLDERS) if (existsSync(join(root, f))) walk(join(root, f));
  for (const e of readdirSync(root)) if (/\.(m?ts)$/.test(e) && !LOADER_CONFIG.test(e)) out.push(join(root, e));
  return out.sort();
}

/** The `.js` specifier's TypeScript source, if it has one. */
function tsSource(from: string, spec: string): boolean {
  const base = resolve(dirname(from), spec.slice(0, -'.js'.length));
  if (existsSync(`${base}.ts`) || existsSync(`${base}.tsx`)) return true;
  return existsSync(base) && statSync(base).isDirectory() && existsSync(join(base, 'index.ts'));
}

/** The [start, end) of each relative module specifier's text (quotes excluded) that ends in `.js`. */
export function suffixedSpecifiers(file: string, text: string): Array<[number, number]> {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: Array<[number, number]> = [];
  const take = (node: ts.Node | undefined) => {
    if (!node || !ts.isStringLiteralLike(node)) return;
    const spec = node.text;
    if (!spec.startsWith('.') || !spec.endsWith('.js') || !tsSource(file, spec)) return;
    out.push([node.getStart(sf) + 1, node.getEnd() - 1]);
  };
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) take(node.moduleSpecifier);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) take(node.argument.literal);
    else if (ts.isCallExpression(node)) {
      const callee = node.expression.getText(sf);
      if (node.expression.kind === ts.SyntaxKind.ImportKeyword || /^vi\.(mock|doMock|importActual)$/.test(callee)) take(node.arguments[0]);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

export function fixText(file: string, text: string): { text: string; count: number } {
  const spans = suffixedSpecifiers(file, text);
  let out = text;
  for (const [start, end] of [...spans].reverse()) out = out.slice(0, start) + out.slice(start, end).slice(0, -'.js'.length) + out.slice(end);
  return { text: out, count: spans.length };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check');
  let total = 0;
  const changed: string[] = [];
  for (const path of files()) {
    const before = readFileSync(path, 'utf8');
    const { text, count } = fixText(path, before);
    if (count === 0) continue;
    total += count;
    changed.push(`${relative(root, path)} (${count})`);
    if (!check) writeFileSync(path, text);
  }
  console.log(`${check ? 'would drop' : 'dropped'} ${total} .js suffixes in ${changed.length} files${changed.length ? `: ${changed.join(', ')}` : ''}`);
  if (check && total > 0) process.exitCode = 1;
}
