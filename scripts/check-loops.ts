/**
 * `npm run check:loops`: the mutation score of xcompact/testing's checker, the whole table. Every
 * reference loop and every broken loop of test/helpers/reference-loops.ts runs against every
 * generated scenario (loopScenarios()); each broken loop must be caught by at least one scenario,
 * no reference loop by any. Prints the table (Markdown, as in docs/loop-testing.md) and exits
 * non-zero under 100 % or on a false alarm. The loops are split over two processes (one per
 * core): checkLoop watches every engine its process creates, so within one process they run one
 * after another. `--part i/n` runs only every n-th loop from the i-th (what each process does).
 */
import { spawn } from 'node:child_process';
import { formatScore, loopScenarios, scoreLoops, type LoopScore, type ScoreRow } from '../src/testing';
import { BROKEN_LOOPS, REFERENCE_LOOPS } from '../test/helpers/reference-loops';

/**
 * What each run may take: a hang guard only. The loop that ignores its signal is caught by what it
 * did with it, at once, and a run out of time is reported as slow, so a loaded machine (CI on 2
 * shared cores) must not turn the score's verdicts into timeouts.
 */
const RUN_TIMEOUT_MS = 120_000;
const PARTS = 2;

const names = [...Object.keys(REFERENCE_LOOPS), ...Object.keys(BROKEN_LOOPS)];

async function runPart(part: number, parts: number): Promise<ScoreRow[]> {
  const mine = new Set(names.filter((_, k) => k % parts === part));
  const pick = <T>(r: Record<string, T>) => Object.fromEntries(Object.entries(r).filter(([k]) => mine.has(k)));
  const result = await scoreLoops(
    { reference: pick(REFERENCE_LOOPS), broken: Object.fromEntries(Object.entries(pick(BROKEN_LOOPS)).map(([k, v]) => [k, v.loop])) },
    loopScenarios(),
    {
      timeoutMs: RUN_TIMEOUT_MS,
      onRow: (row) => console.error(`${row.loop}: caught by ${row.caught.length} of ${row.scenarios} (${(row.ms / 1000).toFixed(1)} s)`),
    },
  );
  return result.rows;
}

function child(part: number): Promise<ScoreRow[]> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', process.argv[1]!, '--part', `${part}/${PARTS}`], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => (code === 0 ? resolve(JSON.parse(out) as ScoreRow[]) : reject(new Error(`part ${part} exited with ${code}`))));
  });
}

const at = process.argv.indexOf('--part');
if (at >= 0) {
  const [part, parts] = process.argv[at + 1]!.split('/').map(Number) as [number, number];
  const rows = await runPart(part, parts);
  process.stdout.write(JSON.stringify(rows));
  // A loop that ignored its signal may still wait on a socket: the rows are out, the part is done.
  process.exit(0);
} else {
  const started = Date.now();
  const parts = await Promise.all(Array.from({ length: PARTS }, (_, k) => child(k)));
  const byName = new Map(parts.flat().map((r) => [r.loop, r]));
  const rows = names.map((n) => byName.get(n)!);
  const broken = rows.filter((r) => r.kind === 'broken');
  const falseAlarms = rows.filter((r) => r.kind === 'reference' && r.caught.length > 0).length;
  const score = broken.filter((r) => r.caught.length > 0).length / broken.length;
  const result: LoopScore = { rows, score, falseAlarms, ok: score === 1 && falseAlarms === 0 };
  console.log(formatScore(result));
  console.log(`\n${loopScenarios().length} scenarios, ${rows.length} loops, ${((Date.now() - started) / 1000).toFixed(0)} s`);
  for (const r of rows) if (r.kind === 'reference' && r.example) console.error(`false alarm: ${r.loop}: ${r.example}`);
  if (!result.ok) process.exit(1);
}
