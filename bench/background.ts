/**
 * Background compaction (docs/spec.md#13-background-compaction): how long the agent is blocked in `afterStep()`, foreground
 * against background mode, in one run over the same scripted session (same seed).
 *
 *   npx tsx bench/background.ts          (STEP_MS=150 for agent steps faster than the summary)
 *
 * The agent and the summarizer are two local OpenAI-compatible servers (src/testing) reached
 * through the official `openai` SDK: each agent step is a real request that takes STEP_MS, each
 * summary request takes SUMMARY_MS (2 s, a slow summarizer). The script (tool result sizes,
 * turn lengths) comes from a seeded generator, so both modes see the same conversation. Before
 * each agent request we read the engine's measure of the surface: the request's size.
 * Nothing here asserts; the figures are printed.
 */
import OpenAI from 'openai';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { createCompactionEngine, type AfterStepResult, type EngineNotification } from '../src/engine/facade';
import { OpenAISummarizer } from '../src/services/summarizing';
import { Session } from '../src/session/session';
import { SessionWriter } from '../src/session/writer';
import { startOpenAIServer } from '../src/testing/openai-server';

const WINDOW = 32_768;
const STEPS = 60;
const STEP_MS = Number(process.env.STEP_MS ?? 500);
const SUMMARY_MS = 2000;
const SEED = 16;
const SYSTEM = 'You are a coding agent working in a large repository. Keep answers short.';
const SUMMARY = '## Primary Request and Intent\n- fix the failing build\n## Current Work\n- reading the files the tools listed\n## Next Step\n- run the tests';

/** mulberry32: the same numbers for the same seed, in both modes. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface ModeResult {
  mode: string;
  blockedMs: number;
  wallMs: number;
  steps: number;
  compactions: number;
  committedWithoutWait: number;
  waits: number;
  peak: number;
  overWindow: number;
  failures: number;
}

async function runMode(background: boolean, agentURL: string, summaryURL: string): Promise<ModeResult> {
  const agent = new OpenAI({ baseURL: agentURL, apiKey: 'bench', maxRetries: 0 });
  const summarizerClient = new OpenAI({ baseURL: summaryURL, apiKey: 'bench', maxRetries: 0 });
  const session = Session.inMemory(`bench-${background ? 'bg' : 'fg'}`);
  const writer = new SessionWriter(session);
  const engine = createCompactionEngine({
    session,
    models: { 'local/agent': { contextWindow: WINDOW, maxOutputTokens: 1024 } },
    summarizer: new OpenAISummarizer({ client: summarizerClient }),
    config: { headroomTokens: 2048, maxTokens: 1024, background },
  });
  const notes: EngineNotification[] = [];
  engine.on((n) => notes.push(n));
  const random = rng(SEED);
  const lines = (n: number, i: number) =>
    Array.from({ length: n }, (_, k) => `src/module${i}/file${k}.ts: export function f${k}() { return ${k}; }`).join('\n');

  let blockedMs = 0;
  let peak = 0;
  let overWindow = 0;
  let waits = 0;
  const started = performance.now();
  writer.startTurn();
  writer.request({ provider: 'local', model: 'agent', systemPrompt: SYSTEM, tools: [], maxTokens: 1024 });
  writer.user('Please fix the failing build.');
  for (let i = 0; i < STEPS; i++) {
    if (i > 0 && random() < 0.12) {
      writer.endTurn();
      writer.startTurn();
      writer.user(`Next, look at module ${i}.`);
    }
    writer.startStep();
    writer.request({ provider: 'local', model: 'agent', systemPrompt: SYSTEM, tools: [], maxTokens: 1024 });
    const size = engine.measure().totalTokens;
    peak = Math.max(peak, size);
    if (size > WINDOW) overWindow++;
    await agent.chat.completions.create({ model: 'agent', messages: [{ role: 'user', content: `step ${i}` }] });
    writer.assistant({
      text: `Looking at module ${i}.`,
      toolCalls: [{ id: `c${i}`, name: 'bash', arguments: JSON.stringify({ command: `ls src/module${i}` }) }],
    });
    writer.toolResult(`c${i}`, lines(25 + Math.floor(random() * 45), i), { toolName: 'bash' });
    const t0 = performance.now();
    const r: AfterStepResult = await engine.afterStep();
    blockedMs += performance.now() - t0;
    // Waiting for a summary (the threshold came first), not committing one held until the threshold (a millisecond).
    if (r.status === 'waited') waits++;
    writer.endStep();
  }
  // A summary still in flight at the end commits or is dropped with the engine; either way it did not block.
  engine.stop();
  const committed = notes.filter((n) => n.type === 'compaction.committed');
  const waitedCommits = background ? Math.min(waits, committed.filter((n) => n.type === 'compaction.committed' && n.background).length) : committed.length;
  return {
    mode: background ? 'background' : 'foreground',
    blockedMs,
    wallMs: performance.now() - started,
    steps: STEPS,
    compactions: committed.length,
    committedWithoutWait: committed.length - waitedCommits,
    waits,
    peak,
    overWindow,
    failures: notes.filter((n) => n.type === 'compaction.failed').length,
  };
}

export async function run(): Promise<void> {
  const agentServer = await startOpenAIServer({ defaultModel: 'agent' });
  const summaryServer = await startOpenAIServer({ defaultModel: 'summarizer' });
  agentServer.setHandler(() => ({ kind: 'reply', content: 'ok', delayMs: STEP_MS }));
  summaryServer.setHandler(() => ({ kind: 'reply', content: SUMMARY, delayMs: SUMMARY_MS }));
  try {
    console.log(`scripted session: ${STEPS} steps of ${STEP_MS} ms (agent requests), summarizer ${SUMMARY_MS} ms per request, window ${WINDOW}, seed ${SEED}`);
    const fg = await runMode(false, agentServer.baseURL, summaryServer.baseURL);
    const bg = await runMode(true, agentServer.baseURL, summaryServer.baseURL);
    const pad = (s: string | number, n: number) => String(s).padEnd(n);
    console.log(
      `${pad('mode', 12)}${pad('blocked in afterStep', 22)}${pad('wall', 10)}${pad('compactions', 13)}${pad('without wait', 14)}${pad('waits', 7)}${pad('peak request', 14)}over window`,
    );
    for (const r of [fg, bg]) {
      console.log(
        `${pad(r.mode, 12)}${pad(`${(r.blockedMs / 1000).toFixed(2)} s`, 22)}${pad(`${(r.wallMs / 1000).toFixed(1)} s`, 10)}${pad(r.compactions, 13)}${pad(
          `${r.committedWithoutWait}/${r.compactions}`,
          14,
        )}${pad(r.waits, 7)}${pad(`${r.peak} / ${WINDOW}`, 14)}${r.overWindow}`,
      );
    }
    console.log(`blocked in afterStep, foreground ÷ background: ${(fg.blockedMs / Math.max(bg.blockedMs, 0.001)).toFixed(1)}× (goal ≥ 10×)`);
    const share = bg.compactions === 0 ? 0 : (100 * bg.committedWithoutWait) / bg.compactions;
    console.log(`background compactions committed without any wait: ${share.toFixed(0)}%; requests over the window: ${fg.overWindow + bg.overWindow}`);
  } finally {
    await agentServer.close();
    await summaryServer.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run();
}
