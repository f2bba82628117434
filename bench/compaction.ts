/**
 * Compaction economics on the real pi transcript: what our policy costs against the
 * reference's, replayed through the real engine in one run.
 *
 *   npx tsx bench/compaction.ts
 *
 * The transcript is imported once, then its events are replayed into a fresh session with an
 * engine attached (test/helpers/replay.ts; window 32k, the extractive summarizer, so no
 * network); `afterStep()` runs where the agent would call it: after a step's results, before
 * `step/end`. Two policies:
 *
 * - reference: every compaction merges from the head (the previous checkpoint is rewritten),
 *   and pruning touches every oversized result, the newest included, however little it frees.
 * - xcompact: earlier checkpoints stay in place while small (stacking), pruning protects the
 *   retained tail and skips passes that free too little.
 *
 * For every request the agent would send (one per request/header) we record its size and the
 * part of it that is a prefix of the previous request: that prefix is what a provider's prompt
 * cache can serve. Uncached tokens are what a cache miss re-bills. Nothing here asserts.
 */
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { createCompactionEngine } from '../src/engine/facade';
import { ExtractiveSummarizer } from '../src/services/summarizing';
import { selectRange } from '../src/services/selection';
import { Session } from '../src/session/index';
import { importPiFile } from '../src/transcripts/index';
import { findPiData } from '../test/helpers/pi-data';
import { replayThroughEngine } from '../src/eval/replay';

const WINDOW = 32_768;

interface PolicyResult {
  name: string;
  requests: number;
  promptTokens: number;
  uncachedTokens: number;
  compactions: number;
  prunes: number;
  peak: number;
  overWindow: number;
  stuck: number;
  ms: number;
}

async function replay(source: Session, name: string, reference: boolean): Promise<PolicyResult> {
  const session = Session.inMemory(name);
  const models: Record<string, { contextWindow: number; maxOutputTokens: number }> = {};
  for (const e of source.events()) {
    if (e.type === 'request/header') models[`${e.data.provider}/${e.data.model}`] = { contextWindow: WINDOW, maxOutputTokens: 4096 };
  }
  const engine = createCompactionEngine({
    session,
    models,
    summarizer: new ExtractiveSummarizer(),
    config: {
      headroomTokens: 4096,
      maxTokens: 2048,
      minProgressRatio: 0,
      // The reference has no cost model: the threshold alone decides.
      ...(reference ? { prune: { protectRecentTokens: 0, minReclaimTokens: 0 }, economics: false } : {}),
    },
    ...(reference
      ? {
          // The reference: always merge from the head (no stacking), and any span is worth a try.
          services: (_d) => ({
            selectRange: (input) => {
              const m = engine.measure();
              const retain = input.purpose === 'pressure' ? Math.floor((WINDOW - 4096) * 0.16) : 0;
              return selectRange(session, m.prices, { retainTokens: retain });
            },
          }),
        }
      : {}),
  });
  let compactions = 0;
  let prunes = 0;
  engine.on((e) => {
    if (e.type === 'compaction.committed') compactions++;
    if (e.type === 'pruned') prunes += e.count;
  });

  const result: PolicyResult = { name, requests: 0, promptTokens: 0, uncachedTokens: 0, compactions: 0, prunes: 0, peak: 0, overWindow: 0, stuck: 0, ms: 0 };
  let previous: number[] = [];
  const t0 = performance.now();
  const results = await replayThroughEngine(source, session, engine, {
    beforeReply: () => {
      // The request that produced this reply: everything on the surface now.
      const m = engine.measure();
      const seqs = [...session.surface.seqs()];
      let k = 0;
      while (k < seqs.length && k < previous.length && seqs[k] === previous[k]) k++;
      let cached = m.envelopeTokens;
      for (let p = 0; p < k; p++) cached += m.prices.priceAt(p);
      result.requests++;
      result.promptTokens += m.estimatedTokens;
      result.uncachedTokens += m.estimatedTokens - cached;
      result.peak = Math.max(result.peak, m.estimatedTokens);
      if (m.estimatedTokens > WINDOW) result.overWindow++;
      previous = seqs;
    },
  });
  result.stuck = results.filter((r) => r.status === 'stuck').length;
  result.ms = performance.now() - t0;
  result.compactions = compactions;
  result.prunes = prunes;
  engine.stop();
  return result;
}

export async function run(): Promise<void> {
  const { path } = findPiData();
  const source = Session.inMemory('source');
  await importPiFile(source, path);
  const ref = await replay(source, 'reference', true);
  const ours = await replay(source, 'xcompact', false);
  const row = (r: PolicyResult) =>
    `${r.name.padEnd(10)} ${String(r.requests).padStart(8)} ${String(r.promptTokens).padStart(12)} ${String(r.uncachedTokens).padStart(12)} ${((100 * r.uncachedTokens) / r.promptTokens).toFixed(1).padStart(8)}% ${String(r.compactions).padStart(11)} ${String(r.prunes).padStart(7)} ${String(r.peak).padStart(7)} ${String(r.overWindow).padStart(6)} ${String(r.stuck).padStart(6)} ${(r.ms / 1000).toFixed(1).padStart(6)} s`;
  console.log(`pi transcript replayed through the engine, window ${WINDOW} tokens, extractive summarizer, o200k_base`);
  console.log('policy     requests prompt tokens  uncached tok  uncached compactions  prunes    peak  >win  stuck   time');
  console.log(row(ref));
  console.log(row(ours));
  console.log(
    `uncached (cache-miss) tokens, reference ÷ xcompact: ${(ref.uncachedTokens / ours.uncachedTokens).toFixed(2)}×; ` +
      `prompt tokens sent: ${(ref.promptTokens / ours.promptTokens).toFixed(2)}×; compactions: ${ref.compactions} vs ${ours.compactions}`,
  );
  console.log('uncached = tokens of each request after its common prefix with the previous request (what a prompt cache re-bills).');
  console.log('>win = requests over the window: a single unit larger than the window cannot be split (see "stuck").');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  run().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
