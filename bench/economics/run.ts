/**
 * Economics and memory of compaction on real transcripts: xcompact (the real engine) against
 * five SIMULATED peer policies (src/eval/peers.ts), each living the recorded session at each window, with the same
 * summarizer, summary cap, pricing and prompt-cache model (the replay is src/eval/).
 *
 *   npx tsx bench/economics/run.ts [transcript.jsonl …] [--windows 32768,131072] [--part 2/2] [--copies 3,5] [--table]
 *
 * `--table` prints only the README's economics table (its last lines are that table in every run).
 *
 * A transcript is any file an importer of src/session/ reads (pi today; every `import…File`
 * exported there is tried). With no file: the committed pi fixture, and the other shared
 * transcripts committed next to it when an importer reads them. `--copies` (default 1,3,5)
 * also replays n copies in a row, folders renamed per copy: longer sessions that keep meeting
 * new files. `--part i/n` replays the i-th of n consecutive parts instead. Goals are judged in
 * this one run; nothing here asserts. Charts (cost × needed recall) go to bench/out/.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  evaluateWindow,
  partOf,
  stitched,
  withoutCompactions,
  PEERS,
  PRICE_TABLE,
  CACHE_MODEL,
  DEFAULT_WINDOWS,
  type PolicyRun,
  type WindowEval,
} from '../../src/eval/index';
import * as sessionModule from '../../src/transcripts/index';
import { Session } from '../../src/session/index';
import { findPiData } from '../../test/helpers/pi-data';
import { costRecallChart } from './chart';
import { calibratedPricer, fitReplayCalibration } from '../../src/eval/calibration';
import { Pricer } from '../../src/eval/pricing';
import { WindowTooSmallError } from '../../src/eval/window';
import { run as peerFidelity } from '../peer-fidelity';

const OUT = fileURLToPath(new URL('../out/', import.meta.url));

type Importer = (session: Session, path: string) => Promise<unknown>;

/** Every file importer src/transcripts/ exports (`importPiFile`, and any other `import…File`). */
function importers(): Array<{ name: string; run: Importer }> {
  return Object.entries(sessionModule)
    .filter(([k, v]) => /^import\w+File$/.test(k) && typeof v === 'function')
    .map(([k, v]) => ({ name: k, run: v as Importer }));
}

/** The session of the first importer that reads `path` into at least one agent request, as lived (the harness's compactions left out). */
export async function importAny(path: string): Promise<Session> {
  // The harness's own compactions are left out (as xcompact eval does): every policy decides on the same conversation.
  return withoutCompactions(await importRecorded(path));
}

/** The session of the first importer that reads `path` into at least one agent request, as recorded (its compactions as checkpoints). */
export async function importRecorded(path: string): Promise<Session> {
  const tried: string[] = [];
  for (const imp of importers()) {
    const s = Session.inMemory(`economics-${basename(path)}`);
    try {
      await imp.run(s, path);
      if (s.events().some((e) => e.type === 'assistant/message')) return s;
      tried.push(`${imp.name}: no agent request`);
    } catch (err) {
      tried.push(`${imp.name}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  throw new Error(`no importer in src/session reads ${path} (${tried.join('; ')})`);
}

/** The real Claude Code session and Codex rollout committed next to the pi fixture (copies of ../shared/data's). */
export function sharedTranscriptPaths(): Array<{ name: string; path: string }> {
  const pi = findPiData().path;
  return [
    { name: 'pi', path: pi },
    { name: 'Claude Code', path: `${dirname(pi)}/claude-code/real-session.jsonl` },
    { name: 'Codex', path: `${dirname(pi)}/codex/real-rollout.jsonl` },
  ];
}

/** The committed fixtures to replay by default, as recorded: pi, and the others when an importer reads them. */
async function defaultTranscripts(): Promise<Array<{ name: string; session: Session }>> {
  const [pi, ...others] = sharedTranscriptPaths();
  const out = [{ name: pi!.name, session: await importRecorded(pi!.path) }];
  for (const { name, path } of others) {
    if (!existsSync(path)) {
      console.log(`(${name}: no fixture ${path}; skipped)`);
      continue;
    }
    try {
      out.push({ name, session: await importRecorded(path) });
    } catch (err) {
      console.log(`(${name}: ${(err as Error).message}; skipped)`);
    }
  }
  return out;
}

const pct = (x: number | undefined) => (x === undefined ? '—' : `${(100 * x).toFixed(1)}%`);
const money = (x: number) => `$${x.toFixed(2)}`;

export interface RowGoal {
  met: boolean;
  checks: Array<{ name: string; ok: boolean; detail: string }>;
}

/**
 * The goal for one row (one transcript at one window), xcompact against the VALID peers (those
 * that sent no request over the window): intent recall ≥ 99%; needed recall and recall after
 * compaction within 2 points of the best valid peer's or above; cost ≤ 1.05 × the cheapest valid
 * peer's; no request over the window; every tool call with its result.
 */
export function judgeRow(runs: readonly PolicyRun[]): RowGoal {
  const [ours, ...all] = runs as [PolicyRun, ...PolicyRun[]];
  const valid = all.filter((p) => p.ledger.overWindow === 0);
  const peers = valid.length > 0 ? valid : all;
  const cheapest = peers.reduce((a, b) => (b.ledger.cost < a.ledger.cost ? b : a));
  const bestNeeded = peers.reduce((a, b) => (b.memory.neededRecall > a.memory.neededRecall ? b : a));
  const after = peers.filter((p) => p.memory.recallAfterCompaction !== undefined);
  const bestAfter = after.length === 0 ? undefined : Math.max(...after.map((p) => p.memory.recallAfterCompaction!));
  const oursAfter = ours.memory.recallAfterCompaction;
  const ratio = ours.ledger.cost / cheapest.ledger.cost;
  // Compared at the precision the table prints.
  const points = (x: number) => Math.round(x * 1000) / 10;
  const checks = [
    { name: 'intent ≥ 99%', ok: points(ours.memory.intentRecall) >= 99, detail: pct(ours.memory.intentRecall) },
    {
      name: 'needed ≥ best valid − 2',
      ok: points(ours.memory.neededRecall) >= points(bestNeeded.memory.neededRecall) - 2,
      detail: `${pct(ours.memory.neededRecall)} vs ${bestNeeded.policy} ${pct(bestNeeded.memory.neededRecall)}`,
    },
    {
      name: 'after-compaction ≥ best valid − 2',
      // No compaction followed by a needed fact: no moment of loss to measure.
      ok: oursAfter === undefined || bestAfter === undefined || points(oursAfter) >= points(bestAfter) - 2,
      detail: `${pct(oursAfter)} vs best ${pct(bestAfter)}`,
    },
    {
      name: 'cost ≤ 1.05 × cheapest valid',
      ok: ratio <= 1.05,
      detail: `${ratio.toFixed(3)} × ${cheapest.policy} ${money(cheapest.ledger.cost)}${valid.length < all.length ? ` (${all.length - valid.length} peer(s) over the window left out)` : ''}`,
    },
    { name: '0 over window', ok: ours.ledger.overWindow === 0, detail: String(ours.ledger.overWindow) },
    { name: 'tool calls paired', ok: ours.unpairedRequests === 0, detail: `${ours.unpairedRequests} requests unpaired` },
  ];
  return { met: checks.every((c) => c.ok), checks };
}

export function formatWindow(name: string, r: WindowEval): string {
  const head =
    'policy              compactions  prunes  requests  cache-miss tok  summary tok  peak÷win  >win  unpaired     cost   needed recall  after compaction  intent recall  recoverable';
  const lines = r.runs.map((run) => {
    const l = run.ledger;
    const m = run.memory;
    return (
      `${run.policy.padEnd(19)} ${String(run.compactions).padStart(11)} ${String(run.prunes).padStart(7)} ${String(l.requests).padStart(9)} ` +
      `${String(l.cacheMissTokens).padStart(15)} ${String(l.summaryTokens).padStart(12)} ${(l.peak / r.window).toFixed(2).padStart(9)} ` +
      `${String(l.overWindow).padStart(5)} ${String(run.unpairedRequests).padStart(9)} ${money(l.cost).padStart(8)}   ` +
      `${pct(m.neededRecall).padStart(13)}  ${`${pct(m.recallAfterCompaction)} (${m.compactionsMeasured})`.padStart(16)}  ${pct(m.intentRecall).padStart(13)}  ${pct(m.recoverableRecall).padStart(11)}`
    );
  });
  const goal = judgeRow(r.runs);
  const verdict = `goal @ ${name}, ${r.window}: ${goal.checks.map((c) => `${c.name} ${c.ok ? 'yes' : 'NO'} (${c.detail})`).join('; ')} → ${goal.met ? 'MET' : 'NOT MET'}`;
  return [`${name}, window ${r.window} tokens`, head, ...lines, verdict].join('\n');
}

function writeChart(name: string, r: WindowEval): string {
  mkdirSync(OUT, { recursive: true });
  const file = `${OUT}memory-${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${r.window}.svg`;
  const points = r.runs.map((run, i) => ({ name: run.policy, cost: run.ledger.cost, recall: run.memory.neededRecall, ours: i === 0 }));
  writeFileSync(file, costRecallChart(`${name}, window ${r.window}: cost × needed recall`, points));
  return file;
}

export async function run(argv: readonly string[] = []): Promise<void> {
  const files: string[] = [];
  let windows: number[] = [...DEFAULT_WINDOWS];
  let part: [number, number] | undefined;
  let copies = [1, 3, 5];
  // --table: only the README's table (no per-policy tables, charts, pairs or peer fidelity).
  let table = false;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--table') {
      table = true;
      continue;
    }
    if (argv[i] === '--windows')
      windows = (argv[++i] ?? '')
        .split(',')
        .map(Number)
        .filter((n) => Number.isInteger(n) && n > 0);
    else if (argv[i] === '--part') {
      const m = /^(\d+)\/(\d+)$/.exec(argv[++i] ?? '');
      if (!m || Number(m[1]) < 1 || Number(m[1]) > Number(m[2])) throw new Error(`--part wants i/n with 1 ≤ i ≤ n, got ${argv[i] ?? '(nothing)'}`);
      part = [Number(m[1]), Number(m[2])];
    } else if (argv[i] === '--copies') {
      copies = (argv[++i] ?? '').split(',').map(Number);
      if (copies.length === 0 || copies.some((n) => !Number.isInteger(n) || n < 1))
        throw new Error(`--copies wants whole numbers ≥ 1, got ${argv[i] ?? '(nothing)'}`);
    } else files.push(argv[i]!);
  }
  const bases =
    files.length === 0 ? await defaultTranscripts() : await Promise.all(files.map(async (f) => ({ name: basename(f), session: await importRecorded(f) })));
  const transcripts: Array<{ name: string; session: Session; pricer: Pricer }> = [];
  for (const b of bases) {
    // Counted as eval counts (src/eval/calibration.ts): fitted to the transcript's own usage, what it sent unrecorded on every request.
    const raw = new Pricer('o200k_base');
    const { calibration } = fitReplayCalibration(b.session, raw);
    const lived = withoutCompactions(b.session);
    const piece = part === undefined ? lived : partOf(lived, part[0], part[1]);
    const label = part === undefined ? b.name : `${b.name} part ${part[0]}/${part[1]}`;
    // Copies of a transcript are built from its first part alone when it is the pi fixture (synthetic, longer sessions).
    for (const n of copies) {
      const session = n === 1 ? piece : stitched(piece, n);
      transcripts.push({ name: n === 1 ? label : `${label} × ${n}`, session, pricer: calibratedPricer(session, calibration, raw) });
    }
  }
  console.log(
    "same for every policy: extractive summarizer, summary cap 4096 tokens, agent output reservation 4096, every request counted as the transcript's provider counted (o200k_base fitted to its usage, what it sent unrecorded included: src/eval/calibration.ts)",
  );
  console.log(PRICE_TABLE);
  console.log(CACHE_MODEL);
  console.log(
    'xcompact = the real engine (createCompactionEngine, default policy; headroom scaled to the summary cap). The others are SIMULATIONS from public facts:',
  );
  for (const p of PEERS) console.log(`  - ${p.description}`);
  console.log(MEMORY_NOTE);
  const summary: string[] = [];
  const pairs: string[] = [];
  const readme: string[] = [];
  for (const t of transcripts) {
    const requests = t.session.events().filter((e) => e.type === 'assistant/message').length;
    for (const w of windows) {
      let r: WindowEval;
      try {
        r = await evaluateWindow(t.session, w, { pricer: t.pricer });
      } catch (err) {
        if (!(err instanceof WindowTooSmallError)) throw err;
        console.log(`\n${t.name}, window ${w}: left out (${err.message})`);
        readme.push(
          `| ${t.name}, ${w >= 1024 ? `${Math.round(w / 1024)}k` : w} | left out: it sends ${err.unrecorded.toLocaleString('en-US')} tokens unrecorded on every request (the smallest window that works is ${Math.ceil(err.smallest / 1024)}k) | | | | |`,
        );
        continue;
      }
      const g = judgeRow(r.runs);
      const x = r.runs[0]!;
      readme.push(readmeRow(t.name, r, g));
      if (table) continue;
      console.log('');
      console.log(`${t.name}: ${requests} requests`);
      console.log(formatWindow(t.name, r));
      console.log(`chart: ${writeChart(t.name, r)}`);
      // The pairs: xcompact alone with background summaries off, and with the cost model off.
      for (const [label, config] of [
        ['background: false', { background: false }],
        ['economics: false', { economics: false }],
      ] as const) {
        const y = (await evaluateWindow(t.session, w, { peers: [], config, pricer: t.pricer })).runs[0]!;
        const line = `${label}: ${money(y.ledger.cost)} · ${y.compactions} compactions · needed ${pct(y.memory.neededRecall)} · after ${pct(y.memory.recallAfterCompaction)} · intent ${pct(y.memory.intentRecall)} — default ÷ this = ${(x.ledger.cost / y.ledger.cost).toFixed(3)} (default ${x.compactions} compactions)`;
        console.log(`  pair ${line}`);
        pairs.push(`| ${t.name}, ${w} | ${line} |`);
      }
      summary.push(
        `| ${t.name}, ${w} | ${money(x.ledger.cost)} · ${pct(x.memory.neededRecall)} · ${pct(x.memory.recallAfterCompaction)} · ${pct(x.memory.intentRecall)} | ` +
          `${g.checks.map((c) => `${c.ok ? '✓' : '✗'} ${c.detail}`).join(' · ')} | ${g.met ? 'met' : 'NOT met'} |`,
      );
    }
  }
  if (!table) {
    console.log('\nmemory goal per row (xcompact: cost · needed · after compaction · intent | checks | goal):');
    for (const s of summary) console.log(s);
    console.log('\nthe pairs (xcompact default against one setting off):');
    for (const s of pairs) console.log(s);
  }
  console.log('\nthe table of the README (section "Economics"):\n');
  console.log(README_HEAD);
  for (const r of readme) console.log(r);
  if (files.length === 0 && !table) {
    console.log('');
    await peerFidelity();
  }
}

const README_HEAD =
  '| transcript, window | xcompact cost | needed · after compaction · intent recall | memory goal | cost ÷ cheapest valid peer | goal |\n|---|---|---|---|---|---|';

/** One row of the README's table: xcompact's cost and memory, the memory part of the goal, its cost against the cheapest valid peer, the whole goal. */
function readmeRow(name: string, r: WindowEval, g: RowGoal): string {
  const x = r.runs[0]!;
  const memory = g.checks.filter((c) => /intent|needed|after-compaction/.test(c.name)).every((c) => c.ok);
  const valid = r.runs.slice(1).filter((p) => p.ledger.overWindow === 0);
  const cheapest = (valid.length > 0 ? valid : r.runs.slice(1)).reduce((a, b) => (b.ledger.cost < a.ledger.cost ? b : a));
  const k = r.window >= 1024 ? `${Math.round(r.window / 1024)}k` : String(r.window);
  return (
    `| ${name}, ${k} | ${money(x.ledger.cost)} | ${pct(x.memory.neededRecall)} · ${pct(x.memory.recallAfterCompaction)} · ${pct(x.memory.intentRecall)} | ` +
    `${memory ? 'met' : 'not met'} | ${(x.ledger.cost / cheapest.ledger.cost).toFixed(2)}× | ${g.met ? 'met' : 'not met'} |`
  );
}

export const MEMORY_NOTE =
  'memory (src/eval/memory.ts, docs/measured.md#economics-and-memory-xcompact-against-simulated-peer-policies): needed recall = at each request, of the facts (file paths, error lines of tool results, string arguments of tool calls) that occur before it AND again in an ' +
  'assistant message at or after it in the original transcript, the share present verbatim in what the policy sends (its summaries included); mean over requests with a needed fact. ' +
  'After compaction = the same at the first request after each compaction (count in brackets). Intent = of every earlier user message, its first 160 characters (or first line ≥ 20 characters), present verbatim; mean over (request, message) pairs.';

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  run(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
