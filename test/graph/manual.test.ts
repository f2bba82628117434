/**
 * Every transition of the manual chart, by paths generated from the chart, run on the real
 * engine (see suite-manual.ts).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { allCoverage } from './catalogs';
import { cleanupWorlds, startServer, type Server } from './runner';
import { runManualPath } from './suite-manual';

const coverage = allCoverage().get('manual')!;
const byKey = new Map(coverage.all.map((t) => [t.key, t]));
let srv: Server;
beforeAll(async () => {
  srv = await startServer();
});
afterAll(() => srv.close());
afterEach(cleanupWorlds);

describe('manual chart: generated paths on the real engine', () => {
  it('the generated paths cover every transition', () => {
    expect(coverage.missing.map((t) => t.name)).toEqual([]);
  });
  for (const path of coverage.paths) {
    it(`${path.target.name} — ${path.title}`, () => runManualPath(srv, path, byKey));
  }
});
