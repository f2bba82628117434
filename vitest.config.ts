import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/pg-global-setup.ts'],
    // The packed-tarball test needs a build first: `npm run test:consumer` (test/consumer/vitest.config.ts).
    exclude: [...configDefaults.exclude, 'test/consumer/**'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
