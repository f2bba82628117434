import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { defineConfig, type Options } from 'tsup';
import { lazyRootSource } from './scripts/lazy-root';

const library = {
  index: 'src/index.ts',
  advanced: 'src/advanced.ts',
  testing: 'src/testing/index.ts',
  'ai-sdk': 'src/adapters/ai-sdk/index.ts',
  otel: 'src/adapters/otel.ts',
  eval: 'src/eval/index.ts',
};

/**
 * The declarations, built once for every entry point and both formats (issue 45). `npm run
 * build` first runs `tsc -p tsconfig.build.json`, one program over src/ that writes plain
 * .d.ts files to .build/dts; this config only bundles those per entry (rollup-plugin-dts
 * reads declaration files without a type checker) and writes each bundle twice, .d.ts and
 * .d.cts. tsup's own `dts` option type-checked the sources again in every config, once per
 * entry program: 4.7 min of CPU and ~4 GB per process for the same declarations.
 */
const declarations = Object.fromEntries(
  Object.keys(library).map((name) => [name, `.build/dts/${library[name as keyof typeof library].replace(/^src\//, '').replace(/\.ts$/, '.d.ts')}`]),
);

/**
 * The root entry, lazy: dist/index.(c)js is generated from src/index.ts's re-exports
 * (scripts/lazy-root.ts), so `import('xcompact')` loads no zod, xstate or library code; the first
 * use of an export requires dist/index-full.(c)js, the whole entry (src/lazy-entry.ts).
 */
function lazyRoot(format: 'esm' | 'cjs'): NonNullable<Options['esbuildPlugins']>[number] {
  return {
    name: 'xcompact-lazy-root',
    setup(build) {
      build.onResolve({ filter: /(^|[\\/])src[\\/]index\.ts$/ }, (args) =>
        args.kind === 'entry-point' ? { path: resolve(args.resolveDir, args.path), namespace: 'xcompact-lazy-root' } : undefined,
      );
      build.onLoad({ filter: /.*/, namespace: 'xcompact-lazy-root' }, (args) => ({
        contents: lazyRootSource(readFileSync(args.path, 'utf8'), format),
        resolveDir: dirname(args.path),
        loader: 'ts',
      }));
      // The whole entry is a file of its own beside the root entry, required at run time.
      build.onResolve({ filter: /^\.\/index-full\.c?js$/ }, (args) => ({ path: args.path, external: true }));
    },
  };
}

// No source maps in the package (they were 4.3 MB of a 1.7 MB tarball).
export default defineConfig([
  {
    // ESM: the library entries and the `xcompact` bin (package.json "bin") in one build, so the
    // bin shares the library's chunks instead of carrying a copy of it. The bin is ESM only (it
    // uses top-level await) and has no types; its shebang comes from src/cli/main.ts.
    entry: { ...library, 'index-full': 'src/index-full.ts', 'cli/main': 'src/cli/main.ts' },
    format: ['esm'],
    esbuildPlugins: [lazyRoot('esm')],
    sourcemap: false,
    // dist/ is emptied by the build script (the configs build in parallel: none may clean).
    clean: false,
    target: 'node20',
  },
  {
    // CommonJS for `require('xcompact')`.
    entry: { ...library, 'index-full': 'src/index-full.ts' },
    format: ['cjs'],
    esbuildPlugins: [lazyRoot('cjs')],
    // One copy of the shared code for all CommonJS entries (tsup's splitting for CJS): without it each
    // entry was a whole copy of the library, 0.2–0.5 MB each, and the tarball grew past 700 KB.
    // `shims` gives that code a real import.meta.url (the tokenizer loaders' createRequire needs it).
    splitting: true,
    shims: true,
    sourcemap: false,
    clean: false,
    target: 'node20',
  },
  {
    // .d.ts (import) and .d.cts (require) for every library entry, from one bundling pass.
    entry: declarations,
    format: ['esm', 'cjs'],
    dts: { only: true, entry: declarations },
    clean: false,
  },
]);
