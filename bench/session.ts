/**
 * Session model benchmark: for logs of 1k / 10k / 100k events (a realistic agent mix of
 * turns, steps, request headers, assistant messages with 0..3 parallel tool calls, and their
 * results) it measures, in one run, the incremental Session against a naive baseline that
 * folds the whole log from scratch for every question:
 *
 * - µs per append (the last ~1000 appends at that size; the naive append rebuilds the
 *   projection to validate, as a log without incremental state must);
 * - µs per deriveMessages() right after one surface append;
 * - µs per balance query (balancedAfter of a random node; balancedCuts() listed too);
 * - JSONL append+flush throughput, one flush per 100 appends (events/s and MB/s).
 *
 * Ratios are naive ÷ ours from the same run. Per-append cost should be flat in history
 * size: (µs/append at 100k) ÷ (µs/append at 1k) ≤ 2. Run: `npx tsx bench/session.ts`.
 */
import { appendFile, mkdtemp, open as openFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { toChatMessage, type ChatMessage } from '../src/session/derive';
import { JsonlStore, Session, type AppendInput, type SessionEvent, type SurfaceEvent } from '../src/session/index';

const SIZES = [1_000, 10_000, 100_000] as const;
const APPEND_WINDOW = 1_000;
const FLUSH_EVERY = 100;

async function sizeOf(file: string): Promise<number> {
  return stat(file).then(
    (st) => st.size,
    () => 0,
  );
}

// ---------------------------------------------------------------------------
// Workload: an endless, deterministic, always-valid stream of appends

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const LOREM = 'The quick brown fox jumps over the lazy dog; const x = await read("src/index.ts"); ';
const text = (chars: number) => LOREM.repeat(Math.ceil(chars / LOREM.length)).slice(0, chars);
/** A small pool of shared strings: realistic sizes without gigabytes of heap. */
const POOL = { user: [80, 200, 600].map(text), assistant: [40, 300, 900].map(text), result: [200, 1500, 4000, 12000].map(text) };
const TOOLS = [
  { type: 'function', function: { name: 'read', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
  { type: 'function', function: { name: 'bash', description: 'Run a command', parameters: { type: 'object', properties: { cmd: { type: 'string' } } } } },
];

function* workload(seed = 1): Generator<AppendInput> {
  const rnd = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  let call = 0;
  yield { type: 'system/message', data: { text: text(2000) }, surfaceOp: 'append' };
  for (let turn = 0; ; turn++) {
    yield { type: 'turn/start', data: { turn } };
    yield { type: 'user/message', data: { content: [{ type: 'text', text: pick(POOL.user) }] }, surfaceOp: 'append' };
    const steps = 1 + Math.floor(rnd() * 5);
    for (let step = 0; step < steps; step++) {
      yield { type: 'step/start', data: { turn, step } };
      yield { type: 'request/header', data: { provider: 'deepseek', model: 'deepseek-chat', tools: TOOLS, maxTokens: 8192 } };
      const calls = step < steps - 1 ? 1 + Math.floor(rnd() * 3) : 0;
      const ids = Array.from({ length: calls }, () => `call_${call++}`);
      const content: AppendInput<'assistant/message'>['data']['content'] = [];
      if (rnd() < 0.3) content.push({ type: 'reasoning', text: pick(POOL.assistant) });
      if (calls === 0 || rnd() < 0.4) content.push({ type: 'text', text: pick(POOL.assistant) });
      for (const id of ids) content.push({ type: 'tool-call', id, name: pick(['read', 'bash']), arguments: `{"path":"src/${id}.ts"}` });
      const usage = { promptTokens: 1000 + call * 10, completionTokens: 200, cachedTokens: 800 };
      yield { type: 'assistant/message', data: { content, usage, provider: 'deepseek', model: 'deepseek-chat' }, surfaceOp: 'append' };
      for (const id of ids.sort(() => rnd() - 0.5)) {
        yield { type: 'tool/result', data: { callId: id, toolName: 'read', content: [{ type: 'text', text: pick(POOL.result) }] }, surfaceOp: 'append' };
      }
      yield { type: 'step/end', data: { turn, step } };
    }
    yield { type: 'turn/end', data: { turn } };
  }
}

function take(gen: Generator<AppendInput>, n: number): AppendInput[] {
  const out: AppendInput[] = [];
  for (let i = 0; i < n; i++) out.push(gen.next().value as AppendInput);
  return out;
}

// ---------------------------------------------------------------------------
// Naive baseline: no incremental state, every question folds the whole log

interface NaiveProjection {
  surface: number[];
  messages: ChatMessage[];
  /** cuts[p]: is the cut before surface node p balanced (matched by call id). */
  cuts: boolean[];
  pending: Set<string>;
}

/** Folds all events into surface + messages + balance, from scratch. */
export function naiveProject(log: readonly SessionEvent[]): NaiveProjection {
  const surface: number[] = [];
  for (const e of log) {
    if (e.surfaceOp === undefined) continue;
    if (e.surfaceOp === 'append') surface.push(e.seq);
    else {
      const start = surface.indexOf(e.surfaceOp.start);
      const end = surface.indexOf(e.surfaceOp.end);
      surface.splice(start, end - start + 1, e.seq);
    }
  }
  const messages = surface.map((seq) => toChatMessage(log[seq] as SurfaceEvent));
  const pending = new Set<string>();
  const cuts = [true];
  for (const seq of surface) {
    const e = log[seq]!;
    if (e.type === 'assistant/message') for (const b of e.data.content) if (b.type === 'tool-call') pending.add(b.id);
    if (e.type === 'tool/result') pending.delete(e.data.callId);
    cuts.push(pending.size === 0);
  }
  return { surface, messages, cuts, pending };
}

/** A log that answers every question, and validates every append, by folding from scratch. */
class NaiveLog {
  readonly log: SessionEvent[] = [];

  append(input: AppendInput): SessionEvent {
    const p = naiveProject(this.log);
    if (input.type === 'tool/result') {
      if (!p.pending.has(input.data.callId)) throw new Error('orphan tool result');
    } else if (input.surfaceOp !== undefined && p.pending.size > 0) {
      throw new Error('pending tool calls');
    }
    const event = { seq: this.log.length, time: new Date().toISOString(), ...input } as SessionEvent;
    this.log.push(event);
    return event;
  }

  deriveMessages(): ChatMessage[] {
    return naiveProject(this.log).messages;
  }

  balancedAfter(seq: number): boolean {
    const p = naiveProject(this.log);
    return p.cuts[p.surface.indexOf(seq) + 1] ?? false;
  }
}

// ---------------------------------------------------------------------------
// Measurement helpers

const now = () => performance.now();
const us = (ms: number) => ms * 1000;
const fmt = (x: number, digits = 2) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(digits));
const ratio = (naive: number, ours: number) => `${fmt(naive / ours, 1)}×`;

/** How many naive operations to time at size n: enough for a stable mean, bounded in time. */
const naiveSample = (n: number) => Math.max(5, Math.min(APPEND_WINDOW, Math.ceil(2e6 / n)));

interface SizeResult {
  size: number;
  appendUs: number;
  naiveAppendUs: number;
  naiveAppendSample: number;
  deriveUs: number;
  naiveDeriveUs: number;
  balanceUs: number;
  balancedCutsUs: number;
  naiveBalanceUs: number;
  jsonl: { eventsPerS: number; mbPerS: number; sample: number };
  naiveJsonl: { eventsPerS: number; mbPerS: number; sample: number };
}

function buildSession(inputs: readonly AppendInput[]): Session {
  const s = Session.inMemory('bench');
  for (const i of inputs) s.append(i);
  return s;
}

/** µs per append over the last APPEND_WINDOW appends of a session grown to `size` (best of `reps`). */
function measureAppend(size: number, reps: number): number {
  const inputs = take(workload(), size);
  const head = inputs.slice(0, size - APPEND_WINDOW);
  const tail = inputs.slice(size - APPEND_WINDOW);
  const results: number[] = [];
  for (let r = 0; r < reps; r++) {
    const s = buildSession(head);
    const t0 = now();
    for (const i of tail) s.append(i);
    results.push(us(now() - t0) / tail.length);
  }
  return Math.min(...results);
}

function measureNaiveAppend(size: number): { us: number; sample: number } {
  const sample = naiveSample(size);
  const gen = workload();
  const naive = new NaiveLog();
  // grow without validation (not what is measured), then time validated appends at this size
  for (const i of take(gen, size - sample)) naive.log.push({ seq: naive.log.length, time: '', ...i });
  const tail = take(gen, sample);
  const t0 = now();
  for (const i of tail) naive.append(i);
  return { us: us(now() - t0) / sample, sample };
}

/** Appends from the continuing workload until `count` surface appends were made; times `query` after each. */
function afterSurfaceAppends(append: (i: AppendInput) => void, gen: Generator<AppendInput>, count: number, query: () => void): number {
  let total = 0;
  for (let done = 0; done < count;) {
    const input = gen.next().value as AppendInput;
    append(input);
    if (input.surfaceOp === undefined) continue;
    const t0 = now();
    query();
    total += now() - t0;
    done++;
  }
  return us(total) / count;
}

async function measureJsonl(size: number, naive: boolean): Promise<{ eventsPerS: number; mbPerS: number; sample: number }> {
  const dir = await mkdtemp(join(tmpdir(), 'xcompact-bench-'));
  try {
    const gen = workload();
    const sample = naive ? Math.max(FLUSH_EVERY, Math.floor(naiveSample(size) / FLUSH_EVERY) * FLUSH_EVERY) : APPEND_WINDOW;
    const head = take(gen, size - sample);
    const tail = take(gen, sample);
    const file = join(dir, 'bench.jsonl');
    if (!naive) {
      // grow the file to size - sample through the session itself (not timed), then time the tail
      const store = new JsonlStore(dir);
      let s = await Session.open(store, 'bench');
      head.forEach((i, k) => {
        s.append(i);
        if (k % 10_000 === 9_999) void s.flush();
      });
      await s.close();
      s = await Session.open(store, 'bench');
      const before = await sizeOf(file);
      const t0 = now();
      for (let k = 0; k < tail.length; k++) {
        s.append(tail[k]!);
        if (k % FLUSH_EVERY === FLUSH_EVERY - 1) await s.flush();
      }
      await s.flush();
      const seconds = (now() - t0) / 1000;
      const bytes = (await sizeOf(file)) - before;
      await s.close();
      return { eventsPerS: tail.length / seconds, mbPerS: bytes / 1e6 / seconds, sample };
    }
    // naive: validate each append by a full fold, write each batch with appendFile + fdatasync
    const log = new NaiveLog();
    for (const i of head) log.log.push({ seq: log.log.length, time: new Date().toISOString(), ...i });
    await appendFile(file, log.log.map((e) => `${JSON.stringify(e)}\n`).join(''));
    const before = await sizeOf(file);
    let batch: string[] = [];
    const flush = async () => {
      await appendFile(file, batch.join(''));
      batch = [];
      const fh = await openFile(file, 'r+');
      await fh.datasync();
      await fh.close();
    };
    const t0 = now();
    for (let k = 0; k < tail.length; k++) {
      batch.push(`${JSON.stringify(log.append(tail[k]!))}\n`);
      if (k % FLUSH_EVERY === FLUSH_EVERY - 1) await flush();
    }
    if (batch.length > 0) await flush();
    const seconds = (now() - t0) / 1000;
    const bytes = (await sizeOf(file)) - before;
    return { eventsPerS: tail.length / seconds, mbPerS: bytes / 1e6 / seconds, sample };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function measureSize(size: number): Promise<SizeResult> {
  const appendUs = measureAppend(size, size >= 100_000 ? 3 : 5);
  const naiveAppend = measureNaiveAppend(size);

  // deriveMessages() and balance right after one surface append, at this size
  const gen = workload();
  const s = buildSession(take(gen, size));
  s.deriveMessages();
  const deriveUs = afterSurfaceAppends(
    (i) => s.append(i),
    gen,
    200,
    () => s.deriveMessages(),
  );

  const rnd = mulberry32(7);
  const seqs = s.surface.slice(0);
  const queries = 200_000;
  let sink = 0;
  let t0 = now();
  for (let q = 0; q < queries; q++) if (s.balancedAfter(seqs[Math.floor(rnd() * seqs.length)]!)) sink++;
  const balanceUs = us(now() - t0) / queries;
  const cutsReps = 50;
  t0 = now();
  for (let q = 0; q < cutsReps; q++) sink += s.balancedCuts().length;
  const balancedCutsUs = us(now() - t0) / cutsReps;

  const ngen = workload();
  const naive = new NaiveLog();
  for (const i of take(ngen, size)) naive.log.push({ seq: naive.log.length, time: '', ...i });
  const nReps = Math.max(3, Math.min(200, Math.ceil(5e5 / size)));
  const naiveDeriveUs = afterSurfaceAppends(
    (i) => naive.log.push({ seq: naive.log.length, time: '', ...i }),
    ngen,
    nReps,
    () => naive.deriveMessages(),
  );
  const nseqs = naiveProject(naive.log).surface;
  t0 = now();
  for (let q = 0; q < nReps; q++) if (naive.balancedAfter(nseqs[Math.floor(rnd() * nseqs.length)]!)) sink++;
  const naiveBalanceUs = us(now() - t0) / nReps;
  if (sink < 0) console.log(sink); // keep the loops observable

  const jsonl = await measureJsonl(size, false);
  const naiveJsonl = await measureJsonl(size, true);
  return {
    size,
    appendUs,
    naiveAppendUs: naiveAppend.us,
    naiveAppendSample: naiveAppend.sample,
    deriveUs,
    naiveDeriveUs,
    balanceUs,
    balancedCutsUs,
    naiveBalanceUs,
    jsonl,
    naiveJsonl,
  };
}

function report(r: SizeResult): void {
  const k = r.size >= 1000 ? `${r.size / 1000}k` : String(r.size);
  console.log(`\n── ${k} events ─────────────────────────────────────────────`);
  console.log(
    `append            ours ${fmt(r.appendUs)} µs   naive ${fmt(r.naiveAppendUs)} µs (last ${r.naiveAppendSample})   naive/ours ${ratio(r.naiveAppendUs, r.appendUs)}`,
  );
  console.log(
    `deriveMessages()  ours ${fmt(r.deriveUs)} µs   naive ${fmt(r.naiveDeriveUs)} µs   naive/ours ${ratio(r.naiveDeriveUs, r.deriveUs)}   (after one surface append)`,
  );
  console.log(
    `balancedAfter()   ours ${fmt(r.balanceUs, 3)} µs   naive ${fmt(r.naiveBalanceUs)} µs   naive/ours ${ratio(r.naiveBalanceUs, r.balanceUs)}   (balancedCuts() list: ${fmt(r.balancedCutsUs)} µs)`,
  );
  console.log(
    `JSONL append+flush ours ${fmt(r.jsonl.eventsPerS, 0)} ev/s ${fmt(r.jsonl.mbPerS)} MB/s   naive ${fmt(r.naiveJsonl.eventsPerS, 0)} ev/s ${fmt(r.naiveJsonl.mbPerS)} MB/s (last ${r.naiveJsonl.sample})   ours/naive ${ratio(r.jsonl.eventsPerS, r.naiveJsonl.eventsPerS)}   (flush + fdatasync every ${FLUSH_EVERY})`,
  );
}

export async function run(): Promise<void> {
  console.log('xcompact session benchmark (ours = incremental Session; naive = fold the whole log per question)');
  console.log(`node ${process.version}; appends timed on the last ${APPEND_WINDOW} at each size (best of several fresh sessions)`);
  // Warm the JIT on a throwaway run so the 1k figures are not compile time.
  measureAppend(20_000, 1);
  const warmGen = workload(2);
  const warm = buildSession(take(warmGen, 5_000));
  afterSurfaceAppends(
    (i) => warm.append(i),
    warmGen,
    500,
    () => warm.deriveMessages(),
  );
  const results: SizeResult[] = [];
  for (const size of SIZES) {
    const r = await measureSize(size);
    results.push(r);
    report(r);
  }
  const first = results[0]!;
  const last = results[results.length - 1]!;
  const growth = last.appendUs / first.appendUs;
  console.log(
    `\nper-append cost flat in history size: ${fmt(last.appendUs)} µs at ${last.size / 1000}k ÷ ${fmt(first.appendUs)} µs at ${first.size / 1000}k = ${fmt(growth)} → ${growth <= 2 ? 'yes (≤ 2)' : 'NO (> 2)'}`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  run().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
