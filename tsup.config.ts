import { defineConfig } from 'tsup';

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

// No source maps in the package (they were 4.3 MB of a 1.7 MB tarball).
export default defineConfig([
  {
    // ESM: the library entries and the `xcompact` bin (package.json "bin") in one build, so the
    // bin shares the library's chunks instead of carrying a copy of it. The bin is ESM only (it
    // uses top-level await) and has no types; its shebang comes from src/cli/main.ts.
    entry: { ...library, 'cli/main': 'src/cli/main.ts' },
    format: ['esm'],
    sourcemap: false,
    // dist/ is emptied by the build script (the configs build in parallel: none may clean).
    clean: false,
    target: 'node20',
  },
  {
    // CommonJS for `require('xcompact')`.
    entry: library,
    format: ['cjs'],
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
