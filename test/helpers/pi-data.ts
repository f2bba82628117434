/**
 * Finds the shared pi transcript: `../shared/data/` next to the repo root (as laid out for
 * developers and CI), found by walking up from this file so the test does not depend on the
 * working directory. XCOMPACT_PI_DATA overrides the path.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PI_FILE_NAME = 'pi-large-session.jsonl';

export function findPiData(name = PI_FILE_NAME): { path: string | undefined; searched: string[] } {
  const searched: string[] = [];
  const override = process.env.XCOMPACT_PI_DATA;
  if (override) {
    searched.push(override);
    return { path: existsSync(override) ? override : undefined, searched };
  }
  // test/helpers → test → repo root → its parent, and on up: the first shared/data/<name> wins.
  let dir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
  for (;;) {
    const candidate = join(dir, '..', 'shared', 'data', name);
    searched.push(resolve(candidate));
    if (existsSync(candidate)) return { path: resolve(candidate), searched };
    const parent = dirname(dir);
    if (parent === dir) return { path: undefined, searched };
    dir = parent;
  }
}
