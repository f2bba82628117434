// The project's own config (its globalSetup included), pointed at the failing check file only.
// (mergeConfig would concatenate `include` arrays and run the whole suite, this test included.)
import { defineConfig } from 'vitest/config';
import base from '../../vitest.config';

export default defineConfig({ ...base, test: { ...base.test, include: ['test/exit-code/*.check.ts'], exclude: [] } });
