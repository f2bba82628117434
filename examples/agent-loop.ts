/**
 * A minimal, real agent loop with the `openai` SDK, two tools and the xcompact engine.
 *
 *   OPENAI_API_KEY=sk-… MODEL=gpt-4o-mini SANDBOX=./my-project npx tsx examples/agent-loop.ts
 *
 * Type a request at the `>` prompt; `/compact [focus]` between turns compacts by hand,
 * `/exit` (or Ctrl-D) quits. Input may also be piped (`printf 'list the files\n/exit\n' | …`):
 * every line is read, and the end of input ends the run. The session is stored in
 * ./.xcompact-sessions/agent.jsonl and continued on the next run. See examples/README.md for
 * DeepSeek, llama.cpp and Ollama.
 *
 * Where the engine is called, and why there:
 * - `afterStep()` after each step's facts (assistant message, tool results) are in the log and
 *   before `step/end`, also in the middle of a tool loop: that is where pressure is measured
 *   and, above the threshold, tool output is pruned and old history condensed.
 * - `beforeRequest()` before every request: the first after a reopen or a new user message, and
 *   each retry. It runs the same pressure check, then measures the prompt plus `max_tokens`
 *   against the window; a request that still cannot fit is refused with a `BudgetError`
 *   (`request-over-window`) and never sent.
 * - `onRequestError(err)` when a request fails: on a context overflow it compacts and answers
 *   `retry`; the retried request is rebuilt from `session.deriveMessages()`, never reused.
 * - `compactNow({ focus })` for `/compact`, only between turns.
 * - With `config.recall` on (RECALL=1), the recall tool joins the tools: checkpoints and pruned
 *   results name handles, and a `recall` call is answered from the session log
 *   (`recall.run(arguments)`: bad arguments come back as a tool error, never thrown).
 */
import { execFile } from 'node:child_process';
import { realpath, stat, readFile } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import OpenAI from 'openai';
import type { ChatCompletion, ChatCompletionTool } from 'openai/resources/chat/completions';
// In your application: from 'xcompact'.
import {
  createCompactionEngine,
  recallTool,
  JsonlStore,
  Session,
  SessionWriter,
  withErrorBodyRecovery,
  type CompactionEngineOptions,
  type CompactionRecord,
} from '../src/index';

const SYSTEM_PROMPT =
  'You are a coding agent working in a sandboxed project directory. Use read_file to read files and run_command ' +
  '(ls, cat, head, tail, wc, grep, find; no shell syntax) to explore. Answer concisely when you are done.';

export const TOOLS: ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'read_file',
      description: 'Read a UTF-8 text file of the project.',
      parameters: { type: 'object', properties: { path: { type: 'string', description: 'Path relative to the project root' } }, required: ['path'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'run_command',
      description: 'Run one read-only command in the project root: ls, cat, head, tail, wc, grep or find. No pipes, redirections or globs.',
      parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    },
  },
];

export interface RunAgentOptions {
  /** Any OpenAI-compatible endpoint. */
  client: OpenAI;
  /** Provider and model name: `provider/model` is the engine's registry key; `model` is sent to the API. */
  provider: string;
  model: string;
  /** Needed when provider/model is not a built-in model (see src/services/config/models.ts). */
  contextWindow?: number;
  /** max_tokens of every request (the output reservation). */
  maxOutputTokens?: number;
  config?: CompactionEngineOptions['config'];
  /** An open session (the caller opens and closes it; its store decides where it lives). */
  session: Session;
  /** The directory the tools may read. */
  sandbox: string;
  /** User turns and `/compact [focus]` commands, in order. */
  inputs: Iterable<string> | AsyncIterable<string>;
  systemPrompt?: string;
  maxStepsPerTurn?: number;
  signal?: AbortSignal;
  /** Called before each chat request is sent, with the engine's measurement of it. */
  onRequest?: (info: { turn: number; step: number; attempt: number; tokens: number; threshold: number | undefined; contextWindow: number | undefined }) => void;
  log?: (line: string) => void;
}

export interface AgentRun {
  turns: number;
  steps: number;
  requests: number;
  overflowRetries: number;
  compactions: CompactionRecord[];
  /** The final answer of each turn. */
  answers: string[];
}

export async function runAgent(options: RunAgentOptions): Promise<AgentRun> {
  const { session, client, provider, model, signal } = options;
  const log = options.log ?? (() => undefined);
  const systemPrompt = options.systemPrompt ?? SYSTEM_PROMPT;
  const maxTokens = options.maxOutputTokens ?? 4096;
  const sandbox = await realpath(options.sandbox);
  const w = new SessionWriter(session);
  const engine = createCompactionEngine({
    session,
    client,
    models: options.contextWindow ? { [`${provider}/${model}`]: { contextWindow: options.contextWindow, maxOutputTokens: maxTokens } } : {},
    ...(options.config ? { config: options.config } : {}),
  });
  const run: AgentRun = { turns: 0, steps: 0, requests: 0, overflowRetries: 0, compactions: [], answers: [] };
  engine.on((e) => {
    if (e.type === 'compaction.committed') {
      run.compactions.push(e);
      log(`[xcompact] ${e.trigger} compaction: ${e.shadowedNodes} messages → 1 checkpoint, ${e.tokensBefore} → ${e.tokensAfter} tokens`);
    } else if (e.type === 'pruned') log(`[xcompact] pruned ${e.count} tool result(s), −${e.tokensFreed} tokens`);
    else if (e.type === 'compaction.failed') log(`[xcompact] compaction failed: ${e.error.message}`);
    else if (e.type === 'compaction.skipped') log(`[xcompact] ${e.reason}`);
    // A model without a known window (or with no room for a budget): the engine says so once per model.
    else if (e.type === 'capacity.missing') log(`[xcompact] ${e.message}`);
  });

  // Nothing is lost: with recall on, the model can bring back what checkpoints and prunes took off its context.
  const recall = options.config?.recall === true ? recallTool(session) : undefined;
  const tools: ChatCompletionTool[] = recall ? [...TOOLS, recall.definition] : TOOLS;

  // The system prompt must be surface node 0, so it is recorded before the first user message.
  if (session.surface.length === 0) w.system(systemPrompt);

  /** One chat request for the current step; on a context overflow the engine compacts and we rebuild and resend. */
  const complete = async (turn: number, step: number): Promise<ChatCompletion> => {
    const budget = maxTokens;
    for (let attempt = 0; ; attempt++) {
      await engine.beforeRequest(signal ? { signal } : {});
      const m = engine.measure();
      options.onRequest?.({ turn, step, attempt, tokens: m.totalTokens, threshold: m.threshold, contextWindow: m.contextWindow });
      run.requests++;
      try {
        return await client.chat.completions.create({ model, messages: [...session.deriveMessages()], tools, max_tokens: budget }, signal ? { signal } : {});
      } catch (err) {
        const action = await engine.onRequestError(err, signal ? { signal } : {});
        if (action.kind !== 'retry') throw err;
        run.overflowRetries++;
        log(`[xcompact] the request was too long (${action.classification.provider ?? 'overflow'}): compacted, retrying`);
      }
    }
  };

  try {
    for await (const raw of options.inputs) {
      const input = raw.trim();
      if (input === '') continue;
      if (input === '/compact' || input.startsWith('/compact ')) {
        const focus = input.slice('/compact'.length).trim();
        const record = await engine.compactNow({ ...(focus ? { focus } : {}), ...(signal ? { signal } : {}) });
        if (!record) log('[xcompact] nothing to compact'); // a committed one is logged by the listener above
        continue;
      }
      const turn = w.startTurn();
      run.turns++;
      w.user(input);
      let answer: string | undefined;
      try {
        for (let i = 0; i < (options.maxStepsPerTurn ?? 100) && answer === undefined; i++) {
          const { step } = w.startStep();
          run.steps++;
          w.request({ provider, model, systemPrompt, tools, maxTokens });
          const completion = await complete(turn, step);
          const choice = completion.choices[0];
          if (!choice) throw new Error('the endpoint returned no choices');
          w.assistantFromCompletion(choice.message, { usage: completion.usage ?? null, provider, model: completion.model, finishReason: choice.finish_reason });
          const calls = (choice.message.tool_calls ?? []).filter((c) => c.type === 'function');
          for (const call of calls) {
            const result =
              recall && call.function.name === recall.definition.function.name
                ? recall.run(call.function.arguments)
                : await runTool(sandbox, call.function.name, call.function.arguments);
            w.toolResult(call.id, result.text, { toolName: call.function.name, ...(result.isError ? { isError: true } : {}) });
          }
          await engine.afterStep(signal ? { signal } : {});
          w.endStep();
          if (calls.length === 0) answer = choice.message.content ?? '';
        }
      } catch (err) {
        // Keep the log consistent for the next run: close what is open, then report.
        if (session.surface.pendingCalls().length === 0) {
          if (session.openStep) w.endStep('error');
          w.endTurn('error');
        }
        throw err;
      }
      w.endTurn(answer === undefined ? 'aborted' : 'completed');
      run.answers.push(answer ?? '');
      log(answer ?? '(stopped: too many steps in one turn)');
    }
  } finally {
    engine.stop();
    await session.flush();
  }
  return run;
}

// -----------------------------------------------------------------------------------------
// The two tools, confined to the sandbox directory.

interface ToolResult {
  text: string;
  isError: boolean;
}

const MAX_OUTPUT = 200_000;
const COMMANDS = new Set(['ls', 'cat', 'head', 'tail', 'wc', 'grep', 'find']);
const FIND_FORBIDDEN = new Set(['-exec', '-execdir', '-ok', '-okdir', '-delete', '-fprint', '-fprint0', '-fprintf', '-fls']);

export async function runTool(sandbox: string, name: string, argumentsJson: string): Promise<ToolResult> {
  let args: Record<string, unknown>;
  try {
    args = JSON.parse(argumentsJson) as Record<string, unknown>;
  } catch {
    return { text: `The arguments are not valid JSON: ${argumentsJson.slice(0, 200)}`, isError: true };
  }
  try {
    if (name === 'read_file') return await readSandboxFile(sandbox, typeof args.path === 'string' ? args.path : '');
    if (name === 'run_command') return await runSandboxCommand(sandbox, typeof args.command === 'string' ? args.command : '');
    return { text: `Unknown tool "${name}".`, isError: true };
  } catch (err) {
    return { text: err instanceof Error ? err.message : String(err), isError: true };
  }
}

/** A path inside the sandbox (after symlinks), or an error. */
async function inside(sandbox: string, path: string): Promise<string> {
  if (path === '' || isAbsolute(path)) throw new Error(`"${path}" must be a path relative to the project root.`);
  const full = await realpath(resolve(sandbox, path)).catch(() => {
    throw new Error(`${path}: no such file or directory`);
  });
  const rel = relative(sandbox, full);
  if (rel.startsWith('..') || isAbsolute(rel)) throw new Error(`${path} is outside the project directory.`);
  return full;
}

async function readSandboxFile(sandbox: string, path: string): Promise<ToolResult> {
  const full = await inside(sandbox, path);
  const info = await stat(full);
  if (info.isDirectory()) return { text: `${path} is a directory; use run_command "ls ${path}".`, isError: true };
  if (info.size > 2_000_000) return { text: `${path} is ${info.size} bytes; read part of it with run_command "head -n 200 ${path}".`, isError: true };
  return { text: await readFile(full, 'utf8'), isError: false };
}

async function runSandboxCommand(sandbox: string, command: string): Promise<ToolResult> {
  const [bin, ...argv] = splitArgs(command);
  if (!bin || !COMMANDS.has(bin)) return { text: `"${bin ?? ''}" is not allowed; use one of ${[...COMMANDS].join(', ')}.`, isError: true };
  for (const a of argv) {
    if (/[|;&<>`$*?]/.test(a) && bin !== 'grep') return { text: `"${a}": shell syntax and globs are not supported.`, isError: true };
    if (bin === 'find' && FIND_FORBIDDEN.has(a)) return { text: `find ${a} is not allowed.`, isError: true };
    if (!a.startsWith('-') && (isAbsolute(a) || a.split(/[\\/]/).includes('..')))
      return { text: `"${a}" points outside the project directory.`, isError: true };
  }
  return new Promise((done) => {
    execFile(
      bin,
      argv,
      { cwd: sandbox, timeout: 10_000, maxBuffer: 4 * MAX_OUTPUT, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C' } },
      (err, stdout, stderr) => {
        let text = `${stdout}${stderr ? `\n${stderr}` : ''}`;
        if (text.length > MAX_OUTPUT) text = `${text.slice(0, MAX_OUTPUT)}\n[output cut at ${MAX_OUTPUT} characters]`;
        const code = err && typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : err ? -1 : 0;
        // grep exits 1 for "no match": an answer, not a failure.
        const failed = code !== 0 && !(bin === 'grep' && code === 1);
        done({ text: failed ? `${text}\n(exit code ${code}${err && code === -1 ? `: ${err.message}` : ''})`.trim() : text || '(no output)', isError: failed });
      },
    );
  });
}

/** Splits on whitespace, honouring single and double quotes; no other shell syntax. */
function splitArgs(command: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quote: string | undefined;
  let started = false;
  for (const ch of command) {
    if (quote) {
      if (ch === quote) quote = undefined;
      else cur += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      started = true;
    } else if (/\s/.test(ch)) {
      if (started || cur) out.push(cur);
      cur = '';
      started = false;
    } else cur += ch;
  }
  if (started || cur) out.push(cur);
  return out;
}

// -----------------------------------------------------------------------------------------
// Run from the command line.

/**
 * The lines read at a `> ` prompt, up to `/exit` or the end of input.
 *
 * Every line is queued from the moment this is called, so lines that arrive before the loop
 * first asks (piped input is usually all there at once, while the session is still opening) or
 * while a turn runs are kept, not dropped; readline's own async iterator only sees lines emitted
 * after it is attached. The prompt is shown only while the interface is open: writing it after
 * the end of input throws on Node 24 and later.
 */
export function promptedLines(input: Readable, output: Writable, prompt = '> '): { lines: AsyncIterable<string>; close(): void } {
  const rl = createInterface({ input, output, prompt });
  const queued: string[] = [];
  let ended = false;
  let paused = false;
  let wake: (() => void) | undefined;
  // A bound on what is read ahead: a large pipe waits in the pipe, not in memory.
  const HIGH = 1024;
  rl.on('line', (line) => {
    queued.push(line);
    if (queued.length >= HIGH && !paused && !ended) {
      paused = true;
      rl.pause();
    }
    wake?.();
  });
  rl.on('close', () => {
    ended = true;
    wake?.();
  });
  async function* lines(): AsyncGenerator<string> {
    for (;;) {
      if (!ended && queued.length === 0) rl.prompt();
      while (queued.length === 0 && !ended) await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
      const line = queued.shift();
      if (line === undefined) return; // end of input
      if (paused && !ended && queued.length < HIGH / 2) {
        paused = false;
        rl.resume();
      }
      if (line.trim() === '/exit') return;
      yield line;
    }
  }
  return { lines: lines(), close: () => rl.close() };
}

function providerOf(baseURL: string | undefined): string {
  if (!baseURL) return 'openai';
  const host = new URL(baseURL).hostname;
  if (host.endsWith('deepseek.com')) return 'deepseek';
  if (host.endsWith('openai.com')) return 'openai';
  return 'local';
}

async function main(): Promise<void> {
  const baseURL = process.env.OPENAI_BASE_URL;
  const model = process.env.MODEL ?? 'gpt-4o-mini';
  const provider = process.env.PROVIDER ?? providerOf(baseURL);
  const contextWindow = process.env.CONTEXT_WINDOW ? Number(process.env.CONTEXT_WINDOW) : undefined;
  const maxOutputTokens = process.env.MAX_TOKENS ? Number(process.env.MAX_TOKENS) : 4096;
  const sandbox = resolve(process.env.SANDBOX ?? '.');
  // maxRetries 0: retrying is the loop's decision (onRequestError). withErrorBodyRecovery makes
  // vLLM's and Mistral's error bodies readable, so their overflow errors are recognised.
  const client = withErrorBodyRecovery(new OpenAI({ ...(baseURL ? { baseURL } : {}), apiKey: process.env.OPENAI_API_KEY ?? 'not-needed', maxRetries: 0 }));
  const session = await Session.open(new JsonlStore(process.env.SESSION_DIR ?? '.xcompact-sessions'), process.env.SESSION ?? 'agent');
  if (session.needsRecovery) {
    // The previous run stopped mid-turn (crash, kill): close its open calls, step, turn and lock.
    const r = session.recover();
    console.error(`recovered the previous run: ${r.closedCalls.length} interrupted call(s)${r.clearedLock !== undefined ? ', a stale compaction lock' : ''}`);
  }
  const prompt = promptedLines(process.stdin, process.stdout);
  try {
    await runAgent({
      client,
      provider,
      model,
      ...(contextWindow ? { contextWindow } : {}),
      maxOutputTokens,
      config: {
        // The summary's max_tokens defaults to the resolved headroom, min(65,536, window / 8): for
        // a large window that is more than most APIs accept as max_tokens. (The headroom itself
        // needs no setting: its default already scales down to small windows.)
        maxTokens: maxOutputTokens,
        ...(process.env.RECALL === '1' ? { recall: true } : {}),
      },
      session,
      sandbox,
      inputs: prompt.lines,
      log: (line) => console.log(line),
    });
  } finally {
    prompt.close();
    await session.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((err: unknown) => {
    console.error(`agent-loop: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  });
}
