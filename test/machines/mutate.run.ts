/**
 * One chart-mutation worker (started by scripts/mutate-charts.ts, see there): for the chart
 * MUTATE_CHART, from mutant MUTATE_FROM on, one mutant at a time (test/machines/mutants.ts) runs
 * the chart's generated path tests — and only those — on the real engine, in this one process.
 * A mutant is killed when one path fails or times out; the paths that take the mutated
 * transition run first, and the rest only while it survives. Every event is one JSON line in
 * MUTATE_LOG, which the orchestrator reads: it also notices a mutant that loops without end
 * (a synchronous loop never yields to a timer) and goes on from the next one in a new worker.
 * Not part of `npm test` (the name does not match *.test.ts).
 */
import { appendFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SPECS, coverageOf } from './catalogs';
import type { TransitionInfo } from './model';
import { install, mutantsOf, type Mutant } from './mutants';
import type { GeneratedPath, MachineSpec } from './paths';
import { cleanupWorlds, startServer, stopWorlds, timing, type Server } from './runner';
import { RUNNERS } from './runners';

const CHART = process.env.MUTATE_CHART ?? '';
const FROM = Number(process.env.MUTATE_FROM ?? 0);
const LOG = process.env.MUTATE_LOG ?? '';
const PATH_TIMEOUT_MS = 4000;

export type MutationLine =
  | { type: 'total'; total: number }
  | { type: 'start'; index: number; id: string }
  | { type: 'path'; index: number }
  | { type: 'result'; index: number; id: string; status: 'killed' | 'survived' | 'invalid'; why?: string; ms: number }
  | { type: 'done' };
const log = (line: MutationLine) => appendFileSync(LOG, `${JSON.stringify(line)}\n`);

let srv: Server;
beforeAll(async () => {
  srv = await startServer();
  timing.takeMs = 1500; // a mutant that never calls the service a path expects is killed sooner
});
afterAll(() => srv.close());

async function runPath(path: GeneratedPath, byKey: Map<string, TransitionInfo>): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      RUNNERS[CHART]!(srv, path, byKey),
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

async function kill(index: number, mutant: Mutant, paths: GeneratedPath[], byKey: Map<string, TransitionInfo>): Promise<string | undefined> {
  // Paths taking the mutated transition first: they kill most mutants at once.
  const ordered = [...paths.filter((p) => p.fired.includes(mutant.transition.key)), ...paths.filter((p) => !p.fired.includes(mutant.transition.key))];
  for (const path of ordered) {
    log({ type: 'path', index });
    const failure = await runPath(path, byKey);
    if (failure !== undefined) return `${path.title}: ${failure}`;
  }
  return undefined;
}

it(`${CHART} chart mutants from ${FROM}`, { timeout: 60 * 60_000 }, async () => {
  expect(LOG, 'MUTATE_LOG: started by scripts/mutate-charts.ts').not.toBe('');
  const spec = SPECS.find((s) => s.name === CHART);
  if (!spec) throw new Error(`no chart ${CHART}`);
  // The paths are generated from the original chart, before any mutant is installed.
  const c = coverageOf(CHART);
  const byKey = new Map(c.all.map((t) => [t.key, t]));
  const chart = (spec as MachineSpec<unknown>).chart ?? spec.machine;
  const mutants = mutantsOf(chart);
  log({ type: 'total', total: mutants.length });
  for (let index = FROM; index < mutants.length; index++) {
    const mutant = mutants[index]!;
    const started = Date.now();
    let undo: () => void;
    try {
      undo = install(chart, mutant);
    } catch (err) {
      // The mutated config does not build (xstate rejects it): not a chart.
      log({ type: 'result', index, id: mutant.id, status: 'invalid', why: String(err), ms: 0 });
      continue;
    }
    log({ type: 'start', index, id: mutant.id });
    let failure: string | undefined;
    try {
      failure = await kill(index, mutant, c.paths, byKey);
    } finally {
      undo();
    }
    log({
      type: 'result',
      index,
      id: mutant.id,
      status: failure === undefined ? 'survived' : 'killed',
      ...(failure ? { why: failure } : {}),
      ms: Date.now() - started,
    });
  }
  log({ type: 'done' });
});
