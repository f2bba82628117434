// The project's own config (its globalSetup included), pointed at the failing check file only.
// (mergeConfig would concatenate `include` arrays and run the whole suite, this test included;
// the root config's projects would too, so they are left out.)
import { defineConfig } from 'vitest/config';
import base from '../../vitest.config';

const { projects: _projects, ...root } = base.test ?? {};
export default defineConfig({ ...base, test: { ...root, include: ['test/exit-code/*.check.ts'], exclude: [] } });
