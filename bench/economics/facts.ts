/**
 * Where the facts the agent needs again live (needed recall, docs/memory.md, src/eval/memory.ts):
 * for every (request, needed fact) pair of the original transcript, which kinds of earlier
 * message carry the fact — the user's words, the assistant's text, the action arguments of its
 * tool calls (command, path, pattern), its other arguments (a file written, an edit), tool
 * output — and how far back the latest carrier is. A policy that drops a kind loses at least
 * the pairs only that kind carries: the ceiling of "mask the tool outputs" or "cut the bulky
 * arguments" before any setting is tried.
 *
 *   npx tsx bench/economics/facts.ts [transcript.jsonl …]
 */
import { basename } from 'node:path';
import { pathToFileURL } from 'node:url';
import { factsOf, transcriptOf, type Transcript } from '../../src/eval/index';
import { FactIndex } from '../../src/eval/fact-index';
import type { ChatMessage } from '../../src/session/index';
import { importAny, sharedTranscriptPaths } from './run';
// The argument keys naming what the agent did (command, path, pattern): argument pruning never cuts them.
import { ACTION_KEY } from '../../src/services/pruning/index';

type Carrier = 'user' | 'assistant text' | 'action argument' | 'other argument' | 'tool output';

function contentText(m: ChatMessage): string {
  const c = m.content;
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return '';
  return (c as Array<{ type: string; text?: string }>).map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('\n');
}

/** The pieces of one message, each with the kind of carrier it is. */
function pieces(m: ChatMessage): Array<[Carrier, string]> {
  if (m.role === 'user' || m.role === 'system') return [['user', contentText(m)]];
  if (m.role === 'tool') return [['tool output', contentText(m)]];
  const out: Array<[Carrier, string]> = [['assistant text', contentText(m)]];
  for (const call of m.role === 'assistant' ? (m.tool_calls ?? []) : []) {
    if (call.type !== 'function') continue;
    out.push(['action argument', call.function.name]);
    let args: unknown;
    try {
      args = JSON.parse(call.function.arguments);
    } catch {
      out.push(['other argument', call.function.arguments]);
      continue;
    }
    const walk = (v: unknown, key: string): void => {
      if (typeof v === 'string') out.push([ACTION_KEY.test(key) ? 'action argument' : 'other argument', v]);
      else if (Array.isArray(v)) for (const x of v) walk(x, key);
      else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, k);
    };
    walk(args, '');
  }
  return out;
}

export interface FactCarriers {
  pairs: number;
  /** Share of pairs whose fact some earlier message of that kind carries. */
  carriedBy: Record<Carrier, number>;
  /** Share of pairs carried only by tool output; only by tool output or non-action arguments. */
  onlyOutput: number;
  onlyOutputOrOtherArgs: number;
  /** Messages back from the request to the fact's latest earlier carrier: median, p75, p90. */
  distance: [number, number, number];
}

export function factCarriers(t: Transcript): FactCarriers {
  const all = new Set<string>();
  for (const m of t.messages) for (const f of factsOf(m)) all.add(f);
  const facts = [...all];
  const index = new FactIndex(facts);
  // Per fact: its occurrences (message index, carrier kind) in order.
  const occurrences = facts.map(() => [] as Array<[number, Carrier]>);
  t.messages.forEach((m, i) => {
    for (const [kind, text] of pieces(m.message)) if (text !== '') for (const id of index.find(text)) occurrences[id]!.push([i, kind]);
  });
  const kinds: Carrier[] = ['user', 'assistant text', 'action argument', 'other argument', 'tool output'];
  const carried = Object.fromEntries(kinds.map((k) => [k, 0])) as Record<Carrier, number>;
  let pairs = 0;
  let onlyOutput = 0;
  let onlyBulk = 0;
  const distances: number[] = [];
  t.replyAt.forEach((at) => {
    for (const occ of occurrences) {
      const before = occ.filter(([i]) => i < at);
      if (before.length === 0) continue;
      if (!occ.some(([i, kind]) => i >= at && kind !== 'tool output' && kind !== 'user' && t.messages[i]!.message.role === 'assistant')) continue;
      pairs++;
      const seen = new Set(before.map(([, k]) => k));
      for (const k of seen) carried[k]++;
      if ([...seen].every((k) => k === 'tool output')) onlyOutput++;
      if ([...seen].every((k) => k === 'tool output' || k === 'other argument')) onlyBulk++;
      distances.push(at - before[before.length - 1]![0]);
    }
  });
  distances.sort((a, b) => a - b);
  const q = (p: number) => distances[Math.min(distances.length - 1, Math.floor(p * distances.length))] ?? 0;
  const share = (n: number) => (pairs === 0 ? 0 : n / pairs);
  return {
    pairs,
    carriedBy: Object.fromEntries(kinds.map((k) => [k, share(carried[k])])) as Record<Carrier, number>,
    onlyOutput: share(onlyOutput),
    onlyOutputOrOtherArgs: share(onlyBulk),
    distance: [q(0.5), q(0.75), q(0.9)],
  };
}

async function main(argv: readonly string[]): Promise<void> {
  const files = [...argv];
  if (files.length === 0) files.push(...sharedTranscriptPaths().map((t) => t.path));
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  for (const f of files) {
    const c = factCarriers(transcriptOf((await importAny(f)).events()));
    console.log(
      `${basename(f)}: ${c.pairs} (request, needed fact) pairs; carried before the request by ` +
        Object.entries(c.carriedBy)
          .map(([k, v]) => `${k} ${pct(v)}`)
          .join(', ') +
        `; only by tool output ${pct(c.onlyOutput)}, only by tool output or non-action arguments ${pct(c.onlyOutputOrOtherArgs)}; ` +
        `latest carrier ${c.distance.join(' / ')} messages back (median / p75 / p90)`,
    );
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
