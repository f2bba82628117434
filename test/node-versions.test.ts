/**
 * The Node versions the project claims to be tested on are the ones CI runs: .ci/node-versions
 * (read by .ci/run) is the list, README.md names each, and none is below package.json's floor.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
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

  it('are run by .ci/run through scripts/with-node.sh', () => {
    const ci = read('.ci/run');
    expect(ci).toContain('.ci/node-versions');
    expect(ci).toMatch(/scripts\/with-node\.sh "\$version" -- npx vitest run/);
  });

  it('are named in README.md, with the floor', () => {
    const readme = read('README.md');
    expect(readme).toContain(`Node ${floor![1]}.${floor![2]} or newer`);
    for (const v of versions) expect(readme).toContain(v);
  });
});
