/**
 * The lazy root entry: dist/index.(c)js is generated from src/index.ts's re-exports
 * (scripts/lazy-root.ts) and its values stand in for the real ones until first use
 * (src/lazy-entry.ts). What the package build does with them is checked on the packed tarball
 * (test/consumer/tarball.test.ts); here: the generator reads every export of src/index.ts, and a
 * stand-in behaves as the function or class it stands for.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as root from '../../src/index';
import { lazyExports } from '../../src/lazy-entry';
import { EAGER, lazyRootSource, reExports } from '../../scripts/lazy-root';

const INDEX = readFileSync(new URL('../../src/index.ts', import.meta.url), 'utf8');

describe('the generated root entry', () => {
  it('names every value src/index.ts exports, each once, and only those', () => {
    const values = reExports(INDEX)
      .filter((e) => !e.type)
      .map((e) => e.name);
    expect(new Set(values).size).toBe(values.length);
    expect(values.sort()).toEqual(Object.keys(root).sort());
  });

  it('stands in for functions and classes only (what a proxy over a function can be)', () => {
    for (const e of reExports(INDEX).filter((x) => !x.type && !EAGER.has(x.from))) {
      expect(typeof (root as Record<string, unknown>)[e.name], e.name).toBe('function');
    }
  });

  it('re-exports the eager modules as they are and loads the whole entry for the rest, per format', () => {
    const esm = lazyRootSource(INDEX, 'esm');
    expect(esm).toContain(`export { XcompactError } from './error-codes';`);
    expect(esm).toContain(`export const withCompaction = lazy('withCompaction');`);
    expect(esm).toContain(`createRequire(import.meta.url)('./index-full.js')`);
    expect(esm).not.toMatch(/from '\.\/(session|engine|services|adapters)/);
    expect(lazyRootSource(INDEX, 'cjs')).toContain(`require('./index-full.cjs')`);
  });

  it('refuses an index that holds anything but re-exports', () => {
    expect(() => reExports(`${INDEX}\nconsole.log('side effect');\n`)).toThrow(/only `export \{ … \} from/);
    expect(() => reExports(`export const x = 1;\n`)).toThrow(/only/);
  });
});

describe('a lazy export', () => {
  class Base extends Error {
    static made = 0;
    static make(): Base {
      Base.made++;
      return new Base('made');
    }
  }
  const load = () => {
    loads++;
    return { Base, double: (n: number) => n * 2, notAFunction: 42 } as Record<string, unknown>;
  };
  let loads = 0;
  const lazy = lazyExports(load);
  const LazyBase = lazy('Base') as typeof Base;
  const double = lazy('double') as (n: number) => number;

  it('loads nothing until first used, then once', () => {
    expect(loads).toBe(0);
    expect(double(21)).toBe(42);
    expect(loads).toBe(1);
    expect(new LazyBase('x')).toBeInstanceOf(Base);
    expect(loads).toBe(1);
  });

  it('is the class for new, instanceof, statics and extends', () => {
    const made = LazyBase.make();
    expect(made).toBeInstanceOf(LazyBase);
    expect(Base.made).toBe(1);
    expect(new Base('real')).toBeInstanceOf(LazyBase);
    expect(new Error('other')).not.toBeInstanceOf(LazyBase);
    class Mine extends LazyBase {
      hello(): string {
        return `hello ${this.message}`;
      }
    }
    const mine = new Mine('there');
    expect(mine.hello()).toBe('hello there');
    expect(mine).toBeInstanceOf(Base);
    expect(mine).toBeInstanceOf(LazyBase);
    expect(LazyBase.name).toBe('Base');
    expect(LazyBase.prototype).toBe(Base.prototype);
  });

  it('names an export that is not a function or a class', () => {
    expect(() => (lazy('notAFunction') as () => void)()).toThrow(/notAFunction is not a function or a class/);
  });
});
