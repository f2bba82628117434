/**
 * The suite's layout (test/helpers/suite-plan.ts): which files get a fresh module state, and
 * which start first on a fresh clone.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ISOLATED_FILES, SLOW_FILES, slowFirst } from '../helpers/suite-plan';

const root = fileURLToPath(new URL('../..', import.meta.url));

function testFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return entry.name === 'consumer' || entry.name === 'fixtures' ? [] : testFiles(path);
    return entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

describe('the suite plan', () => {
  it('isolates every file that mocks a module (a mock applies only to a module not loaded yet)', () => {
    const files = testFiles('test');
    expect(files.length).toBeGreaterThan(100);
    const mocking = files.filter((file) => /\bvi\.(do)?[mM]ock\(/.test(readFileSync(join(root, file), 'utf8')));
    expect(mocking.length).toBeGreaterThan(0);
    expect(mocking.filter((file) => !ISOLATED_FILES.includes(file))).toEqual([]);
  });

  it('names only files that exist', () => {
    const named = [...ISOLATED_FILES, ...Object.keys(SLOW_FILES)];
    expect(named.filter((file) => !existsSync(join(root, file))).map((file) => relative(root, join(root, file)))).toEqual([]);
  });

  it('orders longest first, unknown files last in the order they came, stably', () => {
    const seconds: Record<string, number | undefined> = { a: undefined, b: 3, c: undefined, d: 30, e: 3 };
    expect(slowFirst(['a', 'b', 'c', 'd', 'e'], (x) => seconds[x])).toEqual(['d', 'b', 'e', 'a', 'c']);
  });
});
