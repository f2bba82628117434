/**
 * `npm run check:architecture` (run by .ci/run): the rules of docs/architecture.md that a tree
 * can break without a test noticing.
 *  1. imports between capabilities of src/services/ go through the capability's face (its index.ts);
 *  2. the capabilities and layers import one way: no cycle between folders (file cycles are
 *     dpdm's job: `npm run check:cycles`);
 *  3. a file in src/ over 400 lines is named as a warning (split it if it holds two responsibilities;
 *     a cap alone is no reason to cut a chart from its contract).
 * Prints every breach and exits 1 when there is one. `--graph` prints the folder graph as Mermaid.
 */
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

const root = resolve(dirname(new URL(import.meta.url).pathname), '..');
const src = join(root, 'src');
const MAX_LINES = 400;

function walk(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else if (path.endsWith('.ts')) out.push(path);
  }
  return out;
}

/** The folder a file belongs to in the layer picture: services/<capability>, or src's own top folder or file. */
export function groupOf(file: string): string {
  const parts = relative(src, file).split(sep);
  if (parts[0] === 'services' && parts.length > 2) return `services/${parts[1]}`;
  if (parts.length === 1) return parts[0]!.replace(/\.ts$/, '');
  return parts[0]!;
}

function resolveImport(from: string, spec: string): string | undefined {
  const base = resolve(dirname(from), spec.replace(/\.js$/, ''));
  if (existsSync(base + '.ts')) return base + '.ts';
  if (existsSync(base) && statSync(base).isDirectory() && existsSync(join(base, 'index.ts'))) return join(base, 'index.ts');
  return undefined;
}

const problems: string[] = [];
const warnings: string[] = [];
const edges = new Map<string, Set<string>>();
for (const file of walk(src)) {
  const text = readFileSync(file, 'utf8');
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  if (lines > MAX_LINES) warnings.push(`${relative(root, file)}: ${lines} lines (over ${MAX_LINES}: does it hold one responsibility?)`);
  for (const match of text.matchAll(/(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
    const target = resolveImport(file, match[1]!);
    if (!target) continue;
    const a = groupOf(file);
    const b = groupOf(target);
    if (a === b) continue;
    if (!edges.has(a)) edges.set(a, new Set());
    edges.get(a)!.add(b);
    if (b.startsWith('services/') && !target.endsWith(`${sep}index.ts`) && relative(join(src, b), target).split(sep).length === 1) {
      problems.push(`${relative(root, file)} imports ${relative(root, target)}: go through ${b}/index.ts, the capability's face`);
    }
  }
}

// Folder cycles: a depth-first search over the folder graph.
const state = new Map<string, 'open' | 'done'>();
function visit(node: string, path: string[]): void {
  if (state.get(node) === 'done') return;
  if (state.get(node) === 'open') {
    problems.push(`import cycle between folders: ${[...path.slice(path.indexOf(node)), node].join(' → ')}`);
    return;
  }
  state.set(node, 'open');
  for (const next of [...(edges.get(node) ?? [])].sort()) visit(next, [...path, node]);
  state.set(node, 'done');
}
for (const node of [...edges.keys()].sort()) visit(node, []);

if (process.argv.includes('--graph')) {
  console.log('flowchart TD');
  for (const [a, targets] of [...edges].sort())
    for (const b of [...targets].sort()) console.log(`  ${a.replace(/[/-]/g, '_')}["${a}"] --> ${b.replace(/[/-]/g, '_')}["${b}"]`);
}
if (warnings.length > 0) console.warn(warnings.map((w) => `warning: ${w}`).join('\n'));
if (problems.length > 0) {
  console.error(problems.join('\n'));
  console.error(`${problems.length} architecture problem(s)`);
  process.exit(1);
}
console.log(
  `architecture: ${edges.size} folders, imports one way, every cross-capability import through a face, ${warnings.length} file(s) over ${MAX_LINES} lines`,
);
