import { defineConfig } from 'vitest/config';

// The packed-tarball consumer test (`npm run test:consumer`): it packs and installs, so it runs
// apart from `npm test`, after `npm run build`.
export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/consumer/**/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 300_000,
  },
});
