/**
 * The agent loops the real-server suite runs: the README's drop-in loop and an AI SDK loop,
 * each with a read_file tool whose results are the bulk of the context, small `max_tokens`
 * (the tiny model is slow), and a fetch that tells the logging proxy what xcompact knew when
 * each request left (helpers.ts). Used in process and by the SIGKILL/resume child (child.ts).
 */
import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionMessageToolCall, ChatCompletionTool } from 'openai/resources/chat/completions';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, tool, type ModelMessage } from 'ai';
import { z } from 'zod';
import { withCompaction } from '../../src/adapters/drop-in';
import { createAiSdkCompaction } from '../../src/adapters/ai-sdk';
import type { Session } from '../../src/session/session';
import type { CompactionConfigInput } from '../../src/services/config';
import { checkCounter, reportingFetch, text, words } from './helpers';

export const MODEL = 'tiny';
/** The agent's output cap: long enough for a tool call now and then (and for one cut inside its arguments). */
export const AGENT_MAX_TOKENS = 16;
/**
 * The summary's cap: above the tiny model's longest reply (100 tokens), so a summary is never
 * cut; the user's words in a checkpoint bounded so a compaction in 4k frees room.
 */
export const CONFIG: CompactionConfigInput = { maxTokens: 128, userWordsTokens: 200 };

const SYSTEM = 'You are a coding agent. Read files with read_file and answer briefly.';
const TOOLS: ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'read_file',
      description: 'Read a file of the project',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    },
  },
];

export interface LoopRun {
  requests: number;
  answers: number;
  compactions: number;
  cutCalls: number;
  errors: string[];
}

/** The file a call reads: ~180 words, the same for the same path. */
function fileFor(path: string, vocab: readonly string[]): string {
  let seed = 7;
  for (const ch of path) seed = (seed * 31 + ch.charCodeAt(0)) >>> 0;
  return `// ${path}\n${text(vocab, 180, seed)}`;
}

function runTool(call: ChatCompletionMessageToolCall, vocab: readonly string[]): { text: string; cut: boolean } {
  if (call.type !== 'function') return { text: `error: tool calls of type ${call.type} are not supported`, cut: false };
  let args: { path?: unknown };
  try {
    args = JSON.parse(call.function.arguments) as { path?: unknown };
  } catch {
    return {
      text: `error: the arguments of ${call.function.name} are not JSON (${call.function.arguments.slice(0, 40)}): the reply was cut; call it again`,
      cut: true,
    };
  }
  return { text: fileFor(String(args.path ?? 'README.md'), vocab), cut: false };
}

export interface DropInLoopOptions {
  baseURL: string;
  session: Session;
  /** Agent requests to send. */
  requests: number;
  tokenizer: 'server' | 'o200k_base';
  proc: string;
  seed: number;
  /** Called after each agent request answered (the child prints it for its parent). */
  onReply?: (n: number) => void;
}

/** The README's drop-in loop: the whole conversation passed each time, tool results appended, a new user message when the model answers. */
export async function dropInLoop(o: DropInLoopOptions): Promise<LoopRun> {
  const vocab = words();
  const counter = checkCounter();
  const run: LoopRun = { requests: 0, answers: 0, compactions: 0, cutCalls: 0, errors: [] };
  let measure: (() => number) | undefined;
  const client = withCompaction(
    new OpenAI({
      baseURL: o.baseURL,
      apiKey: 'local',
      maxRetries: 0,
      timeout: 900_000,
      fetch: reportingFetch(() => ({ checks: counter.count(), estimate: measure?.() }), o.proc),
    }),
    {
      session: o.session,
      provider: 'local',
      models: { [MODEL]: { contextWindow: 4096, concurrency: 1, tokenizer: o.tokenizer } },
      config: CONFIG,
      inspect: counter.inspect,
    },
  );
  measure = () => client.compaction.engine.measure().totalTokens;
  client.compaction.engine.on((e) => {
    if (e.type === 'compaction.committed') run.compactions++;
  });
  const messages: ChatCompletionMessageParam[] = client.compaction.messages();
  if (messages.length === 0) messages.push({ role: 'system', content: SYSTEM });
  let turn = o.seed * 1000 + messages.length;
  try {
    while (run.requests < o.requests) {
      const last = messages[messages.length - 1]!;
      if (last.role === 'system' || (last.role === 'assistant' && !last.tool_calls?.length)) {
        messages.push({ role: 'user', content: `Look at src/${vocab[turn % vocab.length]}.ts: ${text(vocab, 100, ++turn)}` });
      } else if (last.role === 'assistant' && last.tool_calls?.length) {
        // Killed between the reply and its results: run them now.
        for (const call of last.tool_calls) messages.push({ role: 'tool', tool_call_id: call.id, content: runTool(call, vocab).text });
      }
      const reply = await client.chat.completions.create(
        { model: MODEL, messages, tools: TOOLS, max_tokens: AGENT_MAX_TOKENS },
        { headers: { 'x-test-agent': '1' } },
      );
      run.requests++;
      o.onReply?.(run.requests);
      const message = reply.choices[0]!.message;
      messages.push(message);
      const calls = message.tool_calls ?? [];
      if (calls.length === 0) run.answers++;
      for (const call of calls) {
        const r = runTool(call, vocab);
        if (r.cut) run.cutCalls++;
        messages.push({ role: 'tool', tool_call_id: call.id, content: r.text });
      }
    }
  } catch (err) {
    run.errors.push(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
  }
  await client.compaction.close();
  return run;
}

export interface AiSdkLoopOptions {
  baseURL: string;
  tokenizeUrl: string;
  session: Session;
  /** Agent requests to send (at most; a generateText call is up to 3 of them). */
  requests: number;
  tokenizer: 'server' | 'o200k_base';
  proc: string;
  seed: number;
}

/** An AI SDK loop: generateText with a read_file tool, up to 3 steps per user message. */
export async function aiSdkLoop(o: AiSdkLoopOptions): Promise<LoopRun> {
  const vocab = words();
  const counter = checkCounter();
  const run: LoopRun = { requests: 0, answers: 0, compactions: 0, cutCalls: 0, errors: [] };
  let measure: (() => number) | undefined;
  const provider = createOpenAICompatible({
    name: 'local',
    baseURL: o.baseURL,
    apiKey: 'local',
    includeUsage: true,
    fetch: reportingFetch(() => ({ checks: counter.count(), estimate: measure?.() }), o.proc),
  });
  const compaction = createAiSdkCompaction({
    model: provider.chatModel(MODEL),
    session: o.session,
    provider: 'local',
    models: {
      [`local/${MODEL}`]: { contextWindow: 4096, concurrency: 1, tokenizer: o.tokenizer, ...(o.tokenizer === 'server' ? { tokenizerUrl: o.tokenizeUrl } : {}) },
    },
    config: CONFIG,
    inspect: counter.inspect,
  });
  measure = () => compaction.engine.measure().totalTokens;
  compaction.engine.on((e) => {
    if (e.type === 'compaction.committed') run.compactions++;
  });
  const tools = {
    read_file: tool({
      description: 'Read a file of the project',
      inputSchema: z.object({ path: z.string() }),
      execute: async ({ path }) => fileFor(path, vocab),
    }),
  };
  const history: ModelMessage[] = compaction.messages();
  let turn = o.seed * 1000;
  try {
    while (run.requests < o.requests) {
      history.push({ role: 'user', content: `Look at src/${vocab[turn % vocab.length]}.ts: ${text(vocab, 100, ++turn)}` });
      const r = await generateText({
        model: compaction.model,
        system: SYSTEM,
        messages: history,
        tools,
        stopWhen: stepCountIs(Math.min(3, o.requests - run.requests)),
        maxOutputTokens: AGENT_MAX_TOKENS,
        maxRetries: 0,
        headers: { 'x-test-agent': '1' },
      });
      run.requests += r.steps.length;
      run.answers++;
      for (const s of r.steps) for (const c of s.content) if (c.type === 'tool-error') run.cutCalls++;
      history.push(...r.response.messages);
    }
  } catch (err) {
    run.errors.push(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
  }
  await compaction.close();
  return run;
}
