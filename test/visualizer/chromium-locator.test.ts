/**
 * The Chromium locator behind the browser tests: its lookup order, and the npm route for real
 * (unpacked into a private folder, ignoring a stale `$TMPDIR/chromium`, launched with the bundled
 * NSS libraries), so a machine with nothing installed via apt is known to run the browser tests.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  ChromiumNotFoundError,
  DEBIAN_CHROMIUM,
  chooseChromium,
  launchChromium,
  locateChromium,
  missingLibraries,
  npmChromiumVersion,
  unpackNpmChromium,
} from '../helpers/chromium';

describe('chooseChromium: XCOMPACT_CHROMIUM, then Debian, then npm', () => {
  const mine = '/opt/my/chrome';
  const onDisk =
    (...paths: string[]) =>
    (p: string) =>
      paths.includes(p);

  it('takes XCOMPACT_CHROMIUM first, even when Debian has one', () => {
    expect(chooseChromium({ XCOMPACT_CHROMIUM: mine }, onDisk(mine, DEBIAN_CHROMIUM))).toEqual({ source: 'XCOMPACT_CHROMIUM', executablePath: mine });
  });

  it('rejects an XCOMPACT_CHROMIUM that does not exist instead of testing another browser', () => {
    const pick = () => chooseChromium({ XCOMPACT_CHROMIUM: mine }, onDisk(DEBIAN_CHROMIUM));
    expect(pick).toThrow(ChromiumNotFoundError);
    expect(pick).toThrow(/XCOMPACT_CHROMIUM names \/opt\/my\/chrome/);
  });

  it("takes Debian's when XCOMPACT_CHROMIUM is unset or empty", () => {
    expect(chooseChromium({}, onDisk(DEBIAN_CHROMIUM))).toEqual({ source: 'debian', executablePath: DEBIAN_CHROMIUM });
    expect(chooseChromium({ XCOMPACT_CHROMIUM: '' }, onDisk(DEBIAN_CHROMIUM))).toEqual({ source: 'debian', executablePath: DEBIAN_CHROMIUM });
  });

  it('falls back to the npm package when neither is there', () => {
    expect(chooseChromium({}, onDisk())).toEqual({ source: 'npm' });
    expect(chooseChromium({ PATH: '/usr/bin' }, onDisk(mine))).toEqual({ source: 'npm' });
  });
});

describe('the npm Chromium (@sparticuz/chromium)', () => {
  const root = mkdtempSync(join(tmpdir(), 'xcompact-locator-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  // Whatever this machine has, these tests take the npm route.
  const noDebian = (p: string) => p !== DEBIAN_CHROMIUM && existsSync(p);

  it('unpacks into a private folder keyed by version, ignoring a stale $TMPDIR/chromium, once even when raced', async () => {
    // What the package's own executablePath() would reuse without a version check.
    writeFileSync(join(root, 'chromium'), '#!/bin/sh\necho stale\n', { mode: 0o755 });
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = root;
    let dirs: string[];
    try {
      dirs = await Promise.all([unpackNpmChromium(root), unpackNpmChromium(root)]);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
    const expected = join(root, `xcompact-chromium-${npmChromiumVersion()}`);
    expect(dirs).toEqual([expected, expected]);
    expect(existsSync(join(expected, 'chromium'))).toBe(true);
    expect(existsSync(join(expected, 'al2023', 'lib', 'libnss3.so'))).toBe(true);
    // The loser's staging folder is gone; nothing but the stale file and the one copy remain.
    expect(readdirSync(root).sort()).toEqual(['chromium', `xcompact-chromium-${npmChromiumVersion()}`]);
    expect(process.env.TMPDIR).toBe(saved);
  });

  it('runs with XCOMPACT_CHROMIUM unset and the bundled NSS libraries on LD_LIBRARY_PATH', async () => {
    const env = { ...process.env };
    delete env.XCOMPACT_CHROMIUM;
    const located = await locateChromium({ env, exists: noDebian, cacheRoot: root, libs: 'bundled' });
    expect(located.source).toBe('npm');
    const bundled = join(root, `xcompact-chromium-${npmChromiumVersion()}`, 'al2023', 'lib');
    expect(located.env.LD_LIBRARY_PATH?.split(':')[0]).toBe(bundled);
    expect(missingLibraries(located.executablePath, located.env) ?? []).toEqual([]);
    const resolved = spawnSync('ldd', [located.executablePath], { env: located.env, encoding: 'utf8' }).stdout;
    if (resolved) expect(resolved).toContain(`libnss3.so => ${join(bundled, 'libnss3.so')}`);

    const { browser } = await launchChromium({ env, exists: noDebian, cacheRoot: root, libs: 'bundled' });
    try {
      expect(browser.version().split('.')[0]).toBe(npmChromiumVersion().split('.')[0]);
      const page = await browser.newPage();
      page.setDefaultTimeout(0);
      await page.setContent('<p id="x">ready</p><script>document.getElementById("x").dataset.sum = String(20 + 22)</script>');
      expect(await page.getAttribute('#x', 'data-sum')).toBe('42');
    } finally {
      await browser.close();
    }
  });
});
