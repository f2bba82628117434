/**
 * One server slot (docs/local-models.md#one-server-slot-background-summaries-while-the-tools-run): a local server that works on one request at a time (llama.cpp
 * `-np 1`). The agent's blocked time (its requests, queueing included, plus afterStep), foreground
 * against background, and the prompt the slot re-evaluates for the agent beyond what each request
 * added (a summary in the slot evicts the agent's cached prompt), in one run over the same script.
 *
 *   npx tsx bench/one-slot.ts
 *
 * The server is src/testing's with `slots: 1`: requests queue for the slot, each slot keeps its
 * last prompt (what a request shares with it is not evaluated again) and evaluation takes
 * EVAL_MS_PER_TOKEN. An agent step generates for STEP_MS, a summary for SUMMARY_MS; the agent's
 * tools run TOOL_MS between its reply and its next request. Modes: foreground; background with
 * no concurrency setting (the summary starts at the step that reaches the prepare point, so the
 * agent's next request queues behind it); background with the model's `concurrency: 1` (the
 * summary waits for the agent's next reply and runs while its tools do). Nothing is asserted.
 */
import OpenAI from 'openai';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { createCompactionEngine, type EngineNotification } from '../src/engine/facade';
import { Session } from '../src/session/session';
import { SessionWriter } from '../src/session/writer';
import { estimatePromptTokens, startOpenAIServer, type ChatRequestBody } from '../src/testing/openai-server';

const WINDOW = 16_384;
const STEPS = 36;
const STEP_MS = 150;
const TOOL_MS = 700;
const SUMMARY_MS = 600;
const EVAL_MS_PER_TOKEN = 0.15;
const SYSTEM = 'You are a coding agent working in a large repository. Keep answers short.';
const SUMMARY = '## Primary Request and Intent\n- fix the failing build\n## Current Work\n- reading the files the tools listed\n## Next Step\n- run the tests';
const TOOLS = [{ type: 'function', function: { name: 'read', parameters: { type: 'object', properties: { path: { type: 'string' } } } } }];

interface Mode {
  name: string;
  background: boolean;
  concurrency?: number;
}

interface ModeResult {
  name: string;
  blockedMs: number;
  queuedMs: number;
  afterStepMs: number;
  extraEvaluated: number;
  evaluated: number;
  compactions: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function runMode(mode: Mode): Promise<ModeResult> {
  const server = await startOpenAIServer({ slots: 1, evalMsPerToken: EVAL_MS_PER_TOKEN });
  server.setHandler((req) =>
    req.body.stream
      ? { kind: 'reply', content: SUMMARY, delayMs: SUMMARY_MS }
      : { kind: 'reply', toolCalls: [{ id: `c${req.index}`, name: 'read', arguments: JSON.stringify({ path: `src/m${req.index}.ts` }) }], delayMs: STEP_MS },
  );
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'bench', maxRetries: 0 });
  const session = Session.inMemory(`bench-slot-${mode.name}`);
  const w = new SessionWriter(session);
  const model = 'qwen-local';
  const engine = createCompactionEngine({
    session,
    client,
    models: { [`local/${model}`]: { contextWindow: WINDOW, maxOutputTokens: 512, ...(mode.concurrency ? { concurrency: mode.concurrency } : {}) } },
    config: { maxTokens: 512, economics: false, background: mode.background },
  });
  const notes: EngineNotification[] = [];
  engine.on((n) => notes.push(n));
  let blocked = 0;
  let afterStepMs = 0;
  w.system(SYSTEM);
  w.startTurn();
  w.user('Please fix the failing build.');
  try {
    for (let i = 0; i < STEPS; i++) {
      w.startStep();
      w.request({ provider: 'local', model, systemPrompt: SYSTEM, tools: TOOLS, maxTokens: 512 });
      const t0 = performance.now();
      const c = await client.chat.completions.create({ model, messages: [...session.deriveMessages()], tools: TOOLS as never, max_tokens: 512 });
      blocked += performance.now() - t0;
      const choice = c.choices[0]!;
      w.assistantFromCompletion(choice.message, { usage: c.usage ?? null, provider: 'local', model, finishReason: choice.finish_reason });
      await sleep(TOOL_MS);
      for (const call of choice.message.tool_calls ?? []) {
        w.toolResult(call.id, Array.from({ length: 40 }, (_, k) => `src/module${i}/file${k}.ts: export function f${k}() { return ${k * i}; }`).join('\n'));
      }
      const t1 = performance.now();
      await engine.afterStep();
      const spent = performance.now() - t1;
      afterStepMs += spent;
      blocked += spent;
      w.endStep();
    }
  } finally {
    engine.stop();
    await server.close();
  }
  // The slot's work for the agent beyond what each request added since the agent's previous one.
  let extra = 0;
  let evaluated = 0;
  let queued = 0;
  let previous = 0;
  for (const r of server.requests) {
    const body = r.json as ChatRequestBody;
    if (body.stream) continue;
    const prompt = estimatePromptTokens(body);
    evaluated += r.evaluatedTokens ?? 0;
    queued += r.queuedMs ?? 0;
    extra += Math.max(0, (r.evaluatedTokens ?? 0) - Math.max(0, prompt - previous));
    previous = prompt;
  }
  return {
    name: mode.name,
    blockedMs: blocked,
    queuedMs: queued,
    afterStepMs,
    extraEvaluated: extra,
    evaluated,
    compactions: notes.filter((n) => n.type === 'compaction.committed').length,
  };
}

const pad = (s: string | number, n: number) => String(s).padEnd(n);

export async function run(): Promise<void> {
  const modes: Mode[] = [
    { name: 'foreground', background: false },
    { name: 'background', background: true },
    { name: 'bg, 1 slot', background: true, concurrency: 1 },
  ];
  const results: ModeResult[] = [];
  for (const m of modes) results.push(await runMode(m));
  console.log(
    `one-slot server: ${STEPS} agent steps (generation ${STEP_MS} ms, tools ${TOOL_MS} ms), summaries ${SUMMARY_MS} ms, prompt evaluation ${EVAL_MS_PER_TOKEN} ms/token, window ${WINDOW}`,
  );
  console.log(
    `${pad('mode', 13)}${pad('agent blocked', 15)}${pad('queued', 10)}${pad('afterStep', 11)}${pad('re-evaluated beyond growth', 28)}${pad('evaluated', 11)}compactions`,
  );
  for (const r of results) {
    console.log(
      `${pad(r.name, 13)}${pad(`${(r.blockedMs / 1000).toFixed(2)} s`, 15)}${pad(`${(r.queuedMs / 1000).toFixed(2)} s`, 10)}${pad(`${(r.afterStepMs / 1000).toFixed(2)} s`, 11)}${pad(r.extraEvaluated, 28)}${pad(r.evaluated, 11)}${r.compactions}`,
    );
  }
  const [fg, bg, one] = results as [ModeResult, ModeResult, ModeResult];
  const ratio = (a: number, b: number) => (a / Math.max(b, 0.001)).toFixed(2);
  console.log(
    `agent blocked, foreground ÷ background: ${ratio(fg.blockedMs, bg.blockedMs)}×; foreground ÷ background on 1 slot: ${ratio(fg.blockedMs, one.blockedMs)}×`,
  );
  console.log(
    `queued behind a summary, background ÷ background on 1 slot: ${ratio(bg.queuedMs, one.queuedMs)}× (${(bg.queuedMs / 1000).toFixed(2)} s vs ${(one.queuedMs / 1000).toFixed(2)} s)`,
  );
  console.log(
    `prompt re-evaluated beyond growth (cache evicted by summaries, checkpoints): foreground ${fg.extraEvaluated}, background ${bg.extraEvaluated}, on 1 slot ${one.extraEvaluated} tokens`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await run();
