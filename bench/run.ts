/**
 * `npm run bench`: every benchmark's `run()` in sequence, one section each. Sections are
 * imported dynamically, so a benchmark file that does not exist (yet) is skipped with a note.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

const SECTIONS = [
  {
    file: 'limits.ts',
    title:
      "At the physical limit (docs/measured.md): npm run build, import('xcompact') vs import('openai'), the first withCompaction() call on 5,000 messages, Session.open of a 38 MB log and of the shared transcripts imported vs JSON.parse",
  },
  { file: 'tokenizers.ts', title: 'Tokenizers: throughput and estimate error' },
  { file: 'meter.ts', title: 'Token meter: per-step cost and accuracy against provider usage' },
  { file: 'session.ts', title: 'Session model: appends, derivation, balance, JSONL' },
  { file: 'store.ts', title: 'Session stores: PostgreSQL against JSONL (appends, 8 writers, reopen of 100k events)' },
  { file: 'compaction.ts', title: 'Compaction economics on the real transcript: ours vs the reference policy' },
  { file: 'calibration.ts', title: 'Providers we have no tokenizer for: calibrated growth, windows in provider tokens, pathological text' },
  { file: 'background.ts', title: 'Background compaction: time the agent is blocked in afterStep, foreground vs background (2 s summarizer)' },
  {
    file: 'server-tokenizer.ts',
    title: "Tokenizer 'server' (llama.cpp/vLLM /tokenize): estimate error against the server's count vs o200k, warm prefetch cost per step vs measure()",
  },
  { file: 'one-slot.ts', title: 'One server slot (llama.cpp -np 1): agent blocked time and prompt re-evaluation, foreground vs background vs concurrency 1' },
  { file: 'scale.ts', title: 'Scale: afterStep per step at 1k, 10k, 50k nodes, reopen of 80k events, no re-tokenizing, O(appended) deriveMessages' },
  { file: 'eval.ts', title: 'xcompact eval: a 1,000-message transcript at two windows × five policies (target: under a minute on 2 cores)' },
  { file: 'recall.ts', title: 'Recall: latency at 1k/10k/100k events, index memory, needed facts one recall call returns (pi at 32k)' },
  {
    file: 'economics/run.ts',
    title: 'Economics: xcompact vs simulated peer policies (pi, Codex, opencode, Claude Code, naive) at 32k and 128k; the README table last',
  },
] as const;

export async function run(): Promise<void> {
  const started = performance.now();
  let failed = 0;
  for (const { file, title } of SECTIONS) {
    const url = new URL(`./${file}`, import.meta.url);
    console.log(`\n${'='.repeat(100)}\n${title}  (bench/${file})\n${'='.repeat(100)}`);
    if (!existsSync(fileURLToPath(url))) {
      console.log(`skipped: bench/${file} does not exist`);
      continue;
    }
    const section = performance.now();
    try {
      const mod = (await import(url.href)) as { run?: () => Promise<void> | void };
      if (typeof mod.run !== 'function') {
        console.log(`skipped: bench/${file} exports no run()`);
        continue;
      }
      await mod.run();
    } catch (err) {
      failed++;
      console.error(`bench/${file} failed:`, err);
    }
    console.log(`(${((performance.now() - section) / 1000).toFixed(1)} s)`);
  }
  console.log(`\nall benchmarks: ${((performance.now() - started) / 1000).toFixed(1)} s${failed > 0 ? `, ${failed} failed` : ''}`);
  if (failed > 0) process.exitCode = 1;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run();
}
