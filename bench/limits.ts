/**
 * At the physical limit (docs/measured.md): each goal as a ratio against a baseline of the same run,
 * met or not.
 *
 *   npx tsx bench/limits.ts            (everything: builds dist/ first)
 *   npx tsx bench/limits.ts --part=open   (or build, import, first-call: one part alone)
 *
 * Method: both sides of a ratio alternate (xcompact, baseline, xcompact, …), 5 repeats each,
 * the min and the median of the ratios printed. Times are CPU time (process.cpuUsage: user +
 * system of the whole process), not wall time: on a shared 2-core machine the scheduler
 * decides wall time. Parts that measure a fresh process (import, first call) spawn one per
 * repeat and read the CPU time it reports for itself.
 *
 * 1. build: `npm run build`, CPU time (user + system of every process it waits for) and peak
 *    RSS (of the largest one), from /usr/bin/time. Goals ≤ 90 s, ≤ 1.5 GB.
 * 2. import: `import('xcompact')` (dist/index.js) ÷ `import('openai')`, each in a fresh node.
 *    Goal ≤ 1.5×.
 * 3. first call: `withCompaction(new OpenAI(...))` and its first `chat.completions.create` on a
 *    5,000-message conversation (the real SDK over HTTP to the local test server, through
 *    dist/) ÷ loading the tokenizer and counting those messages' texts once, each in a fresh
 *    node; and the longest event-loop block during the call (monitorEventLoopDelay). Goals
 *    ≤ 2×, no block over 50 ms.
 * 4. open: an outside-shaped log (bench/outside-log.ts: 80k events, 38 MB of code-sized tool
 *    results, written as an agent with Session + SessionWriter and no engine writes it) and the
 *    shared transcripts imported: `Session.open` ÷ read + `JSON.parse` of the file's lines (goal
 *    ≤ 2×); open + createCompactionEngine + first `afterStep()` ÷ the same (goal ≤ 2.5× with the
 *    snapshot an engine left, ≤ 4× without one: the log as its writer left it, with the
 *    writer-side snapshot). For reference, the same with no sidecar at all (a log from elsewhere:
 *    every node tokenized, no goal).
 *
 * The end prints the four ratios of parts 2–4 as one table: this run's medians.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createCompactionEngine } from '../src/engine/facade';
import { JsonlStore, Session } from '../src/session/index';
import { importTranscriptFile } from '../src/transcripts/index';
import { describe, writeOutsideLog } from './outside-log';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SHARED = '/work/shared/data';
const REPEATS = 5;
const MODELS = { 'bench/huge': { contextWindow: 50_000_000, maxOutputTokens: 8_000 } };
/** Economics off: at millions of tokens a request it rightly compacts, and a compaction is no part of opening. */
const CONFIG = { economics: false };
/** The outside log's route, with a window that holds it. */
const OUTSIDE_MODELS = { 'openai/gpt-4o': MODELS['bench/huge'] };

type Print = (line: string) => void;

const cpuMs = (): number => {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1000;
};
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const median = (xs: number[]) => sorted(xs)[xs.length >> 1]!;
const min = (xs: number[]) => Math.min(...xs);
const verdict = (ok: boolean) => (ok ? 'met' : 'NOT met');
const fmt = (x: number) => x.toFixed(2);

/** min and median of per-repeat ratios, and whether the median meets `goal`. */
function ratioLine(label: string, ratios: number[], goal: number): { line: string; met: boolean; median: number } {
  const met = median(ratios) <= goal;
  return { line: `${label}: min ${fmt(min(ratios))}×, median ${fmt(median(ratios))}× (goal ≤ ${goal}×) ${verdict(met)}`, met, median: median(ratios) };
}

/** The four ratios' table: each measure's median ratio of this run, printed at the end. */
const table: Array<{ measure: string; goal: number; median: number }> = [];
const tabled = (measure: string, goal: number, r: { median: number }): void => {
  table.push({ measure, goal, median: r.median });
};

// ---------------------------------------------------------------------------------------------
// 1. build

export function build(print: Print): void {
  const r = spawnSync('/usr/bin/time', ['-f', '%U %S %M', 'nice', '-n', '5', 'npm', 'run', '-s', 'build'], { cwd: ROOT, encoding: 'utf8' });
  const last = r.stderr.trim().split('\n').at(-1) ?? '';
  const [user, sys, kb] = last.split(' ').map(Number);
  if (r.status !== 0 || user === undefined || sys === undefined || kb === undefined || Number.isNaN(kb)) {
    print(`1. npm run build failed (exit ${r.status}): ${r.stderr.slice(-400)}`);
    return;
  }
  const cpu = user + sys;
  const gb = (kb * 1024) / 1e9;
  print(
    `1. npm run build (tsc declarations once + tsup, /usr/bin/time): CPU ${cpu.toFixed(1)} s (goal ≤ 90 s) ${verdict(cpu <= 90)}; peak RSS ${gb.toFixed(2)} GB (goal ≤ 1.5 GB) ${verdict(gb <= 1.5)}`,
  );
}

// ---------------------------------------------------------------------------------------------
// 2. import, 3. first call: fresh processes

/** Child scripts live under .build/ (ignored by git) so that bare imports resolve to node_modules. */
function childScript(name: string, source: string): string {
  const dir = join(ROOT, '.build', 'bench');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, name);
  writeFileSync(file, source);
  return file;
}

function runChild(file: string, args: string[] = []): Record<string, number> {
  const r = spawnSync(process.execPath, [file, ...args], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${file} failed (${r.error ? String(r.error) : `exit ${r.status}`}): ${(r.stderr ?? '').slice(-1000)}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, number>;
}

const IMPORT_CHILD = `
const what = process.argv[2];
const c0 = process.cpuUsage();
await import(what);
const c = process.cpuUsage(c0);
console.log(JSON.stringify({ cpu: (c.user + c.system) / 1000, heap: process.memoryUsage().heapUsed }));
`;

export function importTime(print: Print): void {
  const dist = join(ROOT, 'dist', 'index.js');
  if (!existsSync(dist)) {
    print('2. import: dist/ is missing (run npm run build)');
    return;
  }
  const file = childScript('import.mjs', IMPORT_CHILD);
  const ours: number[] = [];
  const theirs: number[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < REPEATS; i++) {
    const a = runChild(file, [pathToFileURL(dist).href]).cpu!;
    const b = runChild(file, ['openai']).cpu!;
    ours.push(a);
    theirs.push(b);
    ratios.push(a / b);
  }
  print(
    `2. import('xcompact') through dist/ ${median(ours).toFixed(0)} ms CPU, import('openai') ${median(theirs).toFixed(0)} ms (medians; fresh node each, alternated, ${REPEATS} each)`,
  );
  const r = ratioLine("import('xcompact') ÷ import('openai')", ratios, 1.5);
  tabled("`import('xcompact')` ÷ `import('openai')`, each in a fresh process", 1.5, r);
  print(`   ${r.line}`);
}

/** A 5,000-message conversation as the caller's own list: one user turn of tool steps over this project's code. */
const CONVERSATION = `
export function conversation(lines, n) {
  const messages = [{ role: 'system', content: 'You are a coding agent. Work in small verified steps.' }, { role: 'user', content: 'Read the sources and summarise each module.' }];
  for (let i = 0; messages.length < n; i++) {
    const at = (i * 37) % (lines.length - 12);
    const id = 'call_' + i;
    messages.push({ role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'read', arguments: JSON.stringify({ path: 'src/file-' + (i % 300) + '.ts', offset: at, limit: 12 }) } }] });
    messages.push({ role: 'tool', tool_call_id: id, content: lines.slice(at, at + 12).join('\\n') + '\\n// ' + i });
  }
  if (messages.at(-1).role === 'assistant') messages.pop();
  return messages;
}
export function texts(messages) {
  const out = [];
  for (const m of messages) {
    if (typeof m.content === 'string') out.push(m.content);
    for (const c of m.tool_calls ?? []) out.push(c.function.name, c.function.arguments);
  }
  return out;
}
`;

const FIRST_CALL_CHILD = (dist: string) => `
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import OpenAI from 'openai';
import { conversation } from './conversation.mjs';
const lines = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const n = Number(process.argv[3]);
const { withCompaction, Session } = await import(${JSON.stringify(pathToFileURL(join(dist, 'index.js')).href)});
const { startOpenAIServer } = await import(${JSON.stringify(pathToFileURL(join(dist, 'testing.js')).href)});
const server = await startOpenAIServer();
const messages = conversation(lines, n);
const h = monitorEventLoopDelay({ resolution: 5 });
h.enable();
// monitorEventLoopDelay's histogram misses a block its timer was not armed across; a turn of
// setImmediate sees every one: the longest time between two turns of the loop.
let gap = 0, last = performance.now();
const tick = () => { const now = performance.now(); gap = Math.max(gap, now - last); last = now; ticker = setImmediate(tick); };
let ticker = setImmediate(tick);
const c0 = process.cpuUsage();
const client = withCompaction(new OpenAI({ baseURL: server.baseURL, apiKey: 'bench', maxRetries: 0 }), { session: Session.inMemory('first-call'), models: { huge: { contextWindow: 50000000, maxOutputTokens: 8000 } }, config: { economics: false } });
await client.chat.completions.create({ model: 'huge', messages, max_tokens: 16 });
const c = process.cpuUsage(c0);
h.disable();
clearImmediate(ticker);
await server.close();
console.log(JSON.stringify({ cpu: (c.user + c.system) / 1000, blockMs: h.max / 1e6, gapMs: gap, recorded: client.compaction.session.length }));
`;

const COUNT_CHILD = (dist: string) => `
import { readFileSync } from 'node:fs';
import { conversation, texts } from './conversation.mjs';
const lines = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const n = Number(process.argv[3]);
const { getTokenizer } = await import(${JSON.stringify(pathToFileURL(join(dist, 'index.js')).href)});
const list = texts(conversation(lines, n));
const c0 = process.cpuUsage();
const t = getTokenizer('o200k_base');
t.count('x'); // the rank table loads on the first count
const c1 = process.cpuUsage(c0);
let tokens = 0;
for (const s of list) tokens += t.count(s);
const c2 = process.cpuUsage(c0);
console.log(JSON.stringify({ load: (c1.user + c1.system) / 1000, cpu: (c2.user + c2.system) / 1000, tokens }));
`;

/** Lines of this project's TypeScript of at least 100 characters: a 12-line snippet of them is ~1.6 KB. */
function codeLines(): string[] {
  const lines: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith('.ts')) for (const l of readFileSync(path, 'utf8').split('\n')) if (l.length >= 100) lines.push(l);
    }
  };
  walk(join(ROOT, 'src'));
  return lines;
}

export function firstCall(print: Print, messages = 5_000): void {
  const dist = join(ROOT, 'dist');
  if (!existsSync(join(dist, 'index.js'))) {
    print('3. first call: dist/ is missing (run npm run build)');
    return;
  }
  childScript('conversation.mjs', CONVERSATION);
  const call = childScript('first-call.mjs', FIRST_CALL_CHILD(dist));
  const count = childScript('count.mjs', COUNT_CHILD(dist));
  // A file, not an argument: an argument is limited to 128 KB.
  const lines = childScript('lines.json', JSON.stringify(codeLines()));
  const calls: Array<Record<string, number>> = [];
  const counts: Array<Record<string, number>> = [];
  for (let i = 0; i < REPEATS; i++) {
    calls.push(runChild(call, [lines, String(messages)]));
    counts.push(runChild(count, [lines, String(messages)]));
  }
  const withLoad = calls.map((c, i) => c.cpu! / counts[i]!.cpu!);
  const countOnly = calls.map((c, i) => c.cpu! / (counts[i]!.cpu! - counts[i]!.load!));
  const block = median(calls.map((c) => c.blockMs!));
  print(
    `3. first withCompaction() call on ${messages.toLocaleString('en-US')} messages (${calls[0]!.recorded!.toLocaleString('en-US')} events recorded): ${median(calls.map((c) => c.cpu!)).toFixed(0)} ms CPU; ` +
      `loading o200k ${median(counts.map((c) => c.load!)).toFixed(0)} ms + counting the messages' texts once ${median(counts.map((c) => c.cpu! - c.load!)).toFixed(0)} ms (medians, fresh node each, alternated)`,
  );
  const r = ratioLine('first call ÷ (load + count once)', withLoad, 2);
  tabled('first drop-in call on 5,000 messages ÷ a fresh process’s o200k load + one count pass', 2, r);
  print(`   ${r.line}`);
  print(`   ${ratioLine('first call ÷ count once (tokenizer already loaded)', countOnly, 2).line}`);
  print(
    `   longest event-loop block during the call: ${block.toFixed(0)} ms (monitorEventLoopDelay's max, median of ${REPEATS}; goal ≤ 50 ms) ${verdict(block <= 50)}`,
  );
  print(
    `   longest time between two turns of the loop (setImmediate): ${median(calls.map((c) => c.gapMs!)).toFixed(0)} ms, most of it the o200k table's synchronous load on the first count (no goal; not chunked yet)`,
  );
}

// ---------------------------------------------------------------------------------------------
// 4. open

/** CPU ms of reading the file and JSON.parse of each line: the physical limit's baseline. */
function parseCpu(file: string): number {
  const t = cpuMs();
  const lines = readFileSync(file).toString('utf8').split('\n');
  let n = 0;
  for (const line of lines) if (line.length > 0) n += JSON.parse(line) === null ? 0 : 1;
  if (n === 0) throw new Error('empty log');
  return cpuMs() - t;
}

async function openCpu(store: JsonlStore, id: string): Promise<{ open: number; total: number; status: string }> {
  const t0 = cpuMs();
  const session = await Session.open(store, id);
  const open = cpuMs() - t0;
  // An imported transcript's model gets a window too, so its first afterStep prices the log and measures.
  const h = session.latestHeader?.data;
  const models = h ? { ...MODELS, [`${h.provider}/${h.model}`]: MODELS['bench/huge'] } : MODELS;
  const engine = createCompactionEngine({ session, models, config: CONFIG });
  const r = await engine.afterStep();
  const total = cpuMs() - t0;
  engine.stop();
  await session.close();
  return { open, total, status: r.status };
}

/**
 * Open ratios of `id` with its sidecar as `sidecar` gives it (bytes to open with each time, or
 * none): open ÷ parse against goal 2×, open + engine + first step against `goal`.
 */
async function openCase(
  print: Print,
  label: string,
  store: JsonlStore,
  id: string,
  sidecar: { bytes: Buffer | undefined; what: string },
  goal: number | undefined,
): Promise<{ open: { median: number }; total: { median: number } }> {
  const file = join(store.dir, `${id}.jsonl`);
  const path = `${file}.prices`;
  const saved = sidecar.bytes;
  const opens: number[] = [];
  const totals: number[] = [];
  let status = '';
  for (let i = 0; i < REPEATS; i++) {
    // Each open saves a snapshot at close: put back the one it is timed with (or none).
    if (saved) writeFileSync(path, saved);
    else rmSync(path, { force: true });
    const parse = parseCpu(file);
    const r = await openCpu(store, id);
    opens.push(r.open / parse);
    totals.push(r.total / parse);
    status = r.status;
  }
  const mb = statSync(file).size / 1e6;
  if (process.env.LIMITS_DEBUG) print(`   (${label}: parse ${parseCpu(file).toFixed(0)} ms CPU)`);
  const o = ratioLine('open ÷ parse', opens, 2);
  const t = goal === undefined ? undefined : ratioLine(`open + engine + first afterStep (${status}) ÷ parse`, totals, goal);
  const reference = `open + engine + first afterStep (${status}) ÷ parse: min ${fmt(min(totals))}×, median ${fmt(median(totals))}× (no goal)`;
  print(`   ${label} (${mb.toFixed(1)} MB), ${sidecar.what}: ${o.line}; ${t ? t.line : reference}`);
  return { open: o, total: t ?? { median: median(totals) } };
}

export async function open(print: Print): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'xcompact-limits-'));
  try {
    const store = new JsonlStore(dir, { sync: false });
    const id = 'outside';
    const file = join(dir, `${id}.jsonl`);
    const shape = await writeOutsideLog(store, id);
    print(
      `4. open, CPU time ÷ read + JSON.parse of the file's lines (${REPEATS} alternated repeats). The outside-shaped log: ${describe({ ...shape, bytes: statSync(file).size })}`,
    );
    // As its writer left it: the writer-side snapshot (no engine ever ran on it).
    const written = existsSync(`${file}.prices`) ? readFileSync(`${file}.prices`) : undefined;
    const without = await openCase(
      print,
      'as written',
      store,
      id,
      { bytes: written, what: written ? "no engine's snapshot (the writer's)" : 'no snapshot' },
      4,
    );
    // After an engine ran on it and closed: the engine's snapshot.
    const session = await Session.open(store, id);
    const engine = createCompactionEngine({ session, models: OUTSIDE_MODELS, config: CONFIG });
    await engine.afterStep();
    engine.stop();
    await session.close();
    const withIt = await openCase(print, 'after an engine', store, id, { bytes: readFileSync(`${file}.prices`), what: "the engine's snapshot" }, 2.5);
    await openCase(print, 'from elsewhere', store, id, { bytes: undefined, what: 'no sidecar at all (for reference)' }, undefined);
    tabled('`Session.open` ÷ read + `JSON.parse` of its lines (the log as written)', 2, without.open);
    tabled('reopen + engine + first step ÷ the same, with the snapshot', 2.5, withIt.total);
    tabled("reopen + engine + first step ÷ the same, without (no engine's snapshot: the writer's)", 4, without.total);

    const shared = existsSync(SHARED)
      ? readdirSync(SHARED)
          .filter((f) => f.endsWith('.jsonl'))
          .sort()
      : [];
    if (shared.length === 0) print(`   (no shared transcripts at ${SHARED}: imported logs skipped)`);
    for (const name of shared) {
      const imported = `imported-${name.replace(/\.jsonl$/, '').replace(/[^A-Za-z0-9._-]/g, '-')}`;
      const s = await Session.open(store, imported);
      await importTranscriptFile(s, join(SHARED, name));
      await s.close();
      const sidecar = join(dir, `${imported}.jsonl.prices`);
      const bytes = existsSync(sidecar) ? readFileSync(sidecar) : undefined;
      await openCase(
        print,
        `${name} imported`,
        store,
        imported,
        { bytes, what: bytes ? "the importer's snapshot" : 'no snapshot (under 2,000 events)' },
        bytes ? 2.5 : 4,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function printTable(print: Print): void {
  if (table.length === 0) return;
  print('');
  print('At the physical limit, this run (medians of the alternated repeats):');
  print('| measure | goal | this run |');
  print('|---|---|---|');
  for (const row of table) print(`| ${row.measure} | ≤ ${row.goal}× | ${fmt(row.median)}× ${verdict(row.median <= row.goal)} |`);
}

export async function run(options: { print?: Print; parts?: string[] } = {}): Promise<void> {
  const print = options.print ?? ((l: string) => console.log(l));
  const parts = options.parts ?? ['build', 'import', 'first-call', 'open'];
  print(`method: CPU time (process.cpuUsage), ${REPEATS} alternated repeats per ratio, min and median printed; the verdict is the median's`);
  if (parts.includes('build')) build(print);
  if (parts.includes('import')) importTime(print);
  if (parts.includes('first-call')) firstCall(print);
  if (parts.includes('open')) await open(print);
  printTable(print);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const part = process.argv.find((a) => a.startsWith('--part='))?.slice('--part='.length);
  await run(part ? { parts: [part] } : {});
}
