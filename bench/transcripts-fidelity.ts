/**
 * Real transcripts in, whole (docs/transcripts-and-eval.md): for every file of the shared data (/work/shared/data
 * and its corpus/, or $XCOMPACT_SHARED_DATA), what the import made of it (events, the harness's
 * compactions found in the file against the checkpoints imported, merged and torn lines) and
 * the replay's fidelity: for every recorded usage, the request on the imported surface just
 * before it (the same history, the harness's own compactions applied, the recorded system
 * prompt and tools, plus the fixed overhead the first request's usage implies) against that
 * usage's input tokens; median and max of |replayed − recorded| / recorded (goal ≤ 5% and ≤ 15%).
 *
 *   npx tsx bench/transcripts-fidelity.ts
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Pricer } from '../src/eval/pricing';
import { fidelitySummary, recordedOverhead, requestFidelity } from '../src/eval/recorded';
import { isCheckpoint } from '../src/session/events';
import { Session } from '../src/session/session';
import { importTranscriptFile } from '../src/transcripts/import';

const ROOT = process.env.XCOMPACT_SHARED_DATA ?? '/work/shared/data';

const pct = (x: number | undefined) => (x === undefined ? '–' : `${(100 * x).toFixed(1)}%`);

export async function run(): Promise<void> {
  const files = [ROOT, join(ROOT, 'corpus/claude-code'), join(ROOT, 'corpus/codex')]
    .filter((d) => existsSync(d))
    .flatMap((d) =>
      readdirSync(d)
        .filter((f) => f.endsWith('.jsonl'))
        .map((f) => join(d, f)),
    );
  if (files.length === 0) {
    console.log(`no shared transcripts at ${ROOT}: nothing to measure`);
    return;
  }
  const pricer = new Pricer('o200k_base');
  console.log(
    '| file | harness | events | compactions in file / checkpoints | merged / torn lines | overhead | requests measured | median error | max error | before the first compaction: requests, median, max |',
  );
  console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---|');
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const inFile =
      (text.match(/"subtype":"compact_boundary"/g) ?? []).length +
      (text.match(/"type":"compacted"/g) ?? []).length +
      (text.match(/^\{"type":"compaction"/gm) ?? []).length;
    const s = Session.inMemory('fidelity');
    const report = await importTranscriptFile(s, file);
    const overhead = recordedOverhead(s, pricer);
    const fits = requestFidelity(s, pricer);
    const fit = fidelitySummary(fits);
    const first = fidelitySummary(fits, [0]);
    console.log(
      `| ${file.slice(ROOT.length + 1)} | ${report.harness} | ${s.length} | ${inFile} / ${s.events().filter(isCheckpoint).length} | ${report.mergedLines} / ${report.tornLines} | ${overhead} | ${fit?.requests ?? 0} | ${pct(fit?.median)} | ${pct(fit?.max)} | ${first ? `${first.requests}, ${pct(first.median)}, ${pct(first.max)}` : '–'} |`,
    );
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run();
