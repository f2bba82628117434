/**
 * The built root entry's source (tsup.config.ts; the runtime half is src/lazy-entry.ts): from
 * src/index.ts's re-exports, the values of EAGER modules re-exported as they are and every
 * other value a lazy stand-in that loads the whole entry on first use. Types are dropped (the
 * declarations are built from src/index.ts itself). src/index.ts must hold re-exports only: any
 * other statement is refused, since the stub could not carry it.
 */

/** Modules the root entry loads at once: small, and imported by nothing heavy. */
export const EAGER = new Set(['./error-codes']);

export interface ReExport {
  /** The name exported. */
  name: string;
  /** The module it comes from, as written. */
  from: string;
  type: boolean;
}

const STATEMENT = /export\s+(type\s+)?\{([^}]*)\}\s*from\s*['"]([^'"]+)['"]\s*;?/g;

/** Every name src/index.ts re-exports; throws when it holds anything but `export {…} from` statements. */
export function reExports(source: string): ReExport[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/[^\n]*/g, '');
  const rest = code.replace(STATEMENT, '').trim();
  if (rest !== '')
    throw new Error(
      `src/index.ts may hold only \`export { … } from '…'\` statements (the built root entry is generated from them); found: ${rest.slice(0, 200)}`,
    );
  const out: ReExport[] = [];
  for (const [, typeOnly, list, from] of code.matchAll(STATEMENT)) {
    for (const raw of list!.split(',')) {
      const item = raw.trim();
      if (item === '') continue;
      const type = typeOnly !== undefined || item.startsWith('type ');
      const spec = item.replace(/^type\s+/, '');
      const [, as] = spec.split(/\s+as\s+/);
      out.push({ name: (as ?? spec).trim(), from: from!, type });
    }
  }
  return out;
}

/** The root entry's source for `format`: eager values re-exported, the others lazy stand-ins loading `full`. */
export function lazyRootSource(source: string, format: 'esm' | 'cjs', full = './index-full'): string {
  const values = reExports(source).filter((e) => !e.type);
  const eager = values.filter((e) => EAGER.has(e.from));
  const lazy = values.filter((e) => !EAGER.has(e.from));
  const lines = [
    `import { lazyExports } from './lazy-entry';`,
    format === 'esm' ? `import { createRequire } from 'node:module';` : `declare const require: (id: string) => Record<string, unknown>;`,
    ...eager.map((e) => `export { ${e.name} } from '${e.from}';`),
    format === 'esm'
      ? `const lazy = lazyExports(() => createRequire(import.meta.url)('${full}.js') as Record<string, unknown>);`
      : `const lazy = lazyExports(() => require('${full}.cjs'));`,
    ...lazy.map((e) => `export const ${e.name} = lazy('${e.name}');`),
  ];
  return `${lines.join('\n')}\n`;
}
