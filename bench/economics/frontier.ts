/**
 * The cost × memory frontier of xcompact's own settings, against the simulated peers: each
 * config variant replays every transcript at every window (the same replay as run.ts), and the
 * row goal (docs/measured.md#economics-and-memory-xcompact-against-simulated-peer-policies) is judged for each, with the bill split into cache reads, cache writes,
 * summary input and summary output, and the mean request. It answers "is there a setting that
 * meets the goal?" with measurements instead of guesses.
 *
 *   npx tsx bench/economics/frontier.ts [variants.json] [--windows 32768,131072] [--copies 1] [--masking] [transcript.jsonl …]
 *
 * variants.json maps a label to an engine `config` ({} is the default policy); without it, a
 * built-in set: the default, foreground compaction (background: false), later prepare points
 * and larger retained tails. `--masking` adds a simulated observation-masking policy
 * (masking.ts) to the peers' lines, for comparison only (not judged as a peer). Nothing here asserts.
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { pathToFileURL } from 'node:url';
import { evaluateWindow, stitched, DEFAULT_WINDOWS, PEERS, type PolicyRun } from '../../src/eval/index';
import type { CompactionEngineOptions } from '../../src/index';
import { maskingPolicy } from './masking';
import { importAny, judgeRow, sharedTranscriptPaths } from './run';

type Config = NonNullable<CompactionEngineOptions['config']>;

export const DEFAULT_VARIANTS: Readonly<Record<string, Config>> = {
  default: {},
  'background off': { background: false },
  'prepare 0.70': { prepareRatio: 0.7 },
  'prepare 0.74': { prepareRatio: 0.74 },
  'retain 0.25': { retainRatio: 0.25 },
  'retain 0.30, bg off': { retainRatio: 0.3, background: false },
};

const pct = (x: number | undefined) => (x === undefined ? '—' : `${(100 * x).toFixed(1)}%`);
const money = (x: number) => `$${x.toFixed(2)}`;

function line(label: string, run: PolicyRun, cheapest: number, verdict?: string): string {
  const l = run.ledger;
  const c = l.costs;
  return (
    `${label.padEnd(22)} ${money(l.cost).padStart(7)} ${`${(l.cost / cheapest).toFixed(2)}×`.padStart(6)}  ` +
    `needed ${pct(run.memory.neededRecall).padStart(6)}  after ${pct(run.memory.recallAfterCompaction).padStart(6)}  intent ${pct(run.memory.intentRecall).padStart(6)}  ` +
    `compactions ${String(run.compactions).padStart(3)}  mean ${(l.promptTokens / Math.max(1, l.requests) / 1000).toFixed(1).padStart(5)}k  ` +
    `[read ${money(c.read)} write ${money(c.write)} summary in ${money(c.summaryInput)} out ${money(c.output)}]` +
    (verdict === undefined ? '' : `  ${verdict}`)
  );
}

export async function frontier(argv: readonly string[]): Promise<void> {
  let variants: Record<string, Config> = { ...DEFAULT_VARIANTS };
  let windows = [...DEFAULT_WINDOWS];
  let copies = [1];
  const files: string[] = [];
  let masking = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--masking') masking = true;
    else if (a === '--windows')
      windows = (argv[++i] ?? '')
        .split(',')
        .map(Number)
        .filter((n) => Number.isInteger(n) && n > 0);
    else if (a === '--copies')
      copies = (argv[++i] ?? '')
        .split(',')
        .map(Number)
        .filter((n) => Number.isInteger(n) && n > 0);
    else if (a.endsWith('.json') && !a.endsWith('.jsonl')) variants = JSON.parse(readFileSync(a, 'utf8')) as Record<string, Config>;
    else files.push(a);
  }
  if (files.length === 0) files.push(...sharedTranscriptPaths().map((t) => t.path));
  for (const file of files) {
    let base;
    try {
      base = await importAny(file);
    } catch (err) {
      console.log(`(${basename(file)}: ${(err as Error).message}; skipped)`);
      continue;
    }
    for (const n of copies) {
      const session = n === 1 ? base : stitched(base, n);
      const name = n === 1 ? basename(file) : `${basename(file)} × ${n}`;
      for (const w of windows) {
        // The peers do not depend on xcompact's settings: replayed once per row.
        const peers = (await evaluateWindow(session, w, { peers: PEERS })).runs.slice(1);
        const cheapest = Math.min(...peers.map((p) => p.ledger.cost));
        console.log(`\n${name}, window ${w}: goal cost ≤ ${money(0.9 * cheapest)} (0.9 × cheapest peer)`);
        for (const p of peers) console.log(line(`  ${p.policy}`, p, cheapest));
        if (masking)
          for (const p of (await evaluateWindow(session, w, { peers: [maskingPolicy()] })).runs.slice(1))
            console.log(line(`  ${p.policy}`, p, cheapest, '(simulated, for comparison)'));
        for (const [label, config] of Object.entries(variants)) {
          const ours = (await evaluateWindow(session, w, { peers: [], config })).runs[0]!;
          const goal = judgeRow([ours, ...peers]);
          const failed = goal.checks.filter((c) => !c.ok).map((c) => c.name);
          console.log(line(label, ours, cheapest, goal.met ? 'goal MET' : `not met: ${failed.join(', ')}`));
        }
      }
    }
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  frontier(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
