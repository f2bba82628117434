/**
 * The chart mutation run (`npm run mutate:charts`, see scripts/mutate-charts.ts): for every chart,
 * one mutant at a time (test/graph/mutants.ts) runs the chart's generated path tests — and only
 * those — on the real engine, in this one process. A mutant is killed when one path fails or
 * times out; the paths that take the mutated transition run first, and the rest only while it
 * survives. Survivors must be listed, each with a reason, in scripts/equivalent-mutants.json.
 * Not part of `npm test` (the name does not match *.test.ts).
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SPECS, allCoverage } from './catalogs';
import { install, mutantsOf, type Mutant } from './mutants';
import type { GeneratedPath } from './paths';
import { cleanupWorlds, startServer, stopWorlds, timing, type Server } from './runner';
import { RUNNERS } from './runners';
const EQUIVALENT = JSON.parse(readFileSync(new URL('../../scripts/equivalent-mutants.json', import.meta.url), 'utf8')) as Record<string, Record<string, string>>;
const ONLY = process.env.MUTATE_CHARTS?.split(',');
const PATH_TIMEOUT_MS = 4000;
/** `MUTATE_LOG=file`: one line per mutant as it finishes (vitest shows a test's output only at its end). */
const progress = (line: string) => {
  if (process.env.MUTATE_LOG) appendFileSync(process.env.MUTATE_LOG, `${line}\n`);
};

let srv: Server;
beforeAll(async () => {
  srv = await startServer();
  timing.takeMs = 1500; // a mutant that never calls the service a path expects is killed sooner
});
afterAll(() => srv.close());

// The paths are generated from the original charts, before any mutant is installed.
const coverage = allCoverage();

async function runPath(name: string, path: GeneratedPath, byKey: Map<string, import('./model').TransitionInfo>): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      RUNNERS[name]!(srv, path, byKey),
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${PATH_TIMEOUT_MS} ms`)), PATH_TIMEOUT_MS))),
    ]);
    return undefined;
  } catch (err) {
    return String((err as Error)?.message ?? err).split('\n')[0];
  } finally {
    clearTimeout(timer);
    await stopWorlds();
    await cleanupWorlds();
    srv.queue.length = 0;
  }
}

async function kill(name: string, mutant: Mutant, paths: GeneratedPath[], byKey: Map<string, import('./model').TransitionInfo>): Promise<string | undefined> {
  // Paths taking the mutated transition first: they kill most mutants at once.
  const ordered = [...paths.filter((p) => p.fired.includes(mutant.transition.key)), ...paths.filter((p) => !p.fired.includes(mutant.transition.key))];
  for (const path of ordered) {
    const failure = await runPath(name, path, byKey);
    if (failure !== undefined) return `${path.title}: ${failure}`;
  }
  return undefined;
}

for (const spec of SPECS) {
  if (ONLY && !ONLY.includes(spec.name)) continue;
  describe(`${spec.name} chart mutants`, () => {
    it('every non-equivalent mutant is killed by the generated paths', { timeout: 30 * 60_000 }, async () => {
      const c = coverage.get(spec.name)!;
      const byKey = new Map(c.all.map((t) => [t.key, t]));
      const equivalent = EQUIVALENT[spec.name] ?? {};
      const survivors: string[] = [];
      const killedEquivalent: string[] = [];
      let killed = 0;
      let invalid = 0;
      const started = Date.now();
      const mutants = mutantsOf(spec.machine);
      for (const mutant of mutants) {
        let undo: () => void;
        try {
          undo = install(spec.machine, mutant);
        } catch {
          invalid++; // the mutated config does not build (xstate rejects it): not a chart
          continue;
        }
        let failure: string | undefined;
        progress(`${spec.name} ${mutant.id}: start`);
        try {
          failure = await kill(spec.name, mutant, c.paths, byKey);
        } finally {
          undo();
        }
        progress(`${spec.name} ${mutant.id}: ${failure === undefined ? 'SURVIVED' : `killed (${failure.slice(0, 160)})`} ${Date.now() - started} ms`);
        if (failure !== undefined) {
          killed++;
          if (mutant.id in equivalent) killedEquivalent.push(mutant.id);
        } else if (!(mutant.id in equivalent)) survivors.push(mutant.id);
      }
      const total = mutants.length - invalid;
      const listed = Object.keys(equivalent).length;
      const nonEquivalent = total - listed;
      const pct = nonEquivalent === 0 ? 100 : (100 * (killed - killedEquivalent.length)) / nonEquivalent;
      console.log(
        `MUTANTS ${spec.name.padEnd(12)} killed ${killed}/${total}; non-equivalent killed ${killed - killedEquivalent.length}/${nonEquivalent} (${pct.toFixed(1)}%); equivalent ${listed}; ${((Date.now() - started) / 1000).toFixed(0)} s`,
      );
      for (const s of survivors) console.log(`  SURVIVOR ${s}`);
      for (const k of killedEquivalent) console.log(`  KILLED BUT LISTED AS EQUIVALENT ${k}`);
      expect(survivors, 'mutants no generated path kills (kill them, or list them with a reason in scripts/equivalent-mutants.json)').toEqual([]);
      expect(killedEquivalent, 'listed as equivalent, but a path kills them: remove them from the list').toEqual([]);
    });
  });
}
