import { defineConfig } from 'tsup';

const library = { index: 'src/index.ts', advanced: 'src/advanced.ts', testing: 'src/testing/index.ts', 'ai-sdk': 'src/adapters/ai-sdk/index.ts', otel: 'src/adapters/otel.ts', eval: 'src/eval/index.ts' };

// No source maps in the package (they were 4.3 MB of a 1.7 MB tarball).
export default defineConfig([
  {
    // ESM: the library entries and the `xcompact` bin (package.json "bin") in one build, so the
    // bin shares the library's chunks instead of carrying a copy of it. The bin is ESM only (it
    // uses top-level await) and has no types; its shebang comes from src/cli/main.ts.
    entry: { ...library, 'cli/main': 'src/cli/main.ts' },
    format: ['esm'],
    dts: { entry: library },
    sourcemap: false,
    clean: true,
    target: 'node20',
  },
  {
    // CommonJS for `require('xcompact')`, with its own declarations (.d.cts).
    entry: library,
    format: ['cjs'],
    // One copy of the shared code for all CommonJS entries (tsup's splitting for CJS): without it each
    // entry was a whole copy of the library, 0.2–0.5 MB each, and the tarball grew past 700 KB.
    // `shims` gives that code a real import.meta.url (the tokenizer loaders' createRequire needs it).
    splitting: true,
    shims: true,
    dts: true,
    sourcemap: false,
    // The configs build in parallel: the ESM build's files are left alone.
    clean: false,
    target: 'node20',
  },
]);
