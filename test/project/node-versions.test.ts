/**
 * The Node versions the project claims to be tested on are the ones CI runs: .ci/node-versions
 * (read by .ci/run) is the list, README.md names each, and none is below package.json's floor.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const versions = read('.ci/node-versions')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '' && !l.startsWith('#'));
const engines = (JSON.parse(read('package.json')) as { engines: { node: string } }).engines.node;
const floor = /^>=(\d+)\.(\d+)$/.exec(engines);

describe('the Node versions CI tests on', () => {
  it('are exact versions, one per major, above the engines floor', () => {
    expect(versions.length).toBeGreaterThan(0);
    expect(floor, `engines.node "${engines}" is not of the form >=MAJOR.MINOR`).not.toBeNull();
    for (const v of versions) {
      expect(v).toMatch(/^\d+\.\d+\.\d+$/);
      expect(Number(v.split('.')[0])).toBeGreaterThan(Number(floor![1]));
    }
    expect(new Set(versions.map((v) => v.split('.')[0])).size).toBe(versions.length);
  });

  it('are run by .ci/run through scripts/with-node.sh, on the runtime-dependent test files', () => {
    const ci = read('.ci/run');
    expect(ci).toContain('.ci/node-versions');
    expect(ci).toMatch(/scripts\/with-node\.sh "\$version" -- npx vitest run "\$\{version_tests\[@\]\}"/);
    expect(ci).toContain('.ci/node-version-tests');
  });

  it('run test files that exist, the tests gated on Node 22+ among them', () => {
    const files = read('.ci/node-version-tests')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) {
      expect(f).toMatch(/^test\/.+\.test\.ts$/);
      expect(existsSync(new URL(`../../${f}`, import.meta.url)), f).toBe(true);
    }
    // openai 7 and ai 7 need Node 22+: on 20 their tests skip, so only these runs prove them.
    expect(files).toEqual(expect.arrayContaining(['test/adapters/drop-in/openai7.test.ts', 'test/adapters/ai-sdk/ai7.test.ts']));
    expect(new Set(files).size).toBe(files.length);
  });

  it('are named in README.md, with the floor', () => {
    const readme = read('README.md');
    expect(readme).toContain(`Node ${floor![1]}.${floor![2]} or newer`);
    for (const v of versions) expect(readme).toContain(v);
  });
});
