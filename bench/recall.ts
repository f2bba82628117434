/**
 * Recall (docs/recall.md): what one recall call costs on a long session, what the index holds, and
 * whether one call brings back what the agent needed.
 *
 *   npx tsx bench/recall.ts
 *
 * 1. Latency at 1k, 10k and 100k events: a synthetic coding session (reads, errors, writes,
 *    checkpoints every ~400 events, oversized results pruned), queried by a rare line, a path, a
 *    common word that matches everything (bounded answer), a checkpoint handle and a regular
 *    expression; the median of 25 calls each, against a baseline of the same run: a scan per
 *    call over the whole log (each event checked for being off the surface, then for the text).
 *    Also the index's build (the fold on a reopened session) and its heap, per character of
 *    the shadowed text it indexes.
 * 2. On the shared pi transcript replayed at a 32k window (extractive summaries, recall on): at
 *    each request, the needed facts (docs/memory.md: file paths, error lines of tool results, string
 *    arguments of tool calls, needed at t if they occur before t and again in an assistant
 *    message at or after t) that are not in the request, and the share of those one recall
 *    call with the fact as its query returns (goal 100%).
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { RecallIndex, recallTool } from '../src/services/recall/index';
import { COMPACTION_CHECKPOINT_SOURCE, isSurfaceType } from '../src/session/events';
import { Session } from '../src/session/session';
import { SessionWriter } from '../src/session/writer';
import { runPiRecall } from './recall-pi';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

// ---------------------------------------------------------------------------------------------
// A synthetic session

const WORDS =
  'handler request worker config retry timeout buffer stream parser token window budget summary checkpoint module export import client server'.split(' ');

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

interface Built {
  session: Session;
  rare: string;
  path: string;
  handle: string;
}

/** About `events` events: turns of read/bash steps; a checkpoint every ~400 events; every 10th result oversized and pruned. */
export function buildForProfile(events: number): Built {
  return build(events);
}

function build(events: number): Built {
  const r = rng(events);
  const word = () => WORDS[Math.floor(r() * WORDS.length)]!;
  const session = Session.inMemory(`recall-${events}`);
  const w = new SessionWriter(session);
  w.system('You are a coding agent.');
  let call = 0;
  let sinceCheckpoint = 0;
  let rare = '';
  let path = '';
  let handle = '';
  const header = () => w.request({ provider: 'bench', model: 'm', tools: [] });
  while (session.length < events) {
    w.startTurn();
    header();
    w.user(`Turn ${session.lastTurn}: look at the ${word()} ${word()} code.`);
    for (let s = 0; s < 6; s++) {
      w.startStep();
      header();
      const id = `c${call++}`;
      const file = `src/${word()}/${word()}-${call}.ts`;
      const big = call % 10 === 0;
      w.assistant({
        text: `Reading ${file}.`,
        toolCalls: [
          { id, name: call % 3 === 0 ? 'bash' : 'read', arguments: JSON.stringify(call % 3 === 0 ? { command: `npm test -- ${file}` } : { path: file }) },
        ],
      });
      const lines: string[] = [];
      for (let i = 0; i < (big ? 400 : 12); i++) lines.push(`${file}:${i} ${word()} ${word()} ${word()} = ${Math.floor(r() * 1e6)};`);
      if (call % 7 === 0) lines.push(`Error: ${word()} failed at ${file}:${call} (code E${call})`);
      if (call === Math.floor(events / 40)) {
        rare = `the unique marker line ${call} zebra-quokka`;
        lines.push(rare);
        path = file;
      }
      w.toolResult(id, lines.join('\n'), { toolName: call % 3 === 0 ? 'bash' : 'read' });
      w.endStep();
    }
    w.startStep();
    header();
    w.assistant({ text: `Done with turn ${session.lastTurn}.` });
    w.endStep();
    w.endTurn();
    prune(session);
    sinceCheckpoint = session.length - sinceCheckpoint > 400 ? (checkpoint(session, (h) => (handle ||= h)), session.length) : sinceCheckpoint;
  }
  return { session, rare, path, handle };
}

/** Every oversized result on the surface, pruned (a compaction/prune and its replacement). */
function prune(session: Session): void {
  for (const seq of [...session.surface.seqs()]) {
    const e = session.event(seq);
    if (e.type !== 'tool/result' || e.data.content[0]?.type !== 'text' || e.data.content[0].text.length < 8000) continue;
    const text = e.data.content[0].text;
    const cut = `${text.slice(0, 2000)}\n[… ${text.length - 3000} characters pruned by xcompact; recall handle pr-${seq} brings back the full text …]\n${text.slice(-1000)}`;
    const p = session.append({
      type: 'compaction/prune',
      data: { targetSeq: seq, callId: e.data.callId, tokensBefore: 2000, tokensAfter: 750, charsBefore: text.length, charsAfter: cut.length },
    });
    session.append({
      type: 'tool/result',
      data: { ...e.data, content: [{ type: 'text', text: cut }] },
      surfaceOp: { op: 'replace', start: seq, end: seq },
      sourceEventSeqs: [seq, p.seq],
    });
  }
}

/** A checkpoint over everything but the newest node (merging the previous one), as the transaction commits it. */
function checkpoint(session: Session, named: (handle: string) => void): void {
  const s = session.surface;
  const shadowed = s.slice(1, s.length - 1);
  const start = session.append({ type: 'compaction/start', data: { turn: null, trigger: 'manual' } });
  const summary = session.append({
    type: 'compaction/summary',
    data: {
      summary: 'Earlier turns: files read, tests run.',
      range: { start: shadowed[0]!, end: shadowed.at(-1)! },
      shadowedSeqs: shadowed,
      shadowedTokens: 1000,
    },
  });
  session.append({
    type: 'user/message',
    data: {
      content: [{ type: 'text', text: `<compacted-summary>\nEarlier turns.\n</compacted-summary>\n\nrecall {"handle":"cp-${start.seq}"}` }],
      source: COMPACTION_CHECKPOINT_SOURCE,
    },
    surfaceOp: { op: 'replace', start: shadowed[0]!, end: shadowed.at(-1)! },
    sourceEventSeqs: [start.seq, summary.seq, ...shadowed],
  });
  session.append({ type: 'compaction/end', data: { turn: null } });
  named(`cp-${start.seq}`);
}

/** The baseline: a scan of the whole log per call, as a recall without an index would do. */
function scan(session: Session, query: string): number {
  const q = query.toLowerCase();
  let hits = 0;
  for (const e of session.events()) {
    if (!isSurfaceType(e.type) || session.surface.has(e.seq)) continue;
    const data = e.data as { content?: Array<{ text?: string; arguments?: string }> };
    const text = (data.content ?? []).map((b) => b.text ?? b.arguments ?? '').join('\n');
    if (text.toLowerCase().includes(q)) hits++;
  }
  return hits;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function time(f: () => unknown, n = 25): number {
  f();
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    f();
    ms.push(performance.now() - t);
  }
  return median(ms);
}

const fmt = (ms: number) => (ms < 1 ? ms.toFixed(3) : ms.toFixed(2));

/** CPU time of `f` in ms (user + system): the machine running the bench may be shared. */
function cpuMs(f: () => unknown): number {
  const start = process.cpuUsage();
  f();
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}

export function runLatency(sizes: readonly number[] = [1_000, 10_000, 100_000]): void {
  // Warm the JIT on a small index first, so the 1k row measures the index, not the compiler.
  RecallIndex.of(build(2_000).session);
  console.log(
    'events   entries  shadowed MB  build ms  build ÷ pass  index heap MB  bytes/char │ rare ms  path ms  common ms  handle ms  regex ms │ scan ms  scan ÷ rare',
  );
  for (const n of sizes) {
    const built = build(n);
    const { session, rare, path, handle } = built;
    // The index of a reopened session: the fold over the whole replayed log.
    gc();
    const heapBefore = process.memoryUsage().heapUsed;
    let index!: RecallIndex;
    const buildMs = cpuMs(() => (index = RecallIndex.of(session)));
    gc();
    const heap = process.memoryUsage().heapUsed - heapBefore;
    const stats = index.stats();
    // The build's baseline: one lowercasing pass over the same shadowed text (what any word index must at least read).
    const passMs = cpuMs(() => {
      let n = 0;
      for (const e of index.entries) n += e.text.toLowerCase().length;
      return n;
    });
    const tool = recallTool(session);
    const check = (args: Record<string, unknown>, what: string) => {
      const out = tool.run(args);
      if (out.isError || out.matches === 0) throw new Error(`bench: ${what} found nothing at ${n} events: ${out.text.slice(0, 200)}`);
    };
    check({ query: rare }, 'the rare line');
    check({ path }, 'the path');
    check({ handle }, 'the handle');
    const rareMs = time(() => tool.run({ query: rare }));
    const pathMs = time(() => tool.run({ path }));
    const commonMs = time(() => tool.run({ query: 'worker' }), 9);
    const handleMs = time(() => tool.run({ handle }), 9);
    const regexMs = time(() => tool.run({ query: 'zebra-q[a-z]+', regex: true }), 9);
    const scanMs = time(() => scan(session, rare), 9);
    console.log(
      `${String(session.length).padStart(7)}  ${String(stats.entries).padStart(7)}  ${(stats.textChars / 1e6).toFixed(2).padStart(11)}  ${fmt(buildMs).padStart(8)}  ${(buildMs / passMs).toFixed(1).padStart(12)}  ${(heap / 1e6).toFixed(2).padStart(13)}  ${(heap / stats.textChars).toFixed(2).padStart(10)} │ ${fmt(rareMs).padStart(7)}  ${fmt(pathMs).padStart(7)}  ${fmt(commonMs).padStart(9)}  ${fmt(handleMs).padStart(9)}  ${fmt(regexMs).padStart(8)} │ ${fmt(scanMs).padStart(7)}  ${(scanMs / rareMs).toFixed(0).padStart(10)}`,
    );
  }
  console.log(
    '(median of 25 calls for rare/path, 9 for the rest; "common" matches nearly every entry: its answer is bounded by the 2,000-token budget and its check by 4M characters; ' +
      "regex scans newest first under a 60 ms budget; build is the fold over the whole log on first use, as after a reopen (CPU ms; pass: one toLowerCase over the same texts); heap after a forced GC, the texts themselves are the log's)",
  );
}

export async function run(): Promise<void> {
  runLatency();
  await runPiRecall();
}

if (!process.env.RECALL_BENCH_IMPORT && process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run();
}
