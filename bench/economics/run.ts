/**
 * Economics of compaction on a real transcript: xcompact (the real engine) against four
 * SIMULATED peer policies (peers.ts), each living the recorded session at each window, with
 * the same summarizer, summary cap, pricing and prompt-cache model.
 *
 *   npx tsx bench/economics/run.ts [transcript.jsonl] [--windows 32768,131072]
 *
 * The transcript is a pi session file (JSONL); the default is the committed fixture.
 * The goal line is judged in this one run; nothing here asserts.
 */
import { pathToFileURL } from 'node:url';
import { Session, importPiFile } from '../../src/session/index.js';
import { findPiData } from '../../test/helpers/pi-data.js';
import { PEERS } from './peers.js';
import { CACHE_MODEL, PRICE_TABLE, Pricer, type Ledger } from './pricing.js';
import { historyFacts, retention, type Retention } from './retention.js';
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
  retention: Retention;
}

export interface WindowResult {
  window: number;
  rows: Row[];
  goal: { costRatio: number; cheapestPeer: string; retentionOk: boolean; overWindow: number; met: boolean };
}

export async function economics(source: Session, window: number): Promise<WindowResult> {
  const pricer = new Pricer('o200k_base');
  const options: SimOptions = { window, maxOutputTokens: MAX_OUTPUT_TOKENS, summaryCap: SUMMARY_CAP };
  const events = source.events();
  let lastReply = events.length;
  while (lastReply > 0 && events[lastReply - 1]!.type !== 'assistant/message') lastReply--;
  const facts = historyFacts(events.slice(0, lastReply));
  const rows: Row[] = [];
  const x = await replayXcompact(source, pricer, options);
  rows.push({ name: 'xcompact', compactions: x.compactions, prunes: x.prunes, ledger: x.ledger, retention: retention(facts, x.lastRequest) });
  for (const policy of PEERS) {
    const r = await simulate(events, policy, pricer, options);
    rows.push({ name: policy.name, compactions: r.state.compactions, prunes: r.state.prunes, ledger: r.state.ledger, retention: retention(facts, r.lastRequest) });
  }
  const ours = rows[0]!;
  const peers = rows.slice(1);
  const cheapest = peers.reduce((a, b) => (b.ledger.cost < a.ledger.cost ? b : a));
  const bestRetention = Math.max(...peers.map((p) => p.retention.all));
  const costRatio = ours.ledger.cost / cheapest.ledger.cost;
  const retentionOk = ours.retention.all >= bestRetention;
  return {
    window,
    rows,
    goal: { costRatio, cheapestPeer: cheapest.name, retentionOk, overWindow: ours.ledger.overWindow, met: costRatio <= 0.9 && retentionOk && ours.ledger.overWindow === 0 },
  };
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

export function formatTable(r: WindowResult): string {
  const head =
    'policy          compactions  prunes  requests  prompt tok  cache-miss tok  summary tok  peak÷win  >win     cost   retained (paths/errors/all)';
  const lines = r.rows.map((row) => {
    const l = row.ledger;
    return (
      `${row.name.padEnd(15)} ${String(row.compactions).padStart(11)} ${String(row.prunes).padStart(7)} ${String(l.requests).padStart(9)} ` +
      `${String(l.promptTokens).padStart(11)} ${String(l.cacheMissTokens).padStart(15)} ${String(l.summaryTokens).padStart(12)} ` +
      `${(l.peak / r.window).toFixed(2).padStart(9)} ${String(l.overWindow).padStart(5)} ${`$${l.cost.toFixed(2)}`.padStart(8)}   ` +
      `${pct(row.retention.paths)} / ${pct(row.retention.errors)} / ${pct(row.retention.all)}`
    );
  });
  const g = r.goal;
  const goal =
    `goal @ ${r.window}: xcompact cost ÷ cheapest peer (${g.cheapestPeer}) = ${g.costRatio.toFixed(3)} (target ≤ 0.900); ` +
    `retention ≥ best peer: ${g.retentionOk ? 'yes' : 'no'}; requests over the window: ${g.overWindow} → ${g.met ? 'MET' : 'NOT MET'}`;
  const money = (x: number) => `$${x.toFixed(2)}`;
  const bills = r.rows.map((row) => {
    const c = row.ledger.costs;
    return `  ${row.name.padEnd(15)} cache read ${money(c.read)}, cache write ${money(c.write)}, summary input ${money(c.summaryInput)}, summary output ${money(c.output)}`;
  });
  return [`window ${r.window} tokens`, head, ...lines, 'cost by kind:', ...bills, goal].join('\n');
}

export async function run(argv: readonly string[] = []): Promise<void> {
  let file: string | undefined;
  let windows: number[] = [...DEFAULT_WINDOWS];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--windows') windows = (argv[++i] ?? '').split(',').map(Number).filter((n) => Number.isInteger(n) && n > 0);
    else file = argv[i];
  }
  const path = file ?? findPiData().path;
  const source = Session.inMemory('economics-source');
  await importPiFile(source, path);
  const facts = historyFacts(source.events());
  console.log(`transcript: ${path} (${source.events().filter((e) => e.type === 'assistant/message').length} requests; ${facts.paths.size} distinct file paths, ${facts.errors.size} distinct error lines)`);
  console.log(`same for every policy: extractive summarizer, summary cap ${SUMMARY_CAP} tokens, agent output reservation ${MAX_OUTPUT_TOKENS}, o200k_base pricing of every message`);
  console.log(PRICE_TABLE);
  console.log(CACHE_MODEL);
  console.log(
    "xcompact = the real engine (createCompactionEngine, default policy with its cost model; headroom scaled to the summary cap, the price table above as the model's prices). " +
      'The others are SIMULATIONS from public facts:',
  );
  for (const p of PEERS) console.log(`  - ${p.description}`);
  console.log(
    "retained = share of the history's distinct file paths (tool-call arguments) and error lines (failed results; command output lines shaped like an error report) visible verbatim in the last request.",
  );
  for (const w of windows) {
    console.log('');
    console.log(formatTable(await economics(source, w)));
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  run(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
