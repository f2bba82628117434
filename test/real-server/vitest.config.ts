import { defineConfig } from 'vitest/config';

// The real llama-server suite (`npm run test:real-server`, docs/testing.md): it starts ../shared/tools/llama's
// llama-server itself and runs for minutes, so it is not part of `npm test`. One file, one worker:
// the server has one slot and the machine's cores are the model's.
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/real-server/**/*.test.ts'],
    fileParallelism: false,
    testTimeout: 3_600_000,
    hookTimeout: 300_000,
  },
});
