/**
 * Transition coverage of every chart, measured two ways:
 * - statically: the definitions the generated paths fire (pure stepping of the charts);
 * - at run time: every generated path is run on the real engine and the definitions its
 *   actors took are read from their `@xstate.microstep` inspection events.
 * Fails, naming them (`machine: state --event [guard]--> target`), if any transition of any
 * machine is uncovered either way.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { allCoverage } from './graph/catalogs';
import type { GeneratedPath } from './graph/paths';
import type { TransitionInfo } from './graph/model';
import { cleanupWorlds, runtimeCovered, startServer, type Server } from './graph/runner';
import { runBackgroundPath, runGatePath } from './graph/suite-background';
import { runEnginePath } from './graph/suite-engine';
import { runManualPath } from './graph/suite-manual';
import { runOverflowPath } from './graph/suite-overflow';
import { runPressurePath } from './graph/suite-pressure';
import { runTransactionPath } from './graph/suite-transaction';

type Runner = (srv: Server, path: GeneratedPath, byKey: Map<string, TransitionInfo>) => Promise<void>;
const RUNNERS: Record<string, Runner> = {
  transaction: runTransactionPath,
  pressure: runPressurePath,
  overflow: runOverflowPath,
  manual: runManualPath,
  engine: runEnginePath,
  background: runBackgroundPath,
  gate: runGatePath,
};

const coverage = allCoverage();
let srv: Server;
beforeAll(async () => {
  srv = await startServer();
});
afterAll(() => srv.close());
afterEach(cleanupWorlds);

describe('static transition coverage of the generated paths', () => {
  for (const [name, c] of coverage) {
    it(`${name}: ${c.covered.size}/${c.all.length} transitions by ${c.paths.length} paths`, () => {
      expect(Object.keys(RUNNERS)).toContain(name);
      expect(c.missing.map((t) => t.name)).toEqual([]);
    });
  }
});

describe('runtime transition coverage on the real engine', () => {
  for (const [name, c] of coverage) {
    const byKey = new Map(c.all.map((t) => [t.key, t]));
    for (const path of c.paths) it(`${name}: ${path.title}`, () => RUNNERS[name]!(srv, path, byKey));
  }

  for (const [name, c] of coverage) {
    it(`${name}: all ${c.all.length} transitions were taken by a real actor`, () => {
      const missing = c.all.filter((t) => !runtimeCovered.has(t.key)).map((t) => t.name);
      expect(missing, `${name}: ${c.all.length - missing.length}/${c.all.length}; transitions no real actor took:\n${missing.join('\n')}`).toEqual([]);
    });
  }

  it('every transition of every machine was taken by a real actor', () => {
    const missing = [...coverage.values()].flatMap((c) => c.all.filter((t) => !runtimeCovered.has(t.key)).map((t) => t.name));
    expect(missing, `transitions no real actor took:\n${missing.join('\n')}`).toEqual([]);
  });
});
