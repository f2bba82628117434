/**
 * Every transition of the pressure chart, by paths generated from the chart, run on the
 * real engine (see suite-pressure.ts).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { allCoverage } from './catalogs';
import { cleanupWorlds, startServer, type Server } from './runner';
import { runPressurePath } from './suite-pressure';

const coverage = allCoverage().get('pressure')!;
const byKey = new Map(coverage.all.map((t) => [t.key, t]));
let srv: Server;
beforeAll(async () => {
  srv = await startServer();
});
afterAll(() => srv.close());
afterEach(cleanupWorlds);

describe('pressure chart: generated paths on the real engine', () => {
  it('the generated paths cover every transition', () => {
    expect(coverage.missing.map((t) => t.name)).toEqual([]);
  });
  for (const path of coverage.paths) {
    it(`${path.target.name} — ${path.title}`, () => runPressurePath(srv, path, byKey));
  }
});
