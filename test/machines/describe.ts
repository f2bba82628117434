/**
 * The frame every per-chart test file shares: one local OpenAI server for the file, worlds
 * cleaned after each test, and one test per generated path (plus the checks that the paths
 * cover every transition statically, and that real actors took each one at run time). The
 * paths of a chart run here and nowhere else.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SPECS, coverageOf } from './catalogs';
import { requiredCoverage } from './required';
import type { TransitionInfo } from './model';
import type { GeneratedPath } from './paths';
import { cleanupWorlds, runtimeCovered, startServer, type Server } from './runner';

export type PathRunner = (srv: Server, path: GeneratedPath, byKey: Map<string, TransitionInfo>) => Promise<void>;

/** Registers the file's server and cleanup; returns a getter for the server. */
export function useServer(): () => Server {
  let srv: Server | undefined;
  beforeAll(async () => {
    srv = await startServer();
  });
  afterAll(() => srv?.close());
  afterEach(cleanupWorlds);
  return () => {
    if (!srv) throw new Error('the server starts in beforeAll');
    return srv;
  };
}

export function describeGeneratedPaths(machine: string, server: () => Server, run: PathRunner): void {
  const coverage = coverageOf(machine);
  const byKey = new Map(coverage.all.map((t) => [t.key, t]));
  describe(`${machine} chart: generated paths on the real engine`, () => {
    it('the generated paths cover every transition, required (SPEC.md) and present', () => {
      const spec = SPECS.find((s) => s.name === machine)!;
      expect(requiredCoverage(machine, spec.machine, coverage.covered).uncovered).toEqual([]);
    });
    for (const path of coverage.paths) {
      it(`${path.target.name} — ${path.title}`, () => run(server(), path, byKey));
    }
    // Runs after the paths (vitest keeps declaration order): each path runs once, here only.
    it(`a real ${machine} actor took every one of its ${coverage.all.length} transitions`, () => {
      const missing = coverage.all.filter((t) => !runtimeCovered.has(t.key)).map((t) => t.name);
      expect(missing, `transitions no real actor took:\n${missing.join('\n')}`).toEqual([]);
    });
  });
}
