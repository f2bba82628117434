/**
 * Scale benchmark (docs/measured.md): the costs that grow with a long session, each as a ratio measured
 * in one run against a baseline of the same run.
 *
 *   npx tsx bench/scale.ts
 *
 *   npx tsx bench/scale.ts --part=1   (or --part=2: one part alone)
 *
 * 1. `engine.afterStep()` per step at 1k, 10k and 50k surface nodes, with the defaults and with
 *    `economics: false`, `engine.measure()` beside it (goals: 10k and 50k ≤ 1.5× the
 *    1k figure; ≤ 3× measure()).
 * 2. `Session.open` of a JSONL log of 80k events + the first `afterStep()` ÷ `JSON.parse` of
 *    the log's lines, with the meter's snapshot a clean close leaves (goal ≤ 2.5×) and without
 *    (goal ≤ 4×), the figures of both compared.
 * 3. Tokenizer calls of a compaction with the bounded OpenAI summarizer ÷ the span's nodes
 *    (target: every span node counted by the meter once, none again by the summarizer).
 * 4. `deriveMessages()` after one append: work at 100k nodes ÷ work at 1k (target ≈ 1: O(appended)).
 *
 * Content: the real transcript's texts (test/fixtures/pi-large-session.jsonl), each use made
 * unique (a counter woven in), so no tokenizer cache flatters a figure.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createCompactionEngine } from '../src/engine/facade';
import { JsonlStore, Session, SessionWriter } from '../src/session/index';
import { importPiFile } from '../src/transcripts/index';
import { parseConfig, tokenizerNameFor } from '../src/services/config';
import type { ServiceDeps } from '../src/services/core';
import { TokenMeter } from '../src/services/metering';
import { selectSpan } from '../src/services/selection';
import { buildSummaryRequest } from '../src/services/transaction';
import { BoundedSummarizer } from '../src/services/summarizing';
import { getTokenizer, priceNode } from '../src/services/metering';
import { isSurfaceType, type SurfaceEvent } from '../src/session/events';

const FIXTURE = fileURLToPath(new URL('../test/fixtures/pi-large-session.jsonl', import.meta.url));
const MODELS = { 'bench/huge': { contextWindow: 50_000_000, maxOutputTokens: 8_000 } };
const TOOLS = [
  { type: 'function', function: { name: 'read', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
  { type: 'function', function: { name: 'bash', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' } } } } },
];

export interface Corpus {
  user: string[];
  assistant: string[];
  calls: Array<{ name: string; arguments: string }>;
  results: string[];
}

/** The transcript's message texts, tool results cut to at most 3,000 characters. */
export async function loadCorpus(): Promise<Corpus> {
  const pi = Session.inMemory('pi');
  await importPiFile(pi, FIXTURE);
  const c: Corpus = { user: [], assistant: [], calls: [], results: [] };
  for (const e of pi.events()) {
    if (e.type === 'user/message') {
      for (const b of e.data.content) if (b.type === 'text' && b.text.length > 0) c.user.push(b.text.slice(0, 3000));
    } else if (e.type === 'assistant/message') {
      for (const b of e.data.content) {
        if (b.type === 'text' && b.text.length > 0) c.assistant.push(b.text.slice(0, 3000));
        else if (b.type === 'tool-call') c.calls.push({ name: b.name, arguments: b.arguments });
      }
    } else if (e.type === 'tool/result') {
      for (const b of e.data.content) if (b.type === 'text' && b.text.length > 0) c.results.push(b.text.slice(0, 3000));
    }
  }
  return c;
}

/** A text made unique by the use counter (woven in mid-text, not only appended). */
function vary(text: string, n: number): string {
  const at = text.indexOf(' ', Math.floor(text.length / 2));
  return at < 0 ? `${text} #${n}` : `${text.slice(0, at)} (${n})${text.slice(at)}`;
}

/**
 * Appends agent steps (header, assistant with one tool call and usage, its result) until the
 * surface has `nodes` nodes; a user turn every 8 steps. Usage grows with the priced text so the
 * anchored figure stays plausible (not suspect).
 */
export class Workload {
  private n = 0;
  private call = 0;
  private steps = 0;
  private promptTokens = 2_000;
  readonly writer: SessionWriter;
  constructor(
    readonly session: Session,
    private readonly corpus: Corpus,
  ) {
    this.writer = new SessionWriter(session);
  }

  private pick(list: string[]): string {
    this.n++;
    return vary(list[this.n % list.length]!, this.n);
  }

  step(): void {
    const w = this.writer;
    if (this.session.openTurn === null) {
      w.startTurn();
      w.request({ provider: 'bench', model: 'huge', systemPrompt: 'You are a coding agent. Work in small verified steps.', tools: TOOLS, maxTokens: 8_000 });
      w.user(this.pick(this.corpus.user));
    }
    w.startStep();
    w.request({ provider: 'bench', model: 'huge', systemPrompt: 'You are a coding agent. Work in small verified steps.', tools: TOOLS, maxTokens: 8_000 });
    const c = this.corpus.calls[this.call % this.corpus.calls.length]!;
    const id = `call_${++this.call}`;
    const text = this.pick(this.corpus.assistant);
    const result = this.pick(this.corpus.results);
    // A rough, steady figure: the provider's count grows about as our prices do.
    this.promptTokens += Math.round((text.length + result.length + c.arguments.length) / 3.6) + 20;
    w.assistant({
      text,
      toolCalls: [{ id, name: c.name, arguments: vary(c.arguments, this.n) }],
      usage: { promptTokens: this.promptTokens, completionTokens: 50 },
    });
    w.toolResult(id, result, { toolName: c.name });
    w.endStep();
    if (++this.steps % 8 === 0) w.endTurn();
  }

  fill(nodes: number): void {
    while (this.session.surface.length < nodes) this.step();
  }
}

/** The sizes part 1 times a step at, and how many steps per size (after a tenth more to warm up). */
export const STEP_SIZES = [1_000, 10_000, 50_000] as const;
const STEP_REPS = 80;
/**
 * The cost model weighs every step with these prices, but with cache reads free a compaction
 * or a prune never pays: the engines stay below, and what is timed is the weighing, not a
 * compaction (at 10k nodes, millions of tokens, list prices rightly start one).
 */
const STEP_MODELS = { 'bench/huge': { contextWindow: 50_000_000, maxOutputTokens: 8_000, prices: { input: 1, cacheRead: 0, cacheWrite: 1, output: 4 } } };

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;

interface StepFigures {
  nodes: [number, number];
  /** Median µs of afterStep() per config, and of measure() (each after one appended step). */
  afterStep: { defaults: number; economicsOff: number };
  measure: { defaults: number; economicsOff: number };
}

/**
 * One size: a session of `nodes` surface nodes, two engines on it (the defaults, and
 * `economics: false`), each timed on `afterStep()` and on `measure()` with one small agent step
 * appended before every timed call, so each call folds exactly one step. The engines take turns
 * (the order swapped every round), so both see the same sizes and the same machine load.
 */
async function stepAt(corpus: Corpus, nodes: number): Promise<StepFigures> {
  const session = Session.inMemory(`bench-step-${nodes}`);
  const work = new Workload(session, corpus);
  work.fill(nodes);
  const engines = {
    defaults: createCompactionEngine({ session, models: STEP_MODELS }),
    economicsOff: createCompactionEngine({ session, models: STEP_MODELS, config: { economics: false } }),
  };
  const names = ['defaults', 'economicsOff'] as const;
  // Not timed: the first call prices the whole log once.
  for (const n of names) await engines[n].afterStep();
  const from = session.surface.length;
  const steps = { defaults: [] as number[], economicsOff: [] as number[] };
  const measures = { defaults: [] as number[], economicsOff: [] as number[] };
  const warm = Math.ceil(STEP_REPS / 10);
  for (let i = 0; i < STEP_REPS + warm; i++) {
    const order = i % 2 === 0 ? names : [...names].reverse();
    work.step();
    for (const n of order) {
      const t = performance.now();
      engines[n].measure();
      if (i >= warm) measures[n].push(performance.now() - t);
    }
    work.step();
    for (const n of order) {
      const t = performance.now();
      const r = await engines[n].afterStep();
      if (i >= warm) steps[n].push(performance.now() - t);
      if (r.status !== 'below') throw new Error(`expected below, got ${r.status} (${n} at ${session.surface.length} nodes)`);
    }
  }
  for (const n of names) engines[n].stop();
  return {
    nodes: [from, session.surface.length],
    afterStep: { defaults: median(steps.defaults) * 1000, economicsOff: median(steps.economicsOff) * 1000 },
    measure: { defaults: median(measures.defaults) * 1000, economicsOff: median(measures.economicsOff) * 1000 },
  };
}

/**
 * Part 1 (docs/measured.md): the per-step cost of `afterStep()` at 1k, 10k and 50k surface nodes, with
 * the defaults (the cost model on) and with `economics: false`, `measure()` beside it. Goals:
 * flat in session length (10k and 50k ≤ 1.5× the 1k figure) and ≤ 3× `measure()`.
 */
export async function perStep(corpus: Corpus, print: (l: string) => void): Promise<StepFigures[]> {
  const figures: StepFigures[] = [];
  for (const nodes of STEP_SIZES) figures.push(await stepAt(corpus, nodes));
  const µs = (x: number) => `${x.toFixed(1)} µs`.padStart(10);
  const met = (ok: boolean) => (ok ? 'met' : 'NOT met');
  print(`1. afterStep() per step, one small step appended before each call (median of ${STEP_REPS}), measure() beside it`);
  print(`   surface nodes       afterStep defaults   economics: false   measure()   defaults ÷ measure   off ÷ measure`);
  for (const f of figures) {
    const size = `${f.nodes[0].toLocaleString('en-US')}→${f.nodes[1].toLocaleString('en-US')}`.padEnd(16);
    const r1 = f.afterStep.defaults / f.measure.defaults;
    const r2 = f.afterStep.economicsOff / f.measure.economicsOff;
    print(
      `   ${size}  ${µs(f.afterStep.defaults)}          ${µs(f.afterStep.economicsOff)}    ${µs(f.measure.defaults)}   ${r1.toFixed(2).padStart(8)}×           ${r2.toFixed(2).padStart(6)}×`,
    );
  }
  const base = figures[0]!;
  for (const key of ['defaults', 'economicsOff'] as const) {
    const label = key === 'defaults' ? 'defaults        ' : 'economics: false';
    const growth = figures.slice(1).map((f) => f.afterStep[key] / base.afterStep[key]);
    const worst = Math.max(...figures.map((f) => f.afterStep[key] / f.measure[key]));
    print(
      `   ${label}: 10k ÷ 1k = ${growth[0]!.toFixed(2)}×, 50k ÷ 1k = ${growth[1]!.toFixed(2)}× (goal ≤ 1.5×) ${met(growth.every((g) => g <= 1.5))}; ` +
        `afterStep ÷ measure at most ${worst.toFixed(2)}× (goal ≤ 3×) ${met(worst <= 3)}`,
    );
  }
  return figures;
}

/** What a reopen is timed on: `Session.open`, then the engine's first `afterStep()`. */
async function timedReopen(store: JsonlStore, id: string) {
  const t1 = performance.now();
  const session = await Session.open(store, id);
  const openMs = performance.now() - t1;
  const engine = createCompactionEngine({ session, models: MODELS, config: REOPEN_CONFIG });
  const t2 = performance.now();
  const r = await engine.afterStep();
  const stepMs = performance.now() - t2;
  const { prices, ...figures } = engine.measure();
  // After the timing: every node's price as the meter holds it, beside the figures (the
  // pressure reading, its threshold and the calibration included), to compare with a full fold.
  const nodePrices: number[] = [];
  for (let p = 0; p < prices.length; p++) nodePrices.push(prices.priceAt(p));
  engine.stop();
  await session.close();
  return { openMs, stepMs, status: r.status, figures: JSON.stringify(figures), nodePrices: nodePrices.join(), nodes: session.surface.length };
}

/**
 * Economics off: at ~3M tokens a request it rightly compacts at once, and a compaction is no
 * part of reopening (bench/compaction.ts and bench/background.ts time those).
 */
const REOPEN_CONFIG = { economics: false };

/** The log size of the reopen (80k events, as measured on a long real session). */
const REOPEN_EVENTS = 80_000;

/**
 * Part 2: reopen of a JSONL log of `events` events + the first afterStep, against JSON.parse
 * of its lines. The log is written as an agent writes it: an engine measures as it goes and
 * the session is closed, which saves the meter's fold (`<log>.prices`, see
 * src/services/metering/snapshot.ts). Timed twice: with that snapshot (the target), and without
 * it (a writer that crashed before closing leaves none), whose figures must be the same.
 */
async function reopen(corpus: Corpus, events: number, print: (l: string) => void): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'xcompact-scale-'));
  try {
    const store = new JsonlStore(dir, { sync: false });
    await writeLog(store, corpus, events);
    const file = join(dir, 'big.jsonl');
    const bytes = readFileSync(file);
    const parse = () => {
      const t0 = performance.now();
      const lines = bytes.toString('utf8').split('\n');
      let parsed = 0;
      for (const line of lines) if (line.length > 0) parsed += JSON.parse(line) === null ? 0 : 1;
      return { ms: performance.now() - t0, parsed };
    };
    // Alternated, best of three each: two shared cores make any single timing noisy, and both
    // sides then see the same load.
    const parses: number[] = [];
    const reopens: Array<Awaited<ReturnType<typeof timedReopen>>> = [];
    let parsed = 0;
    for (let i = 0; i < 3; i++) {
      const p = parse();
      parses.push(p.ms);
      parsed = p.parsed;
      reopens.push(await timedReopen(store, 'big'));
    }
    const parseMs = Math.min(...parses);
    const snap = reopens.reduce((a, b) => (a.openMs + a.stepMs <= b.openMs + b.stepMs ? a : b));
    rmSync(`${file}.prices`, { force: true });
    const cold = await timedReopen(store, 'big');
    const ratio = (snap.openMs + snap.stepMs) / parseMs;
    const coldRatio = (cold.openMs + cold.stepMs) / parseMs;
    const same = reopens.every((r) => r.figures === cold.figures);
    const samePrices = reopens.every((r) => r.nodePrices === cold.nodePrices);
    const pricing = await pricingAlone(store, 'big');
    print(
      `2. reopen of ${parsed.toLocaleString('en-US')} events (${(bytes.length / 1e6).toFixed(1)} MB, ${snap.nodes.toLocaleString('en-US')} surface nodes), then the first afterStep (${snap.status}); best of 3, alternated`,
    );
    print(
      `   JSON.parse of the lines ${parseMs.toFixed(0)} ms; Session.open ${snap.openMs.toFixed(0)} ms (${(snap.openMs / parseMs).toFixed(2)}×); first afterStep ${snap.stepMs.toFixed(0)} ms (the meter's fold restored from <log>.prices)`,
    );
    print(`   with the snapshot: ratio (open + first afterStep) ÷ JSON.parse = ${ratio.toFixed(2)}× (goal ≤ 2.5×) ${ratio <= 2.5 ? 'met' : 'NOT met'}`);
    print(
      `   without the snapshot (a writer with no engine, or one that crashed, leaves none): open ${cold.openMs.toFixed(0)} ms + first afterStep ${cold.stepMs.toFixed(0)} ms = ${coldRatio.toFixed(2)}× (goal ≤ 4×) ${coldRatio <= 4 ? 'met' : 'NOT met'}`,
    );
    print(
      `   figures identical to a full fold (measure() with the snapshot vs without, its pressure reading and calibration included): ${same ? 'yes' : 'NO'}; every node's price: ${samePrices ? 'yes' : 'NO'}`,
    );
    print(
      `   of the fold without it, pricing every node alone (the tokenizer over ${(pricing.chars / 1e6).toFixed(1)} MB of node data, ${pricing.nodes.toLocaleString('en-US')} nodes) takes ${pricing.ms.toFixed(0)} ms = ${(pricing.ms / parseMs).toFixed(2)}× JSON.parse`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The tokenizer's share of a fold without a snapshot: every surface event of the log priced
 * once, as the meter prices it, and nothing else (no calibration, no ledger).
 */
async function pricingAlone(store: JsonlStore, id: string): Promise<{ ms: number; nodes: number; chars: number }> {
  const session = await Session.open(store, id);
  try {
    const tokenizer = getTokenizer('o200k_base');
    const events = session.events().filter((e) => isSurfaceType(e.type)) as SurfaceEvent[];
    let chars = 0;
    for (const e of events) chars += JSON.stringify(e.data).length;
    const t0 = performance.now();
    for (const e of events) priceNode(tokenizer, e);
    return { ms: performance.now() - t0, nodes: events.length, chars };
  } finally {
    await session.close();
  }
}

/** Writes the log as an agent does, an engine measuring as it goes, and closes it (which saves the meter's snapshot). */
async function writeLog(store: JsonlStore, corpus: Corpus, events: number): Promise<void> {
  const first = await Session.open(store, 'big');
  const live = createCompactionEngine({ session: first, models: MODELS, config: REOPEN_CONFIG });
  const work = new Workload(first, corpus);
  while (first.length < events) {
    work.step();
    if (first.length % 5_000 < 8) {
      live.measure();
      await first.flush();
    }
  }
  // The session ends as an agent leaves it between steps: a reply whose usage anchors the figure.
  live.measure();
  live.stop();
  await first.close();
}

/**
 * Part 3: the bounding step of a summary of a ~100k-token span (the OpenAI summarizer's own
 * wrapper, around a summarizer that answers at once), its request counting with the meter's
 * prices against one that re-tokenizes (what it did before).
 */
export async function summaryPricing(corpus: Corpus, print: (l: string) => void): Promise<void> {
  const session = Session.inMemory('bench-summary');
  const work = new Workload(session, corpus);
  const models = { ...MODELS, 'bench/summarizer': { contextWindow: 32_000, maxOutputTokens: 4_000 } };
  const config = parseConfig({ models, summarizationProvider: 'bench', summarizationModel: 'summarizer' });
  const tokenizerName = (provider: string | undefined, model: string | undefined) =>
    provider && model ? tokenizerNameFor(config, provider, model) : (config.tokenizer ?? 'o200k_base');
  const meter = new TokenMeter(session, { tokenizerFor: (h) => getTokenizer(tokenizerName(h?.data.provider, h?.data.model)) });
  const deps: ServiceDeps = { session, meter, config, now: Date.now, tokenizerName };
  while (meter.measure().surfaceTokens < 120_000) work.step();
  const range = selectSpan(deps, { purpose: 'manual', attempt: 1, retain: 'newest-unit', stackCheckpoints: false })!;
  const inner = { name: 'instant', summarize: async () => ({ text: 'summary', requests: 1 }) };
  const bounded = new BoundedSummarizer(inner);
  const request = buildSummaryRequest(deps, range, undefined);
  const tokenizer = getTokenizer(meter.measure().tokenizer);
  const retokenizing = { ...request, countTokens: (t: string) => tokenizer.count(t) };
  const signal = new AbortController().signal;
  const time = async (r: typeof request) => {
    const t = performance.now();
    const out = await bounded.summarize(r, signal);
    return { ms: performance.now() - t, out };
  };
  // Alternated, twice each, best of two: the same machine load for both.
  const base1 = await time(retokenizing);
  const ours1 = await time(buildSummaryRequest(deps, range, undefined));
  const base2 = await time(retokenizing);
  const ours2 = await time(buildSummaryRequest(deps, range, undefined));
  const base = Math.min(base1.ms, base2.ms);
  const ours = Math.min(ours1.ms, ours2.ms);
  let spanTokens = 0;
  for (let p = range.startPos; p <= range.endPos; p++) spanTokens += meter.priceAt(p);
  print(
    `3. bounding a summary of ${range.endPos - range.startPos + 1} nodes (${spanTokens.toLocaleString('en-US')} tokens) for a 32k window (${ours1.out.bounding?.mode}, ${ours1.out.bounding?.chunks} chunk(s))`,
  );
  print(
    `   with the meter's prices ${ours.toFixed(0)} ms, re-tokenizing the span ${base.toFixed(0)} ms: ratio ours ÷ before = ${(ours / base).toFixed(3)}× (each span text tokenized 0 times more: test/services/metering/summary-prices.test.ts counts it)`,
  );
}

/** Part 4: deriveMessages() right after one append, at 1k and 100k surface nodes. */
export function deriveAfterAppend(corpus: Corpus, print: (l: string) => void): void {
  const perCall = (nodes: number) => {
    const session = Session.inMemory('bench-derive');
    const work = new Workload(session, corpus);
    work.fill(nodes);
    const w = work.writer;
    session.deriveMessages();
    w.startStep();
    const reps = 501;
    const times: number[] = [];
    for (let i = 0; i < reps; i++) {
      w.request({ provider: 'bench', model: 'huge', tools: [], maxTokens: 8_000 });
      w.assistant({ text: `step ${i}` });
      const t = performance.now();
      session.deriveMessages();
      times.push(performance.now() - t);
    }
    // The median: a garbage collection of the larger heap landing in one call is not the call's cost.
    const ms = times.sort((a, b) => a - b)[reps >> 1]! * reps;
    // What it did before: copy and freeze the whole array (from a plain copy, so only that is timed).
    const plain = [...session.deriveMessages()];
    const t = performance.now();
    for (let i = 0; i < 50; i++) Object.freeze(plain.slice());
    return { us: (ms / reps) * 1000, copyUs: ((performance.now() - t) / 50) * 1000, nodes: session.surface.length };
  };
  perCall(1_000); // warm-up
  const small = perCall(1_000);
  const large = perCall(100_000);
  const ratio = large.us / small.us;
  print(
    `4. deriveMessages() after one append (median): ${small.us.toFixed(2)} µs at ${small.nodes.toLocaleString('en-US')} nodes, ${large.us.toFixed(2)} µs at ${large.nodes.toLocaleString('en-US')} (a whole copy + freeze: ${large.copyUs.toFixed(0)} µs)`,
  );
  print(`   ratio 100k ÷ 1k = ${ratio.toFixed(2)}× (target ≈ 1×: O(appended)) ${ratio <= 2 ? 'met' : 'NOT met'}`);
}

export async function run(options: { print?: (line: string) => void } = {}): Promise<void> {
  const print = options.print ?? ((l: string) => console.log(l));
  const corpus = await loadCorpus();
  print(
    `corpus: ${corpus.user.length} user texts, ${corpus.assistant.length} assistant texts, ${corpus.calls.length} tool calls, ${corpus.results.length} tool results from the real transcript`,
  );
  await perStep(corpus, print);
  await reopen(corpus, REOPEN_EVENTS, print);
  await summaryPricing(corpus, print);
  deriveAfterAppend(corpus, print);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  // `--part=2`: the reopen alone (the slowest part to rerun).
  if (process.argv[2] === '--part=2') await reopen(await loadCorpus(), REOPEN_EVENTS, (l) => console.log(l));
  else if (process.argv[2] === '--part=1') await perStep(await loadCorpus(), (l) => console.log(l));
  else await run();
}
