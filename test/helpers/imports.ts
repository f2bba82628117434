/**
 * The import graph between the capabilities of src/services/ (one folder each), read from the
 * sources: what docs/architecture.md's picture must show.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

function walk(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else if (path.endsWith('.ts')) out.push(path);
  }
  return out;
}

function resolveImport(from: string, spec: string): string | undefined {
  const base = resolve(dirname(from), spec.replace(/\.js$/, ''));
  if (existsSync(`${base}.ts`)) return `${base}.ts`;
  if (existsSync(base) && statSync(base).isDirectory() && existsSync(join(base, 'index.ts'))) return join(base, 'index.ts');
  return undefined;
}

/** `importer → imported` for every pair of capabilities with at least one import (type imports included). */
export function capabilityImports(servicesDir: string): { capabilities: string[]; edges: Set<string> } {
  const capabilities = readdirSync(servicesDir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  const capabilityOf = (file: string) => {
    const parts = relative(servicesDir, file).split(sep);
    return parts.length > 1 && !parts[0]!.startsWith('..') ? parts[0]! : undefined;
  };
  const edges = new Set<string>();
  for (const file of walk(servicesDir)) {
    const from = capabilityOf(file);
    for (const m of readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const target = resolveImport(file, m[1]!);
      const to = target && capabilityOf(target);
      if (from && to && from !== to) edges.add(`${from} --> ${to}`);
    }
  }
  return { capabilities, edges };
}
