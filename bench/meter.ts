/**
 * Token meter benchmark (docs/measured.md).
 *
 *   npx tsx bench/meter.ts
 *
 * 1. Per-step measurement cost after one append, at 1k / 10k / 100k surface nodes (a repeating
 *    unit of user text, assistant message with a tool call, tool result of a few hundred
 *    characters; texts taken from the real pi transcript when it is present). Ours is the
 *    incremental TokenMeter; the baseline re-prices the whole surface every step (every node
 *    priced with the same tokenizer and the same overhead, nothing cached). Both run in this
 *    process on the same session; the ratio is baseline ÷ ours. Target: ≥ 100× at 10k.
 *
 * 2. Replays ../shared/data/pi-large-session.jsonl into a fresh session one event at a time
 *    with meters attached (o200k_base, heuristic, utf8-bytes). Before each assistant message
 *    that has usage, the meter's estimate of the request that produced it (envelope + surface
 *    nodes) is compared with the provider's recorded prompt (input + cacheRead + cacheWrite).
 *    pi records neither its system prompt nor its tool list, so absolute figures differ by a
 *    constant envelope; the error reported is that of the step-to-step growth.
 *
 * Times are printed for reading only; nothing here asserts.
 */
import { existsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { TokenMeter } from '../src/services/metering';
import { getTokenizer, messageOverhead, type Tokenizer, type TokenizerName } from '../src/services/metering';
import { Session, type AppendInput, type ChatMessage, type SurfaceEvent } from '../src/session/index';
import { importPiFile } from '../src/transcripts/index';

const DEFAULT_SESSION = fileURLToPath(new URL('../test/fixtures/pi-large-session.jsonl', import.meta.url));
const SIZES = [1_000, 10_000, 100_000] as const;
const TARGET_RATIO = 100;
const TOOLS = [
  { type: 'function', function: { name: 'read', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
  { type: 'function', function: { name: 'bash', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' } } } } },
];

export interface MeterBenchOptions {
  /** A pi session JSONL file (default: test/fixtures/pi-large-session.jsonl). */
  sessionPath?: string;
  /** Tokenizer for the per-step cost (default o200k_base, the default exact tokenizer). */
  tokenizer?: TokenizerName;
  print?: (line: string) => void;
}

export async function run(options: MeterBenchOptions = {}): Promise<void> {
  const print = options.print ?? ((line: string) => console.log(line));
  const path = options.sessionPath ?? DEFAULT_SESSION;
  const piSession = existsSync(path) ? await loadPi(path) : undefined;
  if (!piSession) print(`note: ${path} not found: part 1 uses synthetic texts, part 2 is skipped`);

  perStepCost(options.tokenizer ?? 'o200k_base', samplesFrom(piSession), print);
  print('');
  if (piSession) replayPi(piSession, print);
}

// ---------------------------------------------------------------------------------------------
// Part 1: per-step cost
// ---------------------------------------------------------------------------------------------

interface Samples {
  user: string[];
  call: { name: string; arguments: string }[];
  result: string[];
}

async function loadPi(path: string): Promise<Session> {
  const session = Session.inMemory('pi');
  await importPiFile(session, path);
  return session;
}

/** Real texts from the transcript: user messages, tool calls, tool results cut to 200–600 chars. */
function samplesFrom(pi: Session | undefined): Samples {
  const samples: Samples = { user: [], call: [], result: [] };
  if (pi) {
    for (const e of pi.events()) {
      if (e.type === 'user/message') {
        const text = e.data.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n\n');
        if (text.length > 0 && text.length <= 2_000) samples.user.push(text);
      } else if (e.type === 'assistant/message') {
        for (const b of e.data.content) if (b.type === 'tool-call') samples.call.push({ name: b.name, arguments: b.arguments });
      } else if (e.type === 'tool/result') {
        const text = e.data.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n\n');
        if (text.length >= 200) samples.result.push(text.slice(0, 200 + (samples.result.length % 5) * 100));
      }
    }
  }
  if (samples.user.length === 0 || samples.call.length === 0 || samples.result.length === 0) {
    const lorem = 'The quick brown fox jumps over the lazy dog; const x = await read("src/index.ts");\n';
    samples.user = ['Please rename foo to bar across the repository and run the tests.'];
    samples.call = [{ name: 'read', arguments: '{"path":"src/index.ts"}' }];
    samples.result = [lorem.repeat(5)];
  }
  return samples;
}

/** An endless stream of surface appends: user → assistant with one call → its result. */
function* nodes(samples: Samples): Generator<AppendInput> {
  for (let i = 0; ; i++) {
    yield { type: 'user/message', data: { content: [{ type: 'text', text: samples.user[i % samples.user.length]! }] }, surfaceOp: 'append' };
    const call = samples.call[i % samples.call.length]!;
    yield {
      type: 'assistant/message',
      data: {
        content: [
          { type: 'text', text: 'Let me look.' },
          { type: 'tool-call', id: `call_${i}`, name: call.name, arguments: call.arguments },
        ],
      },
      surfaceOp: 'append',
    };
    yield {
      type: 'tool/result',
      data: { callId: `call_${i}`, toolName: call.name, content: [{ type: 'text', text: samples.result[i % samples.result.length]! }] },
      surfaceOp: 'append',
    };
  }
}

function buildSession(size: number, stream: Generator<AppendInput>): Session {
  const session = Session.inMemory(`bench-${size}`);
  session.append({ type: 'system/message', data: { text: 'You are a coding agent. Be terse.' }, surfaceOp: 'append' });
  session.append({ type: 'request/header', data: { provider: 'openai', model: 'gpt-4o', tools: TOOLS } });
  while (session.surface.length < size) session.append(stream.next().value as AppendInput);
  return session;
}

/** The baseline, written plainly: every surface node priced from its derived message, every step. */
function repriceWholeSurface(session: Session, tokenizer: Tokenizer): number {
  let total = 0;
  for (let p = 0; p < session.surface.length; p++) total += priceMessage(session.messageAt(p), tokenizer);
  return total;
}

function priceMessage(message: ChatMessage, t: Tokenizer): number {
  let tokens = 0;
  let toolCalls = 0;
  if (typeof message.content === 'string') tokens += t.count(message.content);
  else if (Array.isArray(message.content)) for (const part of message.content) if (part.type === 'text') tokens += t.count(part.text);
  if (message.role === 'assistant') {
    for (const call of message.tool_calls ?? []) {
      if (call.type !== 'function') continue;
      toolCalls++;
      tokens += t.count(call.function.name) + t.count(call.function.arguments);
    }
  }
  return tokens + messageOverhead(t.overhead, { role: message.role as 'system' | 'user' | 'assistant' | 'tool', toolCalls });
}

interface StepResult {
  size: number;
  oursUs: number;
  oursSteps: number;
  baselineUs: number;
  baselineSteps: number;
  firstMeasureMs: number;
  agree: boolean;
}

function measureSize(size: number, tokenizer: Tokenizer, samples: Samples): StepResult {
  const stream = nodes(samples);
  const session = buildSession(size, stream);
  const meter = new TokenMeter(session, { tokenizerFor: () => tokenizer });
  const t0 = performance.now();
  meter.measure(); // the first measurement prices every node once
  const firstMeasureMs = performance.now() - t0;

  const oursSteps = 300;
  let ours = 0;
  for (let i = 0; i < oursSteps; i++) {
    session.append(stream.next().value as AppendInput);
    const start = performance.now();
    meter.measure();
    ours += performance.now() - start;
  }

  const baselineSteps = size >= 100_000 ? 3 : size >= 10_000 ? 10 : 50;
  let baseline = 0;
  let baselineSurface = 0;
  for (let i = 0; i < baselineSteps; i++) {
    session.append(stream.next().value as AppendInput);
    const start = performance.now();
    baselineSurface = repriceWholeSurface(session, tokenizer);
    baseline += performance.now() - start;
  }
  const agree = meter.measure().surfaceTokens === baselineSurface;
  return { size, oursUs: (ours * 1000) / oursSteps, oursSteps, baselineUs: (baseline * 1000) / baselineSteps, baselineSteps, firstMeasureMs, agree };
}

function perStepCost(name: TokenizerName, samples: Samples, print: (line: string) => void): void {
  const tokenizer = getTokenizer(name);
  print(`per-step measurement cost after one append (tokenizer ${name}; ours = incremental TokenMeter.measure(); baseline = re-price every surface node)`);
  // Warm the JIT and the tokenizer on a throwaway session.
  measureSize(2_000, tokenizer, samples);
  print(
    `${'nodes'.padStart(7)} ${'ours µs/step'.padStart(13)} ${'baseline µs/step'.padStart(17)} ${'ratio'.padStart(10)}  ${'first full measure'.padStart(18)}  totals agree`,
  );
  for (const size of SIZES) {
    const r = measureSize(size, tokenizer, samples);
    const ratio = r.baselineUs / r.oursUs;
    const verdict = size === 10_000 ? `  ${ratio >= TARGET_RATIO ? 'PASS' : 'FAIL'} (target ≥ ${TARGET_RATIO}× at 10k)` : '';
    print(
      `${String(size).padStart(7)} ${r.oursUs.toFixed(1).padStart(13)} ${r.baselineUs.toFixed(0).padStart(17)} ${`${ratio.toFixed(0)}×`.padStart(10)}  ${`${r.firstMeasureMs.toFixed(0)} ms`.padStart(18)}  ${r.agree ? 'yes' : 'NO'}${verdict}`,
    );
  }
  print(`(ours: mean of 300 steps; baseline: mean of 50 / 10 / 3 steps; the texts repeat, so gpt-tokenizer's merge cache helps the baseline)`);
}

// ---------------------------------------------------------------------------------------------
// Part 2: replay of the pi transcript against the provider's usage
// ---------------------------------------------------------------------------------------------

const MODES: TokenizerName[] = ['o200k_base', 'heuristic', 'utf8-bytes'];

interface Point {
  seq: number;
  provider: number;
  ours: Record<string, number>;
  anchored: Record<string, number | undefined>;
}

function replayPi(source: Session, print: (line: string) => void): void {
  const session = Session.inMemory('pi-replay');
  const meters = MODES.map((name) => {
    const t = getTokenizer(name);
    return { name, meter: new TokenMeter(session, { tokenizerFor: () => t }) };
  });
  const points: Point[] = [];
  let previousModel: string | undefined;
  let modelChanges = 0;
  let zeroUsage = 0;
  for (const e of source.events()) {
    // pi records all-zero usage on aborted replies: no request was counted, so no data point.
    if (e.type === 'assistant/message' && e.data.usage && e.data.usage.promptTokens === 0) zeroUsage++;
    else if (e.type === 'assistant/message' && e.data.usage) {
      // The request that produced this reply: the surface before it, with its header's envelope.
      const ours: Record<string, number> = {};
      const anchored: Record<string, number | undefined> = {};
      for (const { name, meter } of meters) {
        const m = meter.measure();
        ours[name] = m.estimatedTokens;
        anchored[name] = m.anchor ? m.totalTokens : undefined;
      }
      points.push({ seq: e.seq, provider: e.data.usage.promptTokens, ours, anchored });
      const model = `${e.data.provider ?? ''}/${e.data.model ?? ''}`;
      if (previousModel !== undefined && model !== previousModel) modelChanges++;
      previousModel = model;
    }
    const input = { type: e.type, data: e.data } as AppendInput;
    if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    if (e.sourceEventSeqs !== undefined) input.sourceEventSeqs = e.sourceEventSeqs;
    session.append(input);
  }

  const surfaceEvents = source.surface.slice(0).map((s) => source.event(s) as SurfaceEvent);
  print(
    `pi transcript replay: ${source.length} events, ${surfaceEvents.length} surface nodes, ${points.length} assistant messages with usage (${zeroUsage} more aborted with all-zero usage, not data points), ${modelChanges} model changes`,
  );
  print('provider: Anthropic (claude-sonnet-4-5). Claude\'s tokenizer is not o200k_base, so "exact" here means exact for');
  print('OpenAI models only; against Claude it is another estimate. provider prompt = input + cacheRead + cacheWrite.');

  let skipped = 0;
  const errors: Record<string, number[]> = Object.fromEntries(MODES.map((n) => [n, []]));
  const sums: Record<string, number> = Object.fromEntries(MODES.map((n) => [n, 0]));
  let providerSum = 0;
  for (let i = 1; i < points.length; i++) {
    const a = points[i - 1]!;
    const b = points[i]!;
    const providerGrowth = b.provider - a.provider;
    if (providerGrowth <= 0) {
      skipped++;
      continue;
    }
    providerSum += providerGrowth;
    for (const name of MODES) {
      const ourGrowth = b.ours[name]! - a.ours[name]!;
      sums[name]! += ourGrowth;
      errors[name]!.push((ourGrowth - providerGrowth) / providerGrowth);
    }
  }
  print(
    `step-to-step growth, request(i) − request(i−1), over ${points.length - 1 - skipped} steps (${skipped} skipped: provider growth ≤ 0, the recorded prompt shrank or stayed equal)`,
  );
  const first = points[0]!;
  print(
    `${'mode'.padEnd(11)} ${'median |err|'.padStart(12)} ${'p90 |err|'.padStart(10)} ${'median err'.padStart(11)} ${'Σ growth err'.padStart(13)} ${'offset: median'.padStart(15)} ${'first request'.padStart(14)} ${'anchored |err| median'.padStart(22)} ${'p90'.padStart(7)}`,
  );
  for (const name of MODES) {
    const abs = errors[name]!.map(Math.abs);
    const offsets = points.map((p) => p.provider - p.ours[name]!);
    const anchored = points.filter((p) => p.anchored[name] !== undefined).map((p) => Math.abs((p.anchored[name]! - p.provider) / p.provider));
    print(
      [
        name.padEnd(11),
        pct(quantile(abs, 0.5)).padStart(12),
        pct(quantile(abs, 0.9)).padStart(10),
        signedPct(quantile(errors[name]!, 0.5)).padStart(11),
        signedPct(sums[name]! / providerSum - 1).padStart(13),
        String(Math.round(quantile(offsets, 0.5))).padStart(15),
        String(first.provider - first.ours[name]!).padStart(14),
        pct(quantile(anchored, 0.5), 2).padStart(22),
        pct(quantile(anchored, 0.9), 2).padStart(7),
      ].join(' '),
    );
  }
  print('err = (our growth − provider growth) / provider growth per step; negative = under-counts. Σ growth err: over the whole session.');
  print('offset = provider − ours, in tokens: at the first request it is the envelope pi sent but did not record (system prompt +');
  print('tool definitions); its median also carries the tokenizer gap, which grows with the conversation.');
  print("anchored: the meter's pressure figure (previous reply's prompt + completion + priced growth since) against the provider's");
  print('next prompt, relative to that prompt: the figure compaction decisions use.');
}

function quantile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((x, y) => x - y);
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

const pct = (x: number, digits = 1) => `${(x * 100).toFixed(digits)}%`;
const signedPct = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run();
}
