/**
 * `npm run mutate:charts`: mutation testing of the statecharts. For every chart, one mutant at
 * a time (a transition deleted, retargeted, its guard dropped or negated, an action dropped: see
 * test/machines/mutants.ts) runs that chart's generated path tests, and only those, on the real
 * engine (test/machines/mutate.run.ts). Charts run in a pool of worker processes
 * (MUTATE_WORKERS, default 2: one per core); a worker whose mutant makes no progress for
 * MUTATE_STALL_MS (a chart that loops without end never yields to a timer) is killed, the
 * mutant counted as killed, and a new worker goes on from the next mutant.
 *
 * Prints killed ÷ total per chart and the survivors. Exits non-zero when a mutant survives that
 * scripts/equivalent-mutants.json does not list with a reason, or a listed one is killed.
 * `MUTATE_CHARTS=transaction,manual` limits the run to some charts.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MutationLine } from '../test/machines/mutate.run';

const CHARTS = ['engine', 'pressure', 'background', 'transaction', 'overflow', 'gate', 'manual', 'fit']; // longest first
const chosen = process.env.MUTATE_CHARTS ? process.env.MUTATE_CHARTS.split(',') : CHARTS;
const WORKERS = Number(process.env.MUTATE_WORKERS ?? 2);
const STALL_MS = Number(process.env.MUTATE_STALL_MS ?? 8_000);
const EQUIVALENT = JSON.parse(readFileSync(new URL('./equivalent-mutants.json', import.meta.url), 'utf8')) as Record<string, Record<string, string>>;
const dir = mkdtempSync(join(tmpdir(), 'xcompact-mutants-'));

interface Result {
  id: string;
  status: 'killed' | 'survived' | 'invalid';
  why?: string;
}
interface ChartRun {
  chart: string;
  total: number;
  results: Map<number, Result>;
  /** Mutant ids by index, as the workers start them. */
  ids: Map<number, string>;
  ms: number;
  restarts: number;
}

/** Runs one worker from mutant `from`; resolves with the index of a mutant it hung or died on, or undefined when done. */
function worker(chart: string, from: number, run: ChartRun, attempt: number): Promise<number | undefined> {
  const log = join(dir, `${chart}-${attempt}.jsonl`);
  writeFileSync(log, '');
  // A temp dir of its own, removed when it exits: a worker killed for stalling runs no cleanup,
  // and left its session folders and module caches in the temp dir.
  const temp = mkdtempSync(join(tmpdir(), 'xcompact-mutant-worker-'));
  const child = spawn(join('node_modules', '.bin', 'tsx'), ['scripts/mutate-worker.ts'], {
    env: { ...process.env, MUTATE_CHART: chart, MUTATE_FROM: String(from), MUTATE_LOG: log, TMPDIR: temp },
    stdio: ['ignore', 'ignore', 'inherit'],
    detached: true, // its own process group: a stalled worker is killed with everything it started
  });
  return new Promise((resolve, reject) => {
    let read = 0;
    let last = Date.now();
    let current: number | undefined;
    let done = false;
    const poll = setInterval(() => {
      const text = readFileSync(log, 'utf8');
      const lines = text.slice(read).split('\n');
      const complete = lines.slice(0, -1);
      read += complete.reduce((n, l) => n + l.length + 1, 0);
      for (const l of complete) {
        const e = JSON.parse(l) as MutationLine;
        last = Date.now();
        if (e.type === 'total') run.total = e.total;
        else if (e.type === 'start') {
          current = e.index;
          run.ids.set(e.index, e.id);
        } else if (e.type === 'result') {
          run.results.set(e.index, { id: e.id, status: e.status, ...(e.why ? { why: e.why } : {}) });
          current = undefined;
          process.stderr.write(`${chart} ${e.index + 1}/${run.total} ${e.id}: ${e.status}\n`);
        } else if (e.type === 'done') done = true;
      }
      if (!done && current !== undefined && Date.now() - last > STALL_MS) {
        clearInterval(poll);
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
        resolve(current);
      }
    }, 250);
    child.on('exit', (code) => {
      // Read what it wrote last, then decide: finished, or died on the mutant in flight.
      setTimeout(() => {
        rmSync(temp, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
        clearInterval(poll);
        if (done) resolve(undefined);
        else if (current !== undefined) resolve(current);
        else reject(new Error(`the ${chart} worker exited (${code}) without running a mutant: see its output above`));
      }, 500);
    });
  });
}

async function runChart(chart: string): Promise<ChartRun> {
  const run: ChartRun = { chart, total: 0, results: new Map(), ids: new Map(), ms: 0, restarts: 0 };
  const started = Date.now();
  let from = 0;
  for (let attempt = 0; ; attempt++) {
    const hung = await worker(chart, from, run, attempt);
    if (hung === undefined) break;
    run.restarts++;
    const id = run.ids.get(hung) ?? `#${hung}`;
    run.results.set(hung, { id, status: 'killed', why: `no progress for ${STALL_MS} ms: the chart loops without end` });
    process.stderr.write(`${chart} ${hung + 1}/${run.total}: killed (loops without end)\n`);
    from = hung + 1;
    if (from >= run.total) break;
  }
  run.ms = Date.now() - started;
  return run;
}

const queue = [...chosen];
const runs: ChartRun[] = [];
const started = Date.now();
await Promise.all(
  Array.from({ length: Math.min(WORKERS, queue.length) }, async () => {
    for (let chart = queue.shift(); chart; chart = queue.shift()) runs.push(await runChart(chart));
  }),
);

let failed = false;
console.log('\nchart         mutants  killed  equivalent  non-equivalent killed   time');
for (const chart of chosen) {
  const run = runs.find((r) => r.chart === chart)!;
  const results = [...run.results.values()];
  const built = results.filter((r) => r.status !== 'invalid');
  const killed = built.filter((r) => r.status === 'killed');
  const equivalent = EQUIVALENT[chart] ?? {};
  const survivors = built.filter((r) => r.status === 'survived' && !(r.id in equivalent));
  const killedListed = killed.filter((r) => r.id in equivalent);
  const missing = run.total - results.length;
  const nonEq = built.length - Object.keys(equivalent).length;
  const nonEqKilled = killed.length - killedListed.length;
  console.log(
    `${chart.padEnd(14)}${String(built.length).padEnd(9)}${String(killed.length).padEnd(8)}${String(Object.keys(equivalent).length).padEnd(12)}${`${nonEqKilled}/${nonEq} (${((100 * nonEqKilled) / Math.max(1, nonEq)).toFixed(1)}%)`.padEnd(22)}${(run.ms / 1000).toFixed(0)} s`,
  );
  for (const s of survivors) console.log(`  SURVIVOR ${s.id}`);
  for (const k of killedListed) console.log(`  KILLED BUT LISTED AS EQUIVALENT ${k.id}: ${k.why}`);
  for (const id of Object.keys(equivalent)) if (!results.some((r) => r.id === id)) console.log(`  LISTED AS EQUIVALENT BUT NOT A MUTANT ${id}`);
  if (missing > 0) console.log(`  ${missing} mutants not run`);
  if (survivors.length > 0 || killedListed.length > 0 || missing > 0 || Object.keys(equivalent).some((id) => !results.some((r) => r.id === id))) failed = true;
}
console.log(`\n${WORKERS} workers, ${((Date.now() - started) / 1000).toFixed(0)} s in all`);
rmSync(dir, { recursive: true, force: true });
if (failed) {
  console.error('mutants no generated path kills: kill them, or list them with a reason in scripts/equivalent-mutants.json');
  process.exit(1);
}
