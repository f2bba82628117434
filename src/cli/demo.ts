/**
 * `xcompact demo`: a scripted coding agent works on a long task against the built-in local
 * OpenAI-compatible server, with a small context window, while the compaction engine keeps
 * every request under it. Everything goes over real HTTP through the `openai` SDK — the
 * agent's requests, the summary requests of the OpenAISummarizer, and one deliberate
 * context-overflow 400 — so the demo exercises the same path as a real deployment.
 *
 * The agent loop below is the one DESIGN.md describes (and examples/agent-loop.ts shows
 * with real tools): per turn startTurn/user; per step startStep → request header → call →
 * assistant → tool results → afterStep → endStep; a failed request goes to onRequestError
 * and is rebuilt from the session on `retry`; `/compact` between turns calls compactNow.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import OpenAI from 'openai';
import type { ChatCompletion } from 'openai/resources/chat/completions';
import { createScriptedCoder } from './demo/scripted-coder';
import { requestFailure } from './demo/failure';
import { planTask, TASK_PROMPTS } from './demo/plan';
import { scheduleDemo } from './demo/schedule';
import { generateProject } from './demo/project';
import { DEMO_TOOLS, SimulatedWorkspace } from './demo/simulated-tools';
import { createCompactionEngine, type CompactionRecord, type EngineNotification } from '../engine/facade';
import { toChatMessage } from '../session/derive';
import type { SurfaceEvent } from '../session/events';
import { Session } from '../session/session';
import { JsonlStore } from '../session/stores/jsonl';
import { SessionWriter } from '../session/writer';
import { getTokenizer } from '../services/metering';
import { CompactionError } from '../services/core';
import { withErrorBodyRecovery } from '../services/overflow';
import { startOpenAIServer } from '../testing/openai-server';
import { createTraceRecorder } from '../trace';
import { CliError } from './errors';
import { openDemoPostgresSession } from './load';
import { renderReport, relativePath, type DemoReport } from './demo/report';
import { bar, createSpinner, createStyle, fmt, pct, seconds, truncate, useColor, type CliEnv, type Output } from './ui';

export { renderReport, type DemoReport } from './demo/report';

export interface DemoOptions {
  steps: number;
  window: number;
  out: string;
  seed: number;
  quiet: boolean;
  color: boolean;
  /** Keep the session in PostgreSQL instead of <out>/demo.jsonl. */
  store?: { url: string; session?: string | undefined };
  /** The environment (NO_COLOR, FORCE_COLOR); default process.env. */
  env?: CliEnv;
  /** History the scripted overflow waits for (default: twice the summary budget); 0 stages it even where recovery cannot help. */
  overflowMinSpanTokens?: number;
}

const PROVIDER = 'local';
const MODEL = 'demo-coder';
const SYSTEM_PROMPT =
  'You are fetchkit-agent, a careful coding agent working in the fetchkit repository. Use the tools to read files, run commands and edit code. ' +
  'Make small, verified changes; run the tests after each fix; answer with a short summary when the task is done.';

export async function runDemo(options: DemoOptions, out: Output = process.stdout): Promise<DemoReport> {
  const started = performance.now();
  if (!Number.isInteger(options.steps) || options.steps < 1 || options.steps > 2000) {
    throw new CliError(`--steps ${options.steps} is out of range: the demo needs a whole number of steps from 1 to 2000 (default 96).`, 2);
  }
  // Below 8k a single parallel batch of the task's (pruned) file reads no longer fits the window.
  if (!Number.isInteger(options.window) || options.window < 8192 || options.window > 2_000_000) {
    throw new CliError(`--window ${options.window} is out of range: use a whole number of tokens from 8192 to 2000000 (default 16384).`, 2);
  }
  if (!Number.isInteger(options.seed) || options.seed < 0) {
    throw new CliError(`--seed ${options.seed} is not a whole number ≥ 0: pass e.g. --seed 7.`, 2);
  }
  const style = createStyle(useColor(options.color, out, options.env));
  const say = (line = '') => {
    if (!options.quiet) out.write(`${line}\n`);
  };
  const spinner = createSpinner(out, style, !options.quiet);

  // ---- the model, the window and the engine's configuration
  const window = options.window;
  const maxOutputTokens = Math.min(1024, Math.floor(window / 8));
  const models = { [`${PROVIDER}/${MODEL}`]: { contextWindow: window, maxOutputTokens } };
  // The defaults' background mode (docs/spec.md#13-background-compaction): summaries are prepared while the agent works on.
  const config = { thresholdRatio: 0.8, retainRatio: 0.16, headroomTokens: Math.floor(window / 8), maxTokens: maxOutputTokens };

  // ---- the task: a long first turn, a manual /compact, a short second turn (one turn when very short)
  const schedule = scheduleDemo(options.steps, maxOutputTokens);
  const turns = schedule.turns;
  const files = generateProject(options.seed);
  const plan = planTask({ files, turns, seed: options.seed, toolset: 'demo' });
  const inputs = [
    TASK_PROMPTS[0]!,
    ...(schedule.compactBetweenTurns ? ['/compact the retry logic and the test failures'] : []),
    ...(turns.length > 1 ? [TASK_PROMPTS[1]!] : []),
  ];
  const workspace = new SimulatedWorkspace(files);
  const paced = !options.quiet;
  const coder = createScriptedCoder({
    plan,
    contextWindow: window,
    overflowAt: schedule.overflowFrom,
    overflowMinSpanTokens: options.overflowMinSpanTokens ?? schedule.minOverflowSpanTokens,
    stepDelayMs: paced ? 25 : 0,
    summaryDelayMs: paced ? 300 : 0,
    summaryChunkDelayMs: paced ? 45 : 0,
  });

  // ---- output files
  const outDir = resolve(options.out);
  await mkdir(outDir, { recursive: true });
  const sessionFile = join(outDir, 'demo.jsonl');
  const traceFile = join(outDir, 'trace.json');
  const configFile = join(outDir, 'xcompact.config.json');
  // A fresh run: the previous demo's session would otherwise be continued.
  await rm(sessionFile, { force: true });
  await writeFile(configFile, `${JSON.stringify({ ...config, models }, null, 2)}\n`);

  const server = await startOpenAIServer({ scenarios: coder.handler, defaultModel: MODEL });
  let session: Session | undefined;
  // A PostgreSQL session also ends its store's pool on close.
  let closeSession = () => session?.close();
  const report: DemoReport = {
    steps: 0,
    turns: 0,
    requests: { total: 0, agent: 0, summary: 0, rejected: 0 },
    compactions: { total: 0, byTrigger: {}, failed: 0 },
    prunes: { results: 0, tokensFreed: 0 },
    peakTokens: 0,
    threshold: 0,
    window,
    tokensSaved: 0,
    fullHistoryTokens: 0,
    summary: { promptTokens: 0, cachedTokens: 0 },
    overflowRecoveries: 0,
    agentWaited: { ms: 0, waits: 0, background: 0 },
    sessionFile,
    traceFile,
    configFile,
    events: 0,
    durationMs: 0,
  };
  try {
    // maxRetries 0: whether a failed request is retried is the engine's decision (onRequestError).
    const client = withErrorBodyRecovery(new OpenAI({ baseURL: server.baseURL, apiKey: 'local-demo-key', maxRetries: 0 }));
    if (options.store) {
      const pg = await openDemoPostgresSession(options.store);
      session = pg.session;
      closeSession = () => pg.close();
      report.sessionFile = pg.label;
    } else {
      session = await Session.open(new JsonlStore(outDir, { sync: false }), 'demo');
    }
    const recorder = createTraceRecorder(session, { follow: join(outDir, 'trace.live.js') }); // for index.html?follow=
    const engine = createCompactionEngine({ session, client, models, config, inspect: recorder.inspect });
    const w = new SessionWriter(session);
    const compactionNo = { n: 0 };
    // A background summary still being written when the agent is done is waited for, not dropped.
    let inFlight: { settled: Promise<void>; resolve: () => void } | undefined;

    engine.on((e: EngineNotification) => {
      switch (e.type) {
        case 'compaction.started':
          if (e.background) {
            let resolve = () => undefined as void;
            const settled = new Promise<void>((r) => (resolve = r));
            inFlight = { settled, resolve };
            say(
              `   ${style.magenta('…')} preparing a summary in the background ${style.dim(`(${e.nodes} nodes, ${fmt(e.spanTokens)} tokens); the agent goes on`)}`,
            );
            return;
          }
          spinner.start(`writing summary ${style.dim(`(${e.trigger}: ${e.nodes} nodes, ${fmt(e.spanTokens)} tokens)`)}`);
          return;
        case 'compaction.committed': {
          spinner.stop();
          if (e.background) {
            report.agentWaited.background++;
            inFlight?.resolve();
          }
          const r: CompactionRecord = e;
          report.compactions.total++;
          report.compactions.byTrigger[r.trigger] = (report.compactions.byTrigger[r.trigger] ?? 0) + 1;
          report.tokensSaved += Math.max(0, r.tokensBefore - r.tokensAfter);
          const u = r.summarizer.usage;
          if (u) {
            report.summary.promptTokens += u.promptTokens;
            report.summary.cachedTokens += u.cachedTokens ?? 0;
          }
          const cache = u ? `, summary request ${fmt(u.promptTokens)} tokens ${pct(u.cachedTokens ?? 0, u.promptTokens)} cached` : '';
          say(
            `   ${style.magenta('⟳')} ${style.bold(`compaction #${++compactionNo.n}`)} ${style.dim(`(${r.trigger}${e.background ? ', background' : ''})`)} ` +
              `${r.shadowedNodes} nodes → 1 checkpoint · ${fmt(r.tokensBefore)} → ${style.green(fmt(r.tokensAfter))} tokens · ${seconds(r.durationMs)}${style.dim(cache)}`,
          );
          return;
        }
        case 'compaction.failed':
          spinner.stop();
          if (e.background) inFlight?.resolve();
          report.compactions.failed++;
          say(`   ${style.red('✖')} compaction failed ${style.dim(`(${e.trigger})`)}: ${e.error.message}`);
          return;
        case 'compaction.skipped':
          say(`   ${style.yellow('!')} ${e.reason}`);
          return;
        case 'pruned':
          report.prunes.results += e.count;
          report.prunes.tokensFreed += e.tokensFreed;
          report.tokensSaved += e.tokensFreed;
          say(
            `   ${style.cyan('✂')} pruned ${e.count} oversized tool result${e.count === 1 ? '' : 's'} ${style.dim(`(${e.trigger})`)} · −${fmt(e.tokensFreed)} tokens, no model call`,
          );
          return;
        case 'prune.failed':
          say(`   ${style.yellow('!')} pruning failed ${style.dim(`(${e.trigger})`)}: ${e.error.message}; compacting without it`);
          return;
        case 'breaker.opened':
          say(`   ${style.red('!')} automatic compaction paused after ${e.consecutiveFailures} failures`);
          return;
        case 'capacity.missing':
          say(`   ${style.yellow('!')} ${e.message}`);
          return;
        default:
          return;
      }
    });

    say(style.bold(`xcompact demo — a scripted coding agent against a local OpenAI-compatible server (${server.baseURL})`));
    say(
      style.dim(
        `model ${PROVIDER}/${MODEL}: window ${fmt(window)} tokens, max output ${fmt(maxOutputTokens)}; ${options.steps} steps planned; session → ${relativePath(report.sessionFile)}`,
      ),
    );

    say(
      style.dim(
        `each step: the context after it, in tokens, against the threshold where compaction starts (the bar fills at the threshold), then the tools it called`,
      ),
    );

    w.system(SYSTEM_PROMPT);
    const request = () => w.request({ provider: PROVIDER, model: MODEL, systemPrompt: SYSTEM_PROMPT, tools: DEMO_TOOLS, maxTokens: maxOutputTokens });

    for (const input of inputs) {
      if (input.startsWith('/compact')) {
        const focus = input.slice('/compact'.length).trim();
        say('');
        say(`${style.bold('> /compact')} ${focus}`);
        // A /compact that cannot condense anything is the user's answer, not the end of the session.
        const record = await engine.compactNow(focus ? { focus } : {}).catch((err: unknown) => {
          if (!(err instanceof CompactionError)) throw err;
          say(`   /compact did not complete (${err.code}); the agent goes on with the history as it is`);
          return undefined;
        });
        if (record === null) say('   nothing to compact');
        continue;
      }
      w.startTurn();
      report.turns++;
      w.user(input);
      say('');
      say(`${style.bold(`── turn ${report.turns}`)} ${style.dim(truncate(input, 100))}`);
      for (;;) {
        w.startStep();
        report.steps++;
        request();
        const completion = await send(client, session, engine, maxOutputTokens, {
          step: () => report.steps,
          beforeSend: () => {
            const m = engine.measure();
            report.peakTokens = Math.max(report.peakTokens, m.totalTokens);
            report.threshold = m.threshold ?? report.threshold;
          },
          rejected: (err) => {
            const message = err instanceof Error ? err.message : String(err);
            say(
              `   ${style.red('✖')} step ${report.steps}: request rejected ${style.dim('(scripted: the server refuses this one on purpose)')}: ${truncate(message, 110)}`,
            );
          },
          retrying: () => {
            report.overflowRecoveries++;
            say(
              `   ${style.green('↻')} overflow recovery done: retrying step ${report.steps} with the compacted history (${session!.deriveMessages().length} messages)`,
            );
          },
        });
        const message = completion.choices[0]!.message;
        w.assistantFromCompletion(message, {
          usage: completion.usage ?? null,
          provider: PROVIDER,
          model: completion.model,
          finishReason: completion.choices[0]!.finish_reason,
        });
        const calls = (message.tool_calls ?? []).filter((c) => c.type === 'function');
        const described: string[] = [];
        for (const call of calls) {
          const result = workspace.run(call.function.name, call.function.arguments);
          w.toolResult(call.id, result.text, { toolName: call.function.name, ...(result.isError ? { isError: true } : {}) });
          described.push(describeCall(call.function.name, call.function.arguments));
        }
        const m = engine.measure();
        const threshold = m.threshold ?? 0;
        say(
          ` step ${String(report.steps).padStart(3)} ${bar(style, m.totalTokens, threshold)} ${fmt(m.totalTokens).padStart(7)} tokens (threshold ${fmt(threshold)})  ` +
            style.dim(truncate(calls.length > 0 ? described.join(', ') : `answer: ${message.content ?? ''}`, 70)),
        );
        const before = performance.now();
        const stepResult = await engine.afterStep();
        report.agentWaited.ms += performance.now() - before;
        // A step that committed a held summary waited for three appends, not for a summary: not counted.
        if (stepResult.status === 'waited') report.agentWaited.waits++;
        w.endStep();
        if (calls.length === 0) {
          w.endTurn();
          break;
        }
      }
    }
    spinner.stop();
    if (session.lock.held && inFlight) await inFlight.settled;

    await session.flush();
    report.events = session.length;
    report.fullHistoryTokens = fullHistoryTokens(session);
    await closeSession();
    engine.stop();
    recorder.stop();
    await recorder.save(traceFile);
    await recorder.save(traceFile.replace(/\.json$/, '.js'));
    for (const s of coder.served) {
      if (s.kind === 'agent') report.requests.agent++;
      else if (s.kind === 'summary') report.requests.summary++;
      else report.requests.rejected++;
    }
    report.requests.total = server.requests.length;
    if (!coder.served.some((s) => s.kind === 'overflow')) {
      report.overflowSkipped = `not staged: the run never held the ${fmt(schedule.minOverflowSpanTokens)} tokens of history before its newest step that recovery needs to condense (a longer run, such as the default 96 steps, shows it)`;
      say('');
      say(`${style.yellow('!')} the scripted context overflow was ${report.overflowSkipped}`);
    }
  } finally {
    spinner.stop();
    await closeSession()?.catch(() => undefined);
    await server.close();
  }
  report.durationMs = performance.now() - started;
  out.write(`\n${renderReport(report, style)}\n`);
  return report;
}

/** Sends one step's request; on an error asks the engine, and rebuilds the request from the session on `retry`. */
async function send(
  client: OpenAI,
  session: Session,
  engine: ReturnType<typeof createCompactionEngine>,
  maxTokens: number,
  hooks: { step(): number; beforeSend(): void; rejected(err: unknown): void; retrying(): void },
): Promise<ChatCompletion> {
  for (let attempt = 0; ; attempt++) {
    hooks.beforeSend();
    try {
      return await client.chat.completions.create({
        model: MODEL,
        messages: [...session.deriveMessages()],
        tools: DEMO_TOOLS,
        max_tokens: maxTokens,
      });
    } catch (err) {
      hooks.rejected(err);
      const action = await engine.onRequestError(err);
      if (action.kind !== 'retry' || attempt >= 3) throw requestFailure(hooks.step(), err, action.kind === 'retry' ? undefined : action);
      hooks.retrying();
    }
  }
}

function describeCall(name: string, args: string): string {
  try {
    const a = JSON.parse(args) as Record<string, string>;
    return `${name} ${a.path ?? a.command ?? ''}`.trim();
  } catch {
    return name;
  }
}

/** What the last request would have cost with nothing compacted or pruned: every original message. */
function fullHistoryTokens(session: Session): number {
  const t = getTokenizer('o200k_base');
  let total = 0;
  for (const e of session.events()) {
    if (e.surfaceOp !== 'append') continue;
    const m = toChatMessage(e as SurfaceEvent);
    let n = 4;
    if (typeof m.content === 'string') n += t.count(m.content);
    if (m.role === 'assistant' && m.tool_calls)
      for (const c of m.tool_calls) if (c.type === 'function') n += t.count(c.function.name) + t.count(c.function.arguments);
    total += n;
  }
  return total;
}
