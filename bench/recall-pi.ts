/**
 * Part 2 of bench/recall.ts: on the shared pi transcript replayed through the engine at a 32k
 * window (extractive summaries, recall on), the needed facts (docs/memory.md, src/eval/memory.ts:
 * file paths, error lines of tool results, string arguments of tool calls; needed at request t
 * when they occur in a message before t and again in an assistant message at or after t) that
 * are not in the request, and how many of those one recall call with the fact as its query
 * returns (the answer's text holds the fact verbatim). Goal: all of them.
 */
import { createCompactionEngine } from '../src/engine/facade';
import { FactIndex } from '../src/eval/fact-index';
import { factsOf, messageText, transcriptOf } from '../src/eval/memory';
import { replayThroughEngine } from '../src/eval/replay';
import { RecallIndex, recallTool } from '../src/services/recall/index';
import { ExtractiveSummarizer } from '../src/services/summarizing/index';
import type { ChatMessage } from '../src/session/derive';
import { Session } from '../src/session/index';
import { importPiFile } from '../src/transcripts/index';
import { findPiData } from '../test/helpers/pi-data';

interface Needed {
  fact: string;
  from: number;
  to: number;
}

/** The needed facts of a transcript, with the requests they are needed at (MemoryMeter's definition). */
function neededFacts(source: Session): Needed[] {
  const { messages, replyAt } = transcriptOf(source.events());
  const historyOf = new Array<number>(messages.length);
  const replyOf = new Map<number, number>();
  replyAt.forEach((at, t) => replyOf.set(at, t));
  let next = 0;
  for (let i = 0; i < messages.length; i++) {
    while (next < replyAt.length && replyAt[next]! <= i) next++;
    historyOf[i] = next;
  }
  const all = [...new Set(messages.flatMap((m) => [...factsOf(m)]))];
  const index = new FactIndex(all);
  const first = all.map(() => Number.POSITIVE_INFINITY);
  const last = all.map(() => -1);
  messages.forEach((m, i) => {
    for (const id of index.find(messageText(m.message))) first[id] = Math.min(first[id]!, historyOf[i]!);
    const reply = replyOf.get(i);
    if (reply !== undefined && m.message.role === 'assistant') for (const id of index.find(messageText(m.message))) last[id] = Math.max(last[id]!, reply);
  });
  return all.map((fact, id) => ({ fact, from: first[id]!, to: last[id]! })).filter((n) => n.from <= n.to);
}

export async function runPiRecall(window = 32_768): Promise<void> {
  const source = Session.inMemory('pi');
  await importPiFile(source, findPiData().path);
  const needed = neededFacts(source);
  const factIndex = new FactIndex(needed.map((n) => n.fact));

  const session = Session.inMemory('pi-recall');
  const models: Record<string, { contextWindow: number; maxOutputTokens: number }> = {};
  for (const e of source.events())
    if (e.type === 'request/header') models[`${e.data.provider}/${e.data.model}`] = { contextWindow: window, maxOutputTokens: 4096 };
  const engine = createCompactionEngine({
    session,
    models,
    summarizer: new ExtractiveSummarizer(),
    config: { headroomTokens: 2048, maxTokens: 2048, recall: true },
  });
  let compactions = 0;
  let prunes = 0;
  engine.on((e) => {
    if (e.type === 'compaction.committed') compactions++;
    if (e.type === 'pruned') prunes += e.count;
  });
  const recall = recallTool(session);
  const seen = new WeakMap<ChatMessage, ReadonlySet<number>>();
  let t = 0;
  let requests = 0;
  let neededSum = 0;
  let offContext = 0;
  let returned = 0;
  let calls = 0;
  let callMs = 0;
  let shareSum = 0;
  let shareRequests = 0;
  const misses = new Map<string, number>();
  await replayThroughEngine(source, session, engine, {
    beforeReply: () => {
      const now = t++;
      const present = new Set<number>();
      for (const m of session.deriveMessages()) {
        let ids = seen.get(m);
        if (!ids) seen.set(m, (ids = factIndex.find(messageText(m))));
        for (const id of ids) present.add(id);
      }
      let need = 0;
      let off = 0;
      let back = 0;
      needed.forEach((n, id) => {
        if (n.from > now || n.to < now) return;
        need++;
        if (present.has(id)) return;
        off++;
        const started = performance.now();
        const answer = recall.run({ query: n.fact });
        callMs += performance.now() - started;
        calls++;
        if (!answer.isError && answer.text.includes(n.fact)) back++;
        else misses.set(n.fact, (misses.get(n.fact) ?? 0) + 1);
      });
      if (need > 0) requests++;
      neededSum += need;
      offContext += off;
      returned += back;
      if (off > 0) {
        shareSum += back / off;
        shareRequests++;
      }
    },
  });
  engine.stop();
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  console.log(
    `pi transcript replayed at a ${window}-token window with recall on: ${t} requests, ${compactions} compactions, ${prunes} pruned results, ${RecallIndexSize(session)} messages off the surface at the end`,
  );
  console.log(
    `requests with needed facts: ${requests}; needed (fact, request) pairs: ${neededSum}; not in the request: ${offContext} (${pct(offContext / Math.max(1, neededSum))})`,
  );
  console.log(
    `returned by one recall call with the fact as its query: ${returned} of ${offContext} = ${pct(returned / Math.max(1, offContext))} (goal 100%); mean per request: ${pct(shareRequests === 0 ? 1 : shareSum / shareRequests)}; ${calls} calls, ${(callMs / Math.max(1, calls)).toFixed(3)} ms each on average`,
  );
  if (misses.size > 0) {
    console.log(`facts not returned (${misses.size}, first 5):`);
    for (const [fact, n] of [...misses].slice(0, 5)) console.log(`  ${JSON.stringify(fact.slice(0, 120))} (${n} requests)`);
  }
}

function RecallIndexSize(session: Session): number {
  return RecallIndex.of(session).stats().entries;
}
