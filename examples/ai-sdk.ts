/**
 * xcompact in a Vercel AI SDK loop: `generateText` with tools, the conversation kept inside a
 * small context window by `createAiSdkCompaction` — one option changes: `model`.
 *
 *   npx tsx examples/ai-sdk.ts                  # the local scripted server (no API key needed)
 *   OPENAI_BASE_URL=https://api.deepseek.com/v1 OPENAI_API_KEY=sk-… MODEL=deepseek-chat \
 *     SANDBOX=./my-project npx tsx examples/ai-sdk.ts "where are HTTP retries decided?"
 *
 * Without OPENAI_BASE_URL it starts the OpenAI-compatible test server of `xcompact/testing`
 * on 127.0.0.1 with a scripted model that reads every file of a generated sandbox, one
 * read_file call per step, in a 16k window: the engine compacts in the middle of that tool
 * loop and the loop goes on. Set CONTEXT_WINDOW for a model xcompact does not know, RECALL=1 to
 * give the model the recall tool (`compaction.tools`: what checkpoints condensed comes back on request).
 */
import { mkdtemp, readdir, readFile, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, tool, type ModelMessage } from 'ai';
import { z } from 'zod';
// In your application: from 'xcompact', 'xcompact/ai-sdk' and 'xcompact/testing'.
import { JsonlStore, Session, type CompactionConfigInput, type CompactionRecord } from '../src/index';
import { createAiSdkCompaction, type AiSdkCompaction } from '../src/adapters/ai-sdk/index';
import { startOpenAIServer, type ChatRequestBody, type Scenario } from '../src/testing/index';

export interface ExampleOptions {
  baseURL: string;
  apiKey?: string;
  /** The name the endpoint knows the model by. */
  model: string;
  /** Registry provider name (`provider/model` is the key xcompact looks the window up by). */
  provider?: string;
  contextWindow?: number;
  maxOutputTokens?: number;
  session: Session;
  /** The only directory the tools read. */
  sandbox: string;
  prompts: string[];
  log?: (line: string) => void;
  /** Compaction settings over the example's (`maxTokens`). */
  config?: CompactionConfigInput;
  /** Called with the compaction before the first request (e.g. to attach `instrument` from xcompact/otel). */
  onCompaction?: (compaction: AiSdkCompaction) => void;
}

export interface ExampleRun {
  answers: string[];
  steps: number;
  compactions: CompactionRecord[];
}

const SYSTEM = 'You are a careful code reader. Use list_files and read_file to look at the project, then answer briefly.';

export async function runExample(options: ExampleOptions): Promise<ExampleRun> {
  const log = options.log ?? (() => undefined);
  const sandbox = await realpath(options.sandbox);
  const provider = createOpenAICompatible({
    name: options.provider ?? 'local',
    baseURL: options.baseURL,
    apiKey: options.apiKey ?? 'not-needed',
    includeUsage: true,
  });

  // The one change to an AI SDK app: the model it passes is the compaction's.
  const compaction = createAiSdkCompaction({
    model: provider.chatModel(options.model),
    session: options.session,
    ...(options.contextWindow ? { contextWindow: options.contextWindow } : {}),
    maxOutputTokens: options.maxOutputTokens ?? 1024,
    config: { maxTokens: options.maxOutputTokens ?? 1024, ...options.config },
  });
  options.onCompaction?.(compaction);
  const run: ExampleRun = { answers: [], steps: 0, compactions: [] };
  compaction.engine.on((e) => {
    if (e.type === 'compaction.committed') {
      run.compactions.push(e);
      log(`[xcompact] ${e.trigger} compaction: ${e.shadowedNodes} messages → 1 checkpoint, ${e.tokensBefore} → ${e.tokensAfter} tokens`);
    } else if (e.type === 'pruned') log(`[xcompact] pruned ${e.count} tool result(s), −${e.tokensFreed} tokens`);
    else if (e.type === 'compaction.failed') log(`[xcompact] compaction failed: ${e.error.message}`);
    else if (e.type === 'capacity.missing') log(`[xcompact] ${e.message}`);
  });

  const tools = {
    list_files: tool({
      description: 'List the files of the project.',
      inputSchema: z.object({}),
      execute: async () => (await readdir(sandbox, { recursive: true })).sort().join('\n'),
    }),
    read_file: tool({
      description: 'Read a UTF-8 text file of the project.',
      inputSchema: z.object({ path: z.string().describe('Path relative to the project root') }),
      execute: async ({ path }) => {
        const full = resolve(sandbox, path);
        const rel = relative(sandbox, full);
        if (rel.startsWith('..') || isAbsolute(rel)) return `${path} is outside the project.`;
        return readFile(full, 'utf8').catch((err: Error) => `Cannot read ${path}: ${err.message}`);
      },
    }),
    // With config.recall on: the recall tool, answered from the session log (empty otherwise).
    ...compaction.tools,
  };

  // The app keeps its own, uncompacted history; the adapter records it and sends the compacted one.
  const history: ModelMessage[] = [];
  try {
    for (const prompt of options.prompts) {
      history.push({ role: 'user', content: prompt });
      const result = await generateText({
        model: compaction.model,
        system: SYSTEM,
        messages: history,
        tools,
        stopWhen: stepCountIs(50),
        maxOutputTokens: options.maxOutputTokens ?? 1024,
        maxRetries: 0, // an overflow is the engine's to recover; other retries are your policy
        onStepFinish: (step) => {
          run.steps++;
          const m = compaction.engine.measure();
          log(
            `step ${run.steps}: ${step.toolCalls.map((c) => c.toolName).join(', ') || 'answer'} — context ${m.totalTokens} / ${m.contextWindow ?? '?'} tokens`,
          );
        },
      });
      history.push(...result.response.messages);
      run.answers.push(result.text);
      log(result.text);
    }
  } finally {
    await compaction.close();
  }
  return run;
}

// -----------------------------------------------------------------------------------------
// The local scripted model: reads every file, one per step, then answers.

/** A summary request ends with the compaction instruction, never with one of the app's prompts. */
const isSummaryRequest = (body: ChatRequestBody, prompts: readonly string[]): boolean => {
  const last = body.messages?.[body.messages.length - 1];
  return last?.role === 'user' && typeof last.content === 'string' && !prompts.includes(last.content);
};

export function scriptedReader(files: readonly string[], prompts: readonly string[]): (req: { body: ChatRequestBody }) => Scenario {
  let next = 0;
  return ({ body }) => {
    if (isSummaryRequest(body, prompts)) {
      return { kind: 'reply', content: `Read so far: ${files.slice(0, next).join(', ')}. Each file defines one retry policy.` };
    }
    if (next < files.length) {
      const path = files[next]!;
      next++;
      return { kind: 'reply', toolCalls: [{ id: `call_${next}`, name: 'read_file', arguments: JSON.stringify({ path }) }] };
    }
    return { kind: 'reply', content: `I read ${files.length} files; HTTP retries are decided in ${files[files.length - 1]}.` };
  };
}

/** A sandbox of generated source files, each about 1,500 tokens. */
export async function generateSandbox(dir: string, count: number): Promise<string[]> {
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    const name = `service-${String(i).padStart(2, '0')}.ts`;
    const lines = [`// service ${i}: retry policy and request handling`];
    for (let j = 0; j < 70; j++)
      lines.push(`export const limit${j} = { service: ${i}, attempt: ${j}, delayMs: ${(i * 31 + j * 17) % 997}, jitter: ${(j * 13) % 7} };`);
    await writeFile(join(dir, name), lines.join('\n') + '\n');
    names.push(name);
  }
  return names;
}

async function main(): Promise<void> {
  const prompts = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['Where are HTTP retries decided? Read every file first.'];
  const session = process.env.SESSION_DIR ? await Session.open(new JsonlStore(process.env.SESSION_DIR), process.env.SESSION ?? 'ai-sdk') : Session.inMemory();
  if (session.needsRecovery) session.recover();
  const log = (line: string) => console.log(line);
  const config = process.env.RECALL === '1' ? { recall: true } : {};
  if (process.env.OPENAI_BASE_URL) {
    await runExample({
      baseURL: process.env.OPENAI_BASE_URL,
      apiKey: process.env.OPENAI_API_KEY ?? 'not-needed',
      model: process.env.MODEL ?? 'gpt-4o-mini',
      ...(process.env.PROVIDER ? { provider: process.env.PROVIDER } : {}),
      ...(process.env.CONTEXT_WINDOW ? { contextWindow: Number(process.env.CONTEXT_WINDOW) } : {}),
      session,
      sandbox: process.env.SANDBOX ?? '.',
      prompts,
      log,
      config,
    });
  } else {
    const dir = await mkdtemp(join(tmpdir(), 'xcompact-ai-sdk-'));
    const files = await generateSandbox(dir, 12);
    const server = await startOpenAIServer({ scenarios: scriptedReader(files, prompts), defaultModel: 'scripted' });
    log(`local scripted model at ${server.baseURL}, sandbox ${dir}`);
    try {
      await runExample({ baseURL: server.baseURL, model: 'scripted', contextWindow: 16_384, session, sandbox: dir, prompts, log, config });
    } finally {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    }
  }
  await session.close();
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((err: unknown) => {
    console.error(`ai-sdk example: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  });
}
