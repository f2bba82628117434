/**
 * The `server` tokenizer (docs/local-models.md#the-server-tokenizer-the-model-servers-own-counts): how far the meter's estimate is from the model
 * server's own count on digit-heavy text, with the server's counts against o200k_base, and what
 * the prefetch costs a step once its counts are cached, as a ratio to the step's measure().
 *
 *   npx tsx bench/server-tokenizer.ts
 *
 * The server is src/testing's with a vocabulary of its own (digitTokens: one token per digit,
 * as Qwen- and Llama-family tokenizers split numbers) serving /tokenize and counting chat
 * prompts with it; the agent's requests go over the openai SDK. Error: the meter's estimate of
 * the whole request (envelope + surface, before calibration) against the server's count of the
 * same request. The local server frames each message as the fallback's overhead figures do
 * (chatml: 4 per message, 3 per request), so what is left is the texts' error alone; a real
 * template differs by a few tokens per message, which the provider's reports calibrate. Overhead: per step, a warm prefetch (every text of the step already counted by
 * the server: hashing and lookups, no request) and then the step's measure() (folding and
 * pricing its nodes), timed in CPU microseconds in one run; the medians and their ratio.
 * Nothing is asserted.
 */
import OpenAI from 'openai';
import { pathToFileURL } from 'node:url';
import { createCompactionEngine } from '../src/engine/facade';
import { CountPrefetch, getTokenizer, ProvisionalPrices, ServerTokenizer, TokenMeter } from '../src/services/metering/index';
import { Session } from '../src/session/session';
import { SessionWriter } from '../src/session/writer';
import { chatPromptTokens, digitTokens, startOpenAIServer, type ChatRequestBody } from '../src/testing/openai-server';
import { sdkTurn } from '../test/helpers/sdk-turn';

const MODEL = 'qwen-local';
const SYSTEM = 'You are a data agent. Keep answers short.';
const TURNS = 24;
const WARM_STEPS = 400;

/** A message of prose and a table of figures (~60% digits), like a tool's CSV output. */
function message(seed: number): string {
  const rows = Array.from({ length: 40 }, (_, i) => {
    const n = (seed * 7919 + i * 104_729) % 9_999_991;
    return `${2024 + (i % 3)}-${String(1 + (i % 12)).padStart(2, '0')}-${String(1 + (i % 28)).padStart(2, '0')}, ${n}, ${(n / 97).toFixed(4)}, ${n % 1000}`;
  });
  return `Batch ${seed}: the readings below come from the nightly export; check the totals.\n${rows.join('\n')}`;
}

const cpu = (): number => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function accuracy(print: (line: string) => void): Promise<void> {
  const server = await startOpenAIServer({
    tokenize: { count: digitTokens, usage: true },
    scenarios: () => ({ kind: 'reply', content: 'Checked; the totals match.' }),
  });
  try {
    const session = Session.inMemory();
    const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'bench', maxRetries: 0 });
    const models = (tokenizer: 'server' | 'o200k_base') => ({ [`local/${MODEL}`]: { contextWindow: 1_000_000, tokenizer } });
    const config = { economics: false, background: false };
    const served = createCompactionEngine({ session, client, models: models('server'), config });
    const o200k = createCompactionEngine({ session, client, models: models('o200k_base'), config });
    for (let t = 0; t < TURNS; t++) await sdkTurn({ session, client, engine: served, provider: 'local', model: MODEL, system: SYSTEM }, message(t));
    const real = chatPromptTokens({ messages: [...session.deriveMessages()] as ChatRequestBody['messages'], tools: [] }, digitTokens);
    const row = (name: string, estimate: number, note: string) =>
      print(
        `  ${name.padEnd(22)} ${String(estimate).padStart(8)} ${String(real).padStart(8)} ${`${(((estimate - real) / real) * 100).toFixed(1)}%`.padStart(8)}   ${note}`,
      );
    print(`  ${'estimate by'.padEnd(22)} ${'ours'.padStart(8)} ${'server'.padStart(8)} ${'error'.padStart(8)}`);
    const m = served.measure();
    row(
      "tokenizer 'server'",
      m.estimatedTokens,
      `${m.fallbackNodes} of ${session.surface.length} nodes priced by the fallback; ${server.requests.filter((r) => r.path === '/tokenize').length} tokenize requests for ${TURNS} turns`,
    );
    row('o200k_base', o200k.measure().estimatedTokens, `the same surface (${session.surface.length} nodes, ${TURNS} turns of prose and figures)`);
    served.stop();
    o200k.stop();
  } finally {
    await server.close();
  }
}

async function overhead(print: (line: string) => void): Promise<void> {
  const server = await startOpenAIServer({ tokenize: { count: digitTokens } });
  try {
    const fallback = getTokenizer('o200k_base');
    const tokenizer = new ServerTokenizer({ url: `${server.url}/tokenize`, model: MODEL, fallback, deadlineMs: 5_000 });
    // Warm: the server has counted every text the steps will append.
    const pool = Array.from({ length: 16 }, (_, i) => message(i));
    await tokenizer.prefetch([SYSTEM, ...pool, 'Checked; the totals match.']);
    const session = Session.inMemory();
    const provisional = new ProvisionalPrices();
    const meter = new TokenMeter(session, { tokenizerFor: () => tokenizer, provisional });
    const prefetch = new CountPrefetch(session, provisional, () => tokenizer);
    const w = new SessionWriter(session);
    w.system(SYSTEM);
    const requestsBefore = tokenizer.requests;
    const prefetchUs: number[] = [];
    const measureUs: number[] = [];
    for (let s = 0; s < WARM_STEPS; s++) {
      w.startTurn();
      w.user(pool[s % pool.length]!);
      w.startStep();
      w.request({ provider: 'local', model: MODEL, systemPrompt: SYSTEM, tools: [] });
      w.assistant({ text: 'Checked; the totals match.' });
      w.endStep();
      w.endTurn('completed');
      const t0 = cpu();
      await prefetch.run();
      const t1 = cpu();
      meter.measure();
      const t2 = cpu();
      prefetchUs.push(t1 - t0);
      measureUs.push(t2 - t1);
    }
    const p = median(prefetchUs);
    const m = median(measureUs);
    print(`  warm prefetch per step: median ${p} µs CPU; the step's measure(): median ${m} µs; ratio ${(p / Math.max(1, m)).toFixed(2)}`);
    print(
      `  (${WARM_STEPS} steps of 2 messages, ~${Math.round(pool[0]!.length / 100) / 10}k characters each; tokenize requests during them: ${tokenizer.requests - requestsBefore}; fallback counts: ${tokenizer.fallbacks()})`,
    );
    // The synchronous count of a cached text against o200k's BPE count of it.
    const text = pool[0]!;
    const reps = 2_000;
    let a = cpu();
    for (let i = 0; i < reps; i++) tokenizer.count(text);
    const cached = (cpu() - a) / reps;
    a = cpu();
    for (let i = 0; i < reps; i++) fallback.count(text);
    const bpe = (cpu() - a) / reps;
    print(`  count() of a cached ${text.length}-character text: ${cached.toFixed(1)} µs; o200k_base: ${bpe.toFixed(1)} µs; ratio ${(cached / bpe).toFixed(2)}`);
  } finally {
    await server.close();
  }
}

export async function run(print: (line: string) => void = console.log): Promise<void> {
  print("Estimate of the whole request against the server's own count (digit-heavy text):");
  await accuracy(print);
  print('\nPrefetch overhead with a warm cache:');
  await overhead(print);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run();
}
