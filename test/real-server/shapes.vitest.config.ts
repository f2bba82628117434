import { defineConfig } from 'vitest/config';

// docs/drop-in.md's real-server suite (the three request shapes against llama-server): not in `npm test`.
// `npm run test:real-server:shapes` (XC_REQUESTS agent requests per loop, default 50).
export default defineConfig({
  test: { include: ['test/real-server/shapes.llama.ts'], testTimeout: 1_800_000, hookTimeout: 180_000, fileParallelism: false },
});
