/**
 * Real transcripts in, whole (docs/transcripts-and-eval.md): for every file of the shared data
 * (/work/shared/data and its corpus/, or $XCOMPACT_SHARED_DATA), what the import made of it
 * (events, the harness's compactions found in the file against the checkpoints imported,
 * merged and torn lines) and the fidelity of the replay's count, fitted to the file's own usage
 * (src/eval/calibration.ts): for every recorded request, the fitted count of the request on the
 * imported surface just before its reply (the same history, the harness's own compactions
 * applied) against the input tokens its usage reports; median and p90 of
 * |replayed − recorded| / recorded (goal ≤ 5% and ≤ 10% on every file), as `xcompact eval --json`
 * prints them.
 *
 *   npx tsx bench/transcripts-fidelity.ts
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { fitReplayCalibration } from '../src/eval/calibration';
import { Pricer } from '../src/eval/pricing';
import { isCheckpoint } from '../src/session/events';
import { Session } from '../src/session/session';
import { importTranscriptFile } from '../src/transcripts/import';

const ROOT = process.env.XCOMPACT_SHARED_DATA ?? '/work/shared/data';
const GOAL = { median: 0.05, p90: 0.1 };

const pct = (x: number | undefined) => (x === undefined ? '–' : `${(100 * x).toFixed(1)}%`);

/** Every transcript file under `root` and its corpus folders. */
export function sharedFiles(root = ROOT): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const f of readdirSync(dir, { withFileTypes: true })) {
      if (f.isDirectory()) walk(join(dir, f.name));
      else if (/\.jsonl?$/.test(f.name)) out.push(join(dir, f.name));
    }
  };
  if (existsSync(root)) walk(root);
  return out.sort();
}

export async function run(): Promise<void> {
  const files = sharedFiles();
  if (files.length === 0) {
    console.log(`no shared transcripts at ${ROOT}: nothing to measure`);
    return;
  }
  const pricer = new Pricer('o200k_base');
  console.log(
    '| file | harness | events | compactions in file / checkpoints | merged / torn lines | unrecorded | ratio | segments | requests | median error | p90 | max | goal |',
  );
  console.log('|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|');
  let met = 0;
  let judged = 0;
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const inFile =
      (text.match(/"subtype":\s*"compact_boundary"/g) ?? []).length +
      (text.match(/"type":\s*"compacted"/g) ?? []).length +
      (text.match(/^\{"type":"compaction"/gm) ?? []).length;
    const s = Session.inMemory('fidelity');
    let report;
    try {
      report = await importTranscriptFile(s, file);
    } catch (err) {
      console.log(`| ${file.slice(ROOT.length + 1)} | not imported: ${(err as Error).message.split('\n')[0]} |`);
      continue;
    }
    const { calibration: c, fidelity: f } = fitReplayCalibration(s, pricer);
    const ok = f !== undefined && f.median <= GOAL.median && f.p90 <= GOAL.p90;
    if (f) {
      judged++;
      if (ok) met++;
    }
    const segments = c.segments.map((g) => `${g.cause} ${g.requests}`).join(', ');
    console.log(
      `| ${file.slice(ROOT.length + 1)} | ${report.harness} | ${s.length} | ${inFile} / ${s.events().filter(isCheckpoint).length} | ${report.mergedLines} / ${report.tornLines} | ${c.unrecorded} | ${c.ratio.toFixed(2)} | ${segments || '–'} | ${f?.requests ?? 0} | ${pct(f?.median)} | ${pct(f?.p90)} | ${pct(f?.max)} | ${f ? (ok ? 'met' : 'NOT met') : 'no usage'} |`,
    );
  }
  console.log(`fidelity: median ≤ ${GOAL.median * 100}% and p90 ≤ ${GOAL.p90 * 100}% on ${met} of ${judged} files with usage`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run();
