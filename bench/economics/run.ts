/**
 * Economics of compaction on a real transcript: xcompact (the real engine) against four
 * SIMULATED peer policies (peers.ts), each living the recorded session at each window, with
 * the same summarizer, summary cap, pricing and prompt-cache model.
 *
 *   npx tsx bench/economics/run.ts [transcript.jsonl] [--windows 32768,131072] [--part 2/2] [--copies 3]
 *
 * The transcript is a pi session file (JSONL); the default is the committed fixture.
 * `--part i/n` replays only the i-th of n consecutive parts (split at turn starts, about
 * equal in requests): a second transcript from the same file, to check the policy is not
 * fitted to one history. `--copies n` replays n copies in a row, each with its folders renamed:
 * a longer session that keeps meeting new files (synthetic, built from real messages).
 * The goal line is judged in this one run; nothing here asserts.
 */
import { pathToFileURL } from 'node:url';
import { Session, importPiFile } from '../../src/session/index.js';
import type { AppendInput } from '../../src/session/events.js';
import { findPiData } from '../../test/helpers/pi-data.js';
import { PEERS } from './peers.js';
import { CACHE_MODEL, PRICE_TABLE, Pricer, type Ledger } from './pricing.js';
import { historyFacts, RetentionTracker, type RetentionFigures } from './retention.js';
import { simulate, type SimOptions } from './simulate.js';
import { replayXcompact } from './xcompact.js';

export const DEFAULT_WINDOWS = [32_768, 131_072] as const;
const MAX_OUTPUT_TOKENS = 4_096;
const SUMMARY_CAP = 4_096;

export interface Row {
  name: string;
  compactions: number;
  prunes: number;
  ledger: Ledger;
  retention: RetentionFigures;
}

export interface WindowResult {
  window: number;
  rows: Row[];
  /** xcompact's background setting and how many of its compactions were prepared in the background. */
  background: { on: boolean; compactions: number };
  goal: { costRatio: number; cheapestPeer: string; bestRetention: number; retentionOk: boolean; overWindow: number; met: boolean };
}

export async function economics(source: Session, window: number): Promise<WindowResult> {
  const pricer = new Pricer('o200k_base');
  const options: SimOptions = { window, maxOutputTokens: MAX_OUTPUT_TOKENS, summaryCap: SUMMARY_CAP };
  const events = source.events();
  const facts = historyFacts(events);
  const rows: Row[] = [];
  const ours = new RetentionTracker(facts);
  const x = await replayXcompact(source, pricer, options, {}, (m) => ours.observe(m));
  rows.push({ name: 'xcompact', compactions: x.compactions, prunes: x.prunes, ledger: x.ledger, retention: ours.figures() });
  for (const policy of PEERS) {
    const tracker = new RetentionTracker(facts);
    const r = await simulate(events, policy, pricer, options, (m) => tracker.observe(m));
    rows.push({ name: policy.name, compactions: r.state.compactions, prunes: r.state.prunes, ledger: r.state.ledger, retention: tracker.figures() });
  }
  return { window, rows, background: { on: x.background, compactions: x.backgroundCompactions }, goal: judge(rows) };
}

/** The goal: cost ≤ 0.9 × the cheapest peer, mean retention ≥ the best peer's, no request over the window. */
export function judge(rows: readonly Row[]): WindowResult['goal'] {
  const ours = rows[0]!;
  const peers = rows.slice(1);
  const cheapest = peers.reduce((a, b) => (b.ledger.cost < a.ledger.cost ? b : a));
  const bestRetention = Math.max(...peers.map((p) => p.retention.mean));
  const costRatio = ours.ledger.cost / cheapest.ledger.cost;
  // Compared at the precision the table prints: a difference of less than 0.05 points is no difference.
  const retentionOk = Math.round(ours.retention.mean * 1000) >= Math.round(bestRetention * 1000);
  const overWindow = ours.ledger.overWindow;
  return { costRatio, cheapestPeer: cheapest.name, bestRetention, retentionOk, overWindow, met: costRatio <= 0.9 && retentionOk && overWindow === 0 };
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

export function formatTable(r: WindowResult): string {
  const head =
    'policy          compactions  prunes  requests  prompt tok  cache-miss tok  summary tok  peak÷win  >win     cost   retained mean / min   last (paths/errors/all)';
  const lines = r.rows.map((row) => {
    const l = row.ledger;
    return (
      `${row.name.padEnd(15)} ${String(row.compactions).padStart(11)} ${String(row.prunes).padStart(7)} ${String(l.requests).padStart(9)} ` +
      `${String(l.promptTokens).padStart(11)} ${String(l.cacheMissTokens).padStart(15)} ${String(l.summaryTokens).padStart(12)} ` +
      `${(l.peak / r.window).toFixed(2).padStart(9)} ${String(l.overWindow).padStart(5)} ${`$${l.cost.toFixed(2)}`.padStart(8)}   ` +
      `${pct(row.retention.mean).padStart(13)} / ${pct(row.retention.min).padStart(6)}   ` +
      `${pct(row.retention.last.paths)} / ${pct(row.retention.last.errors)} / ${pct(row.retention.last.all)}`
    );
  });
  const g = r.goal;
  const goal =
    `goal @ ${r.window}: xcompact cost ÷ cheapest peer (${g.cheapestPeer}) = ${g.costRatio.toFixed(3)} (target ≤ 0.900); ` +
    `mean retention ${pct(r.rows[0]!.retention.mean)} ≥ best peer's ${pct(g.bestRetention)}: ${g.retentionOk ? 'yes' : 'no'}; requests over the window: ${g.overWindow} → ${g.met ? 'MET' : 'NOT MET'}`;
  const money = (x: number) => `$${x.toFixed(2)}`;
  const bills = r.rows.map((row) => {
    const c = row.ledger.costs;
    return `  ${row.name.padEnd(15)} cache read ${money(c.read)}, cache write ${money(c.write)}, summary input ${money(c.summaryInput)}, summary output ${money(c.output)}`;
  });
  const bg = `xcompact: background compaction ${r.background.on ? 'on' : 'off'}; ${r.background.compactions} of ${r.rows[0]!.compactions} compactions prepared in the background`;
  return [`window ${r.window} tokens`, head, ...lines, 'cost by kind:', ...bills, bg, goal].join('\n');
}

/**
 * The `part`-th of `parts` consecutive pieces of a session (1-based), cut at turn starts so
 * each piece has about the same number of agent requests; a fresh session of its events.
 */
export function partOf(source: Session, part: number, parts: number): Session {
  const events = source.events();
  const total = events.filter((e) => e.type === 'assistant/message').length;
  const cuts = [0];
  let requests = 0;
  events.forEach((e, i) => {
    if (e.type === 'assistant/message') requests++;
    if (e.type === 'turn/start' && cuts.length < parts && requests >= (cuts.length * total) / parts) cuts.push(i);
  });
  cuts.push(events.length);
  const out = Session.inMemory(`economics-part-${part}-of-${parts}`);
  for (const e of events.slice(cuts[part - 1], cuts[part])) {
    const input = { type: e.type, data: e.data } as AppendInput;
    if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    out.append(input);
  }
  return out;
}

/**
 * A longer session made of `copies` replays of `source` one after another, the n-th copy's
 * top-level folders renamed (`packages/` → `packages-2/`): a session that keeps meeting new
 * files and errors, turn numbers running on. Synthetic, but every message is a real one.
 */
export function stitched(source: Session, copies: number): Session {
  const events = source.events();
  const folders = new Set<string>();
  for (const p of historyFacts(events).paths) {
    const m = /^([\w.-]+)\//.exec(p);
    if (m?.[1] !== undefined && m[1] !== '.' && m[1] !== '..') folders.add(m[1]);
  }
  const turns = 1 + Math.max(0, ...events.map((e) => (typeof (e.data as { turn?: unknown }).turn === 'number' ? (e.data as { turn: number }).turn : 0)));
  const out = Session.inMemory(`economics-${copies}-copies`);
  for (let k = 0; k < copies; k++) {
    const rename = (text: string) => (k === 0 ? text : [...folders].reduce((t, f) => t.split(`${f}/`).join(`${f}-${k + 1}/`), text));
    for (const e of events) {
      const data = JSON.parse(rename(JSON.stringify(e.data))) as { turn?: number; callId?: string; content?: Array<{ type: string; id?: string }> };
      if (typeof data.turn === 'number') data.turn += k * turns;
      // Tool call ids are unique on a surface: each copy gets its own.
      if (k > 0 && typeof data.callId === 'string') data.callId += `-${k + 1}`;
      if (k > 0 && e.type === 'assistant/message') for (const b of data.content ?? []) if (b.type === 'tool-call' && b.id !== undefined) b.id += `-${k + 1}`;
      const input = { type: e.type, data } as AppendInput;
      if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
      out.append(input);
    }
  }
  return out;
}

export async function run(argv: readonly string[] = []): Promise<void> {
  let file: string | undefined;
  let windows: number[] = [...DEFAULT_WINDOWS];
  let part: [number, number] | undefined;
  let copies = 1;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--windows') windows = (argv[++i] ?? '').split(',').map(Number).filter((n) => Number.isInteger(n) && n > 0);
    else if (argv[i] === '--part') {
      const m = /^(\d+)\/(\d+)$/.exec(argv[++i] ?? '');
      if (!m || Number(m[1]) < 1 || Number(m[1]) > Number(m[2])) throw new Error(`--part wants i/n with 1 ≤ i ≤ n, got ${argv[i] ?? '(nothing)'}`);
      part = [Number(m[1]), Number(m[2])];
    } else if (argv[i] === '--copies') {
      copies = Number(argv[++i]);
      if (!Number.isInteger(copies) || copies < 1) throw new Error(`--copies wants a whole number ≥ 1, got ${argv[i] ?? '(nothing)'}`);
    } else file = argv[i];
  }
  const path = file ?? findPiData().path;
  const whole = Session.inMemory('economics-source');
  await importPiFile(whole, path);
  const piece = part === undefined ? whole : partOf(whole, part[0], part[1]);
  const source = copies === 1 ? piece : stitched(piece, copies);
  const facts = historyFacts(source.events());
  const requests = source.events().filter((e) => e.type === 'assistant/message').length;
  console.log(
    `transcript: ${path}${part === undefined ? '' : ` part ${part[0]}/${part[1]}`}${copies === 1 ? '' : ` × ${copies} copies, folders renamed per copy (synthetic)`} (${requests} requests; ${facts.paths.size} distinct file paths, ${facts.errors.size} distinct error lines)`,
  );
  console.log(`same for every policy: extractive summarizer, summary cap ${SUMMARY_CAP} tokens, agent output reservation ${MAX_OUTPUT_TOKENS}, o200k_base pricing of every message`);
  console.log(PRICE_TABLE);
  console.log(CACHE_MODEL);
  console.log(
    "xcompact = the real engine (createCompactionEngine, default policy with its cost model; headroom scaled to the summary cap, the price table above as the model's prices). " +
      'The others are SIMULATIONS from public facts:',
  );
  for (const p of PEERS) console.log(`  - ${p.description}`);
  console.log(RETENTION_NOTE);
  for (const w of windows) {
    console.log('');
    console.log(formatTable(await economics(source, w)));
  }
}

export const RETENTION_NOTE =
  "retained = of the distinct file paths (tool-call arguments) and error lines (failed results; command output lines shaped like an error report) the history held before a request, the share visible verbatim in that request (messages and the policy's own summaries), " +
  "measured at every request: mean and minimum over the run, and the last request by kind. Summaries are the same extractive prose for every policy; the lists beside it only where the policy's design has them " +
  '(xcompact: read/modified files and unresolved errors; pi: read/modified files; Codex, opencode, naive: none). Goal on the mean.';

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  run(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
