/**
 * An agent loop written as an XState machine that invokes the compaction machine.
 *
 * The agent chart calls the model (the `openai` SDK against any OpenAI-compatible endpoint),
 * records each step in the session, runs the tools, then tells the compaction machine — its
 * invoked child — in events: `request.ready` before each request (it is cut to fit the window
 * if it must be), `step.completed` after a step, `request.failed` when the model rejects a
 * request, `shutdown` at the end. The answers come back as events too
 * (`request.settled` with the request's id), and so do the notifications (`compaction.committed`,
 * `pruned`, …): no promise, no `await engine.*` anywhere in the loop.
 *
 *   checking (request.ready … settled) ─ fits ─▶ calling ─ reply recorded ─▶ compacting (step.completed … settled) ─▶ checking / finished
 *      └ no cut fits it ─▶ failed                └ request rejected ─▶ recovering (request.failed … settled) ─ retry ─▶ checking
 *                                                                                                              └ fail ─▶ failed
 *
 * With `config.recall` on, the recall tool joins the tools and a `recall` call is answered from the
 * session log (`recall.run`), like any other tool result.
 *
 * Run against a server: `OPENAI_BASE_URL=http://127.0.0.1:8080/v1 MODEL=m CONTEXT_WINDOW=8192 npx tsx examples/xstate-agent.ts`
 */
import OpenAI from 'openai';
import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import { and, assign, createActor, fromCallback, fromPromise, sendTo, setup, toPromise } from 'xstate';
import {
  createCompactionMachine,
  recallTool,
  MemoryStore,
  Session,
  SessionWriter,
  type CompactionConfigInput,
  type CompactionEmitted,
  type CompactionRecord,
} from '../src/index';
import { classifyRequestError } from '../src/advanced';

export interface XStateAgentOptions {
  client: OpenAI;
  session: Session;
  provider: string;
  model: string;
  contextWindow: number;
  maxTokens: number;
  task: string;
  /** The loop stops after this many steps even if the model keeps calling tools. */
  maxSteps: number;
  config?: CompactionConfigInput;
  /** Tools the model may call and their implementation (default: `read_notes`, a stand-in). */
  tools?: ChatCompletionTool[];
  runTool?: (name: string, args: string) => string | Promise<string>;
  /** Cancels the model requests (the loop then ends with the abort error). */
  signal?: AbortSignal;
}

export interface XStateAgentRun {
  steps: number;
  compactions: CompactionRecord[];
  overflowRetries: number;
  answer: string | undefined;
  /** The request error the engine could not recover from (the run ended in `failed`). */
  error?: unknown;
}

const TOOLS: ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'read_notes',
      description: 'Read the notes of one topic',
      parameters: { type: 'object', properties: { topic: { type: 'string' } }, required: ['topic'] },
    },
  },
];

/** A stand-in tool: deterministic, long enough output that the conversation fills the window. */
function readNotes(args: string): string {
  const topic = (JSON.parse(args) as { topic?: string }).topic ?? 'general';
  return Array.from({ length: 40 }, (_, i) => `${topic} note ${i + 1}: the build step ${i} depends on step ${i + 1}.`).join('\n');
}

export function createAgentMachine(options: XStateAgentOptions) {
  const { client, session, provider, model, maxTokens } = options;
  const writer = new SessionWriter(session);
  const compaction = createCompactionMachine({
    session,
    client,
    models: { [`${provider}/${model}`]: { contextWindow: options.contextWindow, maxOutputTokens: maxTokens } },
    ...(options.config ? { config: options.config } : {}),
  });
  // Nothing is lost: with recall on, the model can ask for what checkpoints and prunes took off its context.
  const recall = options.config?.recall === true ? recallTool(session) : undefined;
  const ownTools = options.tools ?? TOOLS;
  const ownRunTool = options.runTool ?? ((_name: string, args: string) => readNotes(args));
  const tools: ChatCompletionTool[] = recall ? [...ownTools, recall.definition] : ownTools;
  const runTool = (name: string, args: string): string | Promise<string> =>
    recall && name === recall.definition.function.name ? recall.run(args).text : ownRunTool(name, args);

  return setup({
    types: {
      context: {} as { run: XStateAgentRun; nextId: number; waitingFor: string | undefined; lastError: unknown; finished: boolean },
      // What the compaction machine sends its parent (answers and notifications), and the caller's abort.
      events: {} as CompactionEmitted | { type: 'agent.aborted' },
    },
    actors: {
      compaction,
      // The caller's signal, as an event: a summary in flight is cancelled through the compaction machine.
      abortSignal: fromCallback(({ sendBack }) => {
        const signal = options.signal;
        if (!signal) return undefined;
        const onAbort = () => sendBack({ type: 'agent.aborted' });
        if (signal.aborted) onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        return () => signal.removeEventListener('abort', onAbort);
      }),
      // One model request for the open step (its header recorded and checked); the reply and the tool results are recorded before it resolves.
      callModel: fromPromise(async () => {
        const completion = await client.chat.completions.create(
          { model, messages: [...session.deriveMessages()], tools, max_tokens: maxTokens },
          options.signal ? { signal: options.signal } : {},
        );
        const choice = completion.choices[0];
        if (!choice) throw new Error('the endpoint returned no choices');
        writer.assistantFromCompletion(choice.message, {
          usage: completion.usage ?? null,
          provider,
          model: completion.model,
          finishReason: choice.finish_reason,
        });
        const calls = (choice.message.tool_calls ?? []).filter((c) => c.type === 'function');
        for (const call of calls) writer.toolResult(call.id, await runTool(call.function.name, call.function.arguments), { toolName: call.function.name });
        return { answer: calls.length === 0 ? (choice.message.content ?? '') : undefined };
      }),
    },
    guards: {
      'is the answer we wait for': ({ context, event }) => event.type === 'request.settled' && event.id === context.waitingFor,
      'recovery says retry': ({ event }) => event.type === 'request.settled' && event.result.kind === 'overflow' && event.result.output.action === 'retry',
      'no cut fits the request': ({ event }) => event.type === 'request.settled' && event.result.kind === 'fit' && event.result.output.status === 'over',
      'work is finished': ({ context }) => context.finished,
    },
    actions: {
      'open the request': () => {
        if (!session.openStep) writer.startStep();
        writer.request({ provider, model, tools, maxTokens });
      },
      // Every request is checked just before it is sent: over the window, its largest tool results are cut to fit.
      'ask whether the request fits': sendTo('compaction', ({ context }) => ({ type: 'request.ready' as const, id: `a${context.nextId}` })),
      'refuse the request': assign({
        lastError: () => new Error('the request does not fit the window even with its tool results cut: shorten the task or the system prompt'),
      }),
      'ask compaction after the step': sendTo('compaction', ({ context }) => ({
        type: 'step.completed' as const,
        id: `a${context.nextId}`,
        turn: session.openTurn,
        aborted: false,
      })),
      'report the failed request': sendTo('compaction', ({ context }) => ({
        type: 'request.failed' as const,
        id: `a${context.nextId}`,
        error: context.lastError,
        turn: session.openTurn,
        aborted: false,
        lastAssistantSeq: session.latestReply?.seq ?? -1,
        // Only an overflow waits for a background summary: anything else is declined at once.
        overflow: classifyRequestError(context.lastError).kind === 'context-overflow',
      })),
      'wait for the answer': assign(({ context }) => ({ waitingFor: `a${context.nextId}`, nextId: context.nextId + 1 })),
      'end the step': assign(({ context }) => {
        writer.endStep();
        return { run: { ...context.run, steps: context.run.steps + 1 }, waitingFor: undefined };
      }),
      'remember the compaction': assign(({ context, event }) => {
        if (event.type !== 'compaction.committed') return {};
        const { type: _, ...record } = event;
        return { run: { ...context.run, compactions: [...context.run.compactions, record] } };
      }),
      'count the retry': assign(({ context }) => ({ run: { ...context.run, overflowRetries: context.run.overflowRetries + 1 }, waitingFor: undefined })),
      'shut compaction down': sendTo('compaction', { type: 'shutdown' as const }),
      'cancel what compaction is doing': sendTo('compaction', ({ context }) => ({
        type: 'cancel' as const,
        id: context.waitingFor ?? '',
        reason: 'the agent was aborted',
      })),
    },
  }).createMachine({
    id: 'agent',
    context: {
      run: { steps: 0, compactions: [], overflowRetries: 0, answer: undefined },
      nextId: 1,
      waitingFor: undefined,
      lastError: undefined,
      finished: false,
    },
    // The compaction machine lives as long as the agent; its notifications arrive as events.
    invoke: [
      // Its config is baked in. After `shutdown` it closes what it left open (a background summary's
      // bracket), then ends: only then does the agent end, so the session is never left mid-compaction.
      { id: 'compaction', src: 'compaction', input: undefined, onDone: '.stopped' },
      { src: 'abortSignal' },
    ],
    on: { 'compaction.committed': { actions: 'remember the compaction' } },
    initial: 'checking',
    states: {
      checking: {
        entry: ['open the request', 'ask whether the request fits', 'wait for the answer'],
        on: {
          'request.settled': [
            { guard: and(['is the answer we wait for', 'no cut fits the request']), target: 'failed', actions: 'refuse the request' },
            { guard: 'is the answer we wait for', target: 'calling', actions: assign({ waitingFor: undefined }) },
          ],
          'agent.aborted': { actions: 'cancel what compaction is doing' },
        },
      },
      calling: {
        invoke: {
          src: 'callModel',
          onDone: {
            target: 'compacting',
            actions: assign(({ context, event }) => ({
              run: { ...context.run, answer: event.output.answer },
              finished: event.output.answer !== undefined || context.run.steps + 1 >= options.maxSteps,
            })),
          },
          onError: { target: 'recovering', actions: assign({ lastError: ({ event }) => event.error }) },
        },
      },
      compacting: {
        entry: ['ask compaction after the step', 'wait for the answer'],
        on: {
          'request.settled': { guard: 'is the answer we wait for', target: 'nextStep', actions: 'end the step' },
          'agent.aborted': { actions: 'cancel what compaction is doing' },
        },
      },
      recovering: {
        entry: ['report the failed request', 'wait for the answer'],
        on: {
          'request.settled': [
            { guard: and(['is the answer we wait for', 'recovery says retry']), target: 'checking', actions: 'count the retry' },
            { guard: 'is the answer we wait for', target: 'failed' },
          ],
        },
      },
      nextStep: {
        always: [{ guard: 'work is finished', target: 'finished' }, { target: 'checking' }],
      },
      finished: { entry: 'shut compaction down' },
      failed: {
        entry: [assign(({ context }) => ({ run: { ...context.run, error: context.lastError ?? new Error('the request failed') } })), 'shut compaction down'],
      },
      stopped: { type: 'final' },
    },
    output: ({ context }) => context.run,
  });
}

/** Runs the agent on one task, in one turn, until the model answers or `maxSteps` is reached. */
export async function runXStateAgent(options: XStateAgentOptions): Promise<XStateAgentRun> {
  const writer = new SessionWriter(options.session);
  if (options.session.surface.length === 0) writer.system('You are a careful assistant. Use read_notes to look things up.');
  writer.startTurn();
  writer.user(options.task);
  const actor = createActor(createAgentMachine(options));
  actor.start();
  const run = (await toPromise(actor)) as XStateAgentRun;
  if (options.session.openStep) writer.endStep('error');
  writer.endTurn(run.error !== undefined ? 'error' : run.answer === undefined ? 'aborted' : 'completed');
  await options.session.flush();
  if (run.error !== undefined) throw run.error instanceof Error ? run.error : new Error('the agent failed', { cause: run.error });
  return run;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const model = process.env.MODEL ?? 'gpt-4o-mini';
  const session = await Session.open(new MemoryStore(), 'xstate-agent');
  const run = await runXStateAgent({
    client: new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY ?? 'not-needed' }),
    session,
    provider: process.env.PROVIDER ?? 'local',
    model,
    contextWindow: Number(process.env.CONTEXT_WINDOW ?? 8192),
    maxTokens: 512,
    task: process.argv.slice(2).join(' ') || 'Summarise the build notes.',
    maxSteps: 20,
    ...(process.env.RECALL === '1' ? { config: { recall: true } } : {}),
  });
  console.log(JSON.stringify({ steps: run.steps, compactions: run.compactions.length, overflowRetries: run.overflowRetries, answer: run.answer }, null, 2));
  await session.close();
}
