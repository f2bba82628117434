import { defineConfig } from 'tsup';

export default defineConfig([
  {
    entry: { index: 'src/index.ts', advanced: 'src/advanced.ts', testing: 'src/testing/index.ts', 'ai-sdk': 'src/adapters/ai-sdk/index.ts', otel: 'src/adapters/otel.ts', eval: 'src/eval/index.ts' },
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    // The configs build in parallel: leave the CLI's folder to the config below.
    clean: ['!cli/**'],
    target: 'node20',
  },
  {
    // The `xcompact` bin (package.json "bin"): ESM only (it uses top-level await), no types.
    // The shebang comes from src/cli/main.ts; esbuild keeps it on the first line.
    entry: { 'cli/main': 'src/cli/main.ts' },
    format: ['esm'],
    dts: false,
    sourcemap: true,
    clean: false,
    target: 'node20',
  },
]);
