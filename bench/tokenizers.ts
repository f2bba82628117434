/**
 * Tokenizer benchmark: throughput of each tokenizer and the error of the two estimates
 * (heuristic = chars/4, utf8-bytes = bytes/4) against the exact BPEs, on four kinds of text.
 *
 *   npx tsx bench/tokenizers.ts
 *
 * Samples are real text, priced the way the meter prices them: one node (message block) at a
 * time.
 *   prose  user and assistant text blocks, plus Markdown files the agent read
 *   code   TypeScript files the agent read (tool results)
 *   json   tool-call arguments as sent to the provider, plus JSON files the agent read
 *          (all from shared/data/pi-large-session.jsonl, a real coding-agent session)
 *   cjk    TypeScript's zh-CN diagnostic messages (Microsoft's Simplified Chinese translation,
 *          node_modules/typescript/lib/zh-cn/diagnosticMessages.generated.json), keeping the
 *          messages that are mostly CJK characters, 20 messages per node
 * Times are printed for reading only; nothing here asserts on them.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { TOKENIZER_NAMES, getTokenizer, utf8ByteLength, type LocalTokenizerName, type Tokenizer } from '../src/services/metering';

type Kind = 'prose' | 'code' | 'json' | 'cjk';
type Samples = Record<Kind, string[]>;

export interface TokenizerBenchOptions {
  /** A pi session JSONL file (default: test/fixtures/pi-large-session.jsonl). */
  sessionPath?: string;
  /** Cap per kind, in UTF-8 bytes (default 256 KiB). */
  maxBytesPerKind?: number;
  /** Where the table goes (default console.log). */
  print?: (line: string) => void;
}

const DEFAULT_SESSION = fileURLToPath(new URL('../test/fixtures/pi-large-session.jsonl', import.meta.url));
const KINDS: Kind[] = ['prose', 'code', 'json', 'cjk'];

export async function run(options: TokenizerBenchOptions = {}): Promise<void> {
  const print = options.print ?? ((line: string) => console.log(line));
  const samples = capSamples(loadSamples(options.sessionPath ?? DEFAULT_SESSION), options.maxBytesPerKind ?? 256 * 1024);

  const tokenizers = loadTokenizers(print);
  const results = new Map<LocalTokenizerName, Record<Kind, Measurement>>();
  for (const tokenizer of tokenizers) {
    results.set(
      tokenizer.name as LocalTokenizerName,
      Object.fromEntries(KINDS.map((kind) => [kind, measure(tokenizer, samples[kind])])) as Record<Kind, Measurement>,
    );
  }
  printTable(samples, results, print);
}

// ---------------------------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------------------------

interface PiBlock {
  type: string;
  text?: string;
  id?: string;
  name?: string;
  arguments?: unknown;
}
interface PiEntry {
  type: string;
  message?: { role: string; content: PiBlock[] | string; toolCallId?: string; toolName?: string };
}

function loadSamples(sessionPath: string): Samples {
  const samples: Samples = { prose: [], code: [], json: [], cjk: chineseNodes() };
  const readPaths = new Map<string, string>(); // tool call id → path read
  for (const line of readFileSync(sessionPath, 'utf8').split('\n')) {
    if (line.trim() === '') continue;
    const message = (JSON.parse(line) as PiEntry).message;
    if (!message || !Array.isArray(message.content)) continue;
    for (const block of message.content) {
      if (block.type === 'text' && (message.role === 'user' || message.role === 'assistant') && block.text) samples.prose.push(block.text);
      if (block.type === 'toolCall') {
        samples.json.push(JSON.stringify(block.arguments));
        const path = (block.arguments as { path?: unknown } | undefined)?.path;
        if (block.name === 'read' && block.id && typeof path === 'string') readPaths.set(block.id, path);
      }
    }
    if (message.role === 'toolResult' && message.toolName === 'read') {
      const kind = kindOfFile(readPaths.get(message.toolCallId ?? '') ?? '');
      const text = message.content.map((b) => b.text ?? '').join('');
      if (kind && text) samples[kind].push(text);
    }
  }
  return samples;
}

function kindOfFile(path: string): Kind | undefined {
  if (/\.(ts|tsx|js|mjs|cjs)$/.test(path)) return 'code';
  if (/\.json$/.test(path)) return 'json';
  if (/\.md$/.test(path)) return 'prose';
  return undefined;
}

function chineseNodes(): string[] {
  const file = createRequire(import.meta.url).resolve('typescript/lib/zh-cn/diagnosticMessages.generated.json');
  const messages = Object.values(JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>);
  const cjkShare = (s: string) => (s.match(/[\u4e00-\u9fff]/g)?.length ?? 0) / s.length;
  const chinese = messages.filter((m) => cjkShare(m) > 0.6 && !m.includes('{0}'));
  const nodes: string[] = [];
  for (let i = 0; i < chinese.length; i += 20) nodes.push(chinese.slice(i, i + 20).join('\n'));
  return nodes;
}

function capSamples(samples: Samples, maxBytes: number): Samples {
  const capped = {} as Samples;
  for (const kind of KINDS) {
    let bytes = 0;
    capped[kind] = [];
    for (const node of samples[kind]) {
      if (bytes >= maxBytes) break;
      capped[kind].push(node);
      bytes += utf8ByteLength(node);
    }
  }
  return capped;
}

// ---------------------------------------------------------------------------------------------
// Measuring
// ---------------------------------------------------------------------------------------------

function loadTokenizers(print: (line: string) => void): Tokenizer[] {
  const loaded: Tokenizer[] = [];
  const loadTimes: string[] = [];
  const warmUp = warmUpText();
  for (const name of TOKENIZER_NAMES) {
    const start = performance.now();
    try {
      const tokenizer = getTokenizer(name);
      tokenizer.count('warm up'); // first call builds lazy tables in some libraries
      loadTimes.push(`${name} ${(performance.now() - start).toFixed(0)} ms`);
      for (const text of warmUp) tokenizer.count(text);
      loaded.push(tokenizer);
    } catch (error) {
      loadTimes.push(`${name} unavailable (${(error as Error).message.split(':')[0]})`);
    }
  }
  print(`load: ${loadTimes.join(', ')}`);
  return loaded;
}

/**
 * Text outside the samples (TypeScript's lib.es5.d.ts and its Traditional Chinese messages)
 * to get the JIT past its first compilations, so the first kind measured is not penalised.
 */
function warmUpText(): string[] {
  const resolve = createRequire(import.meta.url).resolve;
  const lib = readFileSync(resolve('typescript/lib/lib.es5.d.ts'), 'utf8').slice(0, 64 * 1024);
  const zhTw = Object.values(JSON.parse(readFileSync(resolve('typescript/lib/zh-tw/diagnosticMessages.generated.json'), 'utf8')) as Record<string, string>);
  return [...lib.split('\n\n'), ...zhTw.slice(0, 400)];
}

interface Measurement {
  tokens: number;
  mbPerSecond: number;
}

/**
 * Counts every node; the first tenth warms the JIT and is not timed. Each node is counted
 * once, as the meter does (so merge caches help only where real text repeats).
 */
function measure(tokenizer: Tokenizer, nodes: string[]): Measurement {
  const warm = Math.ceil(nodes.length / 10);
  let tokens = 0;
  for (const node of nodes.slice(0, warm)) tokens += tokenizer.count(node);
  const timed = nodes.slice(warm);
  const bytes = timed.reduce((sum, node) => sum + utf8ByteLength(node), 0);
  const start = performance.now();
  for (const node of timed) tokens += tokenizer.count(node);
  const seconds = Math.max(performance.now() - start, 1e-3) / 1000;
  return { tokens, mbPerSecond: bytes / 1e6 / seconds };
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

const SHORT: Record<LocalTokenizerName, string> = {
  o200k_base: 'o200k',
  cl100k_base: 'cl100k',
  'deepseek-v3': 'deepseek',
  heuristic: 'chars/4',
  'utf8-bytes': 'bytes/4',
};

function printTable(samples: Samples, results: Map<LocalTokenizerName, Record<Kind, Measurement>>, print: (line: string) => void): void {
  const names = [...results.keys()];
  const exact = names.filter((n) => n === 'o200k_base' || n === 'deepseek-v3');
  const estimates = names.filter((n) => n === 'heuristic' || n === 'utf8-bytes');
  const header = [
    'kind '.padEnd(6),
    'KiB'.padStart(5),
    'nodes'.padStart(6),
    ...names.map((n) => `${SHORT[n]} MB/s`.padStart(14)),
    ...exact.flatMap((e) => estimates.map((n) => `${SHORT[n]} vs ${SHORT[e]}`.padStart(20))),
  ];
  print('');
  print(header.join(' '));
  for (const kind of KINDS) {
    const kib = samples[kind].reduce((sum, node) => sum + utf8ByteLength(node), 0) / 1024;
    const row = [
      kind.padEnd(6),
      kib.toFixed(0).padStart(5),
      String(samples[kind].length).padStart(6),
      ...names.map((n) => throughput(results.get(n)![kind].mbPerSecond).padStart(14)),
      ...exact.flatMap((e) => estimates.map((n) => percent(results.get(n)![kind].tokens, results.get(e)![kind].tokens).padStart(20))),
    ];
    print(row.join(' '));
  }
  print('');
  print('error = (estimate - exact) / exact over the whole sample; negative = under-counts (compaction would start late).');
  const counts = KINDS.map((kind) => `${kind}: ${names.map((n) => `${SHORT[n]} ${results.get(n)![kind].tokens}`).join(', ')}`);
  print(`tokens: ${counts.join(' | ')}`);
}

/** chars/4 reads only string lengths, so its figure is timer noise above ~1 GB/s. */
function throughput(mbPerSecond: number): string {
  return mbPerSecond >= 1000 ? '>1000' : mbPerSecond.toFixed(2);
}

function percent(estimate: number, exact: number): string {
  const value = ((estimate - exact) / exact) * 100;
  return `${value >= 0 ? '+' : ''}${value.toFixed(1)}%`;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run();
}
