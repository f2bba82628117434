/**
 * The package's reference loops for xcompact/testing's checker, and the same loops broken the
 * ways users break them: the mutation score of the checker (test/testing/loop-check-score.test.ts,
 * scripts/check-loops.ts) runs every broken loop against the scenarios and asks that each is
 * caught by at least one, and that no reference loop is.
 *
 * - `dropInLoop`: the openai drop-in (examples/openai-drop-in.ts's shape): the loop keeps its own
 *   `messages` array; the wrapped client records it and sends the compacted form.
 * - `aiSdkLoop`: the AI SDK adapter (examples/ai-sdk-drop-in.ts's shape): generateText on
 *   `compaction.model` with `[...compaction.messages(), prompt]`.
 * - `controlLoop()`: full control (docs/agent-loop.md): the loop records each fact with a
 *   SessionWriter, sends `session.deriveMessages()`, calls `engine.afterStep()` after each step
 *   and `engine.onRequestError()` on a failed request.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, jsonSchema, stepCountIs, tool, type ToolSet } from 'ai';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { createAiSdkCompaction } from '../../src/adapters/ai-sdk/index';
import { createCompactionEngine, SessionWriter, withCompaction, withErrorBodyRecovery } from '../../src/index';
import { Session } from '../../src/session/session';
import type { Invariant, LoopContext, UserLoop } from '../../src/testing';

const SYSTEM = 'You are a careful agent.';

export interface DropInBreakage {
  /** The tool calls are run but their results never pushed onto `messages`. */
  dropsToolResults?: boolean;
  /** `messages.push(message)` twice for each reply. */
  assistantTwice?: boolean;
}

/** The openai drop-in; `broken` makes it one of the users' bugs. */
export function dropInLoop(broken: DropInBreakage = {}): UserLoop {
  return async (ctx: LoopContext): Promise<void> => {
    const session = await Session.open(ctx.store, ctx.sessionId);
    // provider: ctx.provider: the drop-in reads a 127.0.0.1 baseURL as `local`; the scenario's models are keyed under ctx.provider.
    const client = withCompaction(new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 }), {
      session,
      provider: ctx.provider,
      models: ctx.models,
      config: ctx.config,
    });
    const messages: ChatCompletionMessageParam[] = client.compaction.messages();
    if (messages.length === 0) messages.push({ role: 'system', content: SYSTEM });
    try {
      for (const turn of ctx.turns) {
        messages.push({ role: 'user', content: turn });
        for (let step = 0; step < 10; step++) {
          // ctx.tools is readonly: openai's `tools` wants a mutable array.
          const reply = await client.chat.completions.create(
            { model: ctx.model, messages, tools: [...ctx.tools], max_tokens: ctx.maxOutputTokens },
            { signal: ctx.signal },
          );
          const message = reply.choices[0]!.message;
          messages.push(message);
          if (broken.assistantTwice) messages.push(message);
          if (!message.tool_calls?.length) break;
          for (const call of message.tool_calls) {
            if (call.type !== 'function') continue;
            const content = await ctx.runTool(call.function.name, call.function.arguments);
            if (!broken.dropsToolResults) messages.push({ role: 'tool', tool_call_id: call.id, content });
          }
        }
      }
    } finally {
      await client.compaction.close({ session: true }).catch(() => undefined);
    }
  };
}

/** The AI SDK adapter. */
export function aiSdkLoop(): UserLoop {
  return async (ctx: LoopContext): Promise<void> => {
    const session = await Session.open(ctx.store, ctx.sessionId);
    const provider = createOpenAICompatible({ name: ctx.provider, baseURL: ctx.baseURL, apiKey: ctx.apiKey, includeUsage: true });
    // The adapter recovers a session a crashed process left open (as the drop-in does).
    const compaction = createAiSdkCompaction({
      model: provider.chatModel(ctx.model),
      session,
      provider: ctx.provider,
      contextWindow: ctx.contextWindow,
      maxOutputTokens: ctx.maxOutputTokens,
      config: ctx.config,
    });
    const tools: ToolSet = Object.fromEntries(
      ctx.tools.map((t) => [
        t.function.name,
        tool({
          description: t.function.description,
          inputSchema: jsonSchema(t.function.parameters as never),
          execute: async (args: unknown) => ctx.runTool(t.function.name, JSON.stringify(args)),
        }),
      ]),
    );
    try {
      for (const prompt of ctx.turns) {
        await generateText({
          model: compaction.model,
          system: SYSTEM,
          messages: [...compaction.messages(), { role: 'user', content: prompt }],
          tools,
          stopWhen: stepCountIs(10),
          maxOutputTokens: ctx.maxOutputTokens,
          maxRetries: 0,
          abortSignal: ctx.signal,
        });
      }
    } finally {
      await compaction.close({ session: true }).catch(() => undefined);
    }
  };
}

export interface ControlBreakage {
  /** A failed request is rethrown without asking `engine.onRequestError` (an overflow is never retried). */
  noRequestError?: boolean;
  /** `afterStep()` after `step/end`. */
  afterStepAfterStepEnd?: boolean;
  /** A retry re-sends the derived messages without the tool results. */
  retryWithoutToolResults?: boolean;
  /** No `session.recover()` on reopen. */
  noRecover?: boolean;
  /** Sends its own ever-growing array, not `session.deriveMessages()` (what the engine compacted is never sent). */
  ownArray?: boolean;
  /** After a restart, records the conversation it saved itself again before the new prompt. */
  resendsHistoryAfterResume?: boolean;
  /** A request that fails for good is logged and the loop goes on to the next turn. */
  swallowsErrors?: boolean;
  /** `ctx.signal` is passed to nothing. */
  ignoresSignal?: boolean;
  /** Sends the next request with the step's tool results appended, and records the results only once it answers. */
  sendsBeforeResult?: boolean;
  /** Records each reply twice. */
  assistantTwice?: boolean;
}

/** What a loop that saves its own transcript kept, per checkLoop run (its store): it outlives the "process". */
const savedTranscripts = new WeakMap<object, string[]>();

/** Full control: a SessionWriter, the derived messages, afterStep() and onRequestError(). */
export function controlLoop(broken: ControlBreakage = {}): UserLoop {
  return async (ctx: LoopContext): Promise<void> => {
    const session = await Session.open(ctx.store, ctx.sessionId);
    if (session.needsRecovery && !broken.noRecover) session.recover();
    const client = withErrorBodyRecovery(new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 }));
    const engine = createCompactionEngine({ session, client, models: ctx.models, config: ctx.config });
    const w = new SessionWriter(session);
    const tools = [...ctx.tools];
    const signal = broken.ignoresSignal ? undefined : ctx.signal;
    const withSignal = signal ? { signal } : {};
    const own: ChatCompletionMessageParam[] = [{ role: 'system', content: SYSTEM }];
    const saved = savedTranscripts.get(ctx.store) ?? [];
    savedTranscripts.set(ctx.store, saved);
    try {
      if (session.surface.length === 0) w.system(SYSTEM);
      for (const [k, input] of ctx.turns.entries()) {
        w.startTurn();
        if (broken.resendsHistoryAfterResume && ctx.resumed && k === 0) for (const text of saved) w.user(text);
        w.user(input);
        saved.push(input);
        own.push({ role: 'user', content: input });
        try {
          await runTurn(input);
        } catch (err) {
          if (!broken.swallowsErrors) throw err;
          if (session.openStep) w.endStep('error');
        }
        w.endTurn();
      }
    } finally {
      engine.stop();
      await session.close().catch(() => undefined);
    }

    async function runTurn(_input: string): Promise<void> {
      let unrecorded: Array<{ id: string; content: string }> = [];
      for (let step = 0; step < 10; step++) {
        w.startStep();
        w.request({ provider: ctx.provider, model: ctx.model, systemPrompt: SYSTEM, tools, maxTokens: ctx.maxOutputTokens });
        let reply;
        for (let resend = false; ; resend = true) {
          // Every request is checked just before it is sent (docs/agent-loop.md): compacted, and cut to fit the window.
          await engine.beforeRequest(withSignal);
          let messages: ChatCompletionMessageParam[] = broken.ownArray ? [...own] : ([...session.deriveMessages()] as ChatCompletionMessageParam[]);
          if (resend && broken.retryWithoutToolResults) messages = messages.filter((m) => m.role !== 'tool');
          if (broken.sendsBeforeResult) messages.push(...unrecorded.map((r) => ({ role: 'tool' as const, tool_call_id: r.id, content: r.content })));
          try {
            reply = await client.chat.completions.create({ model: ctx.model, messages, tools, max_tokens: ctx.maxOutputTokens }, withSignal);
            break;
          } catch (err) {
            if (broken.noRequestError) throw err;
            const action = await engine.onRequestError(err, withSignal);
            if (action.kind !== 'retry') throw err;
          }
        }
        for (const r of unrecorded) w.toolResult(r.id, r.content);
        unrecorded = [];
        const message = reply.choices[0]!.message;
        w.assistantFromCompletion(message, { usage: reply.usage ?? null, provider: ctx.provider, model: ctx.model });
        if (broken.assistantTwice) w.assistantFromCompletion(message, { usage: reply.usage ?? null, provider: ctx.provider, model: ctx.model });
        own.push(message);
        for (const call of message.tool_calls ?? []) {
          if (call.type !== 'function') continue;
          const content = await ctx.runTool(call.function.name, call.function.arguments);
          own.push({ role: 'tool', tool_call_id: call.id, content });
          if (broken.sendsBeforeResult) unrecorded.push({ id: call.id, content });
          else w.toolResult(call.id, content);
        }
        if (broken.afterStepAfterStepEnd) {
          w.endStep();
          await engine.afterStep(withSignal);
        } else {
          await engine.afterStep(withSignal);
          w.endStep();
        }
        if (!message.tool_calls?.length) break;
      }
    }
  };
}

/** The reference loops: no scenario may catch them. */
export const REFERENCE_LOOPS: Record<string, UserLoop> = {
  'drop-in (openai)': dropInLoop(),
  'AI SDK adapter': aiSdkLoop(),
  'full control': controlLoop(),
};

/**
 * The broken loops. `probe`: the scenarios (name fragments, as `loopScenarios({ only })` takes
 * them) the always-on test runs it on, and `names`: an invariant the probe's report must name.
 * The full table (every loop on every scenario) is scripts/check-loops.ts.
 */
export const BROKEN_LOOPS: Record<string, { loop: UserLoop; probe: string; names: Invariant }> = {
  'drops tool results (drop-in)': { loop: dropInLoop({ dropsToolResults: true }), probe: 'pressure below', names: 'expected-outcome' },
  'ignores the compacted messages (own array)': {
    loop: controlLoop({ ownArray: true }),
    probe: 'pressure compacts → summary succeeds',
    names: 'sends-checkpoint',
  },
  'resends its own history after a resume': {
    loop: controlLoop({ resendsHistoryAfterResume: true }),
    probe: 'process crashes (tool call recorded)',
    names: 'no-message-twice',
  },
  'swallows errors': { loop: controlLoop({ swallowsErrors: true }), probe: 'openai overflow → engine gives-up', names: 'expected-outcome' },
  'never retries an overflow': { loop: controlLoop({ noRequestError: true }), probe: 'openai overflow → engine retries', names: 'expected-outcome' },
  'ignores the abort signal': { loop: controlLoop({ ignoresSignal: true }), probe: 'loop cancels', names: 'stops-on-abort' },
  'sends a tool call before its result is recorded': { loop: controlLoop({ sendsBeforeResult: true }), probe: 'pressure prunes', names: 'within-window' },
  'appends the assistant message twice (drop-in)': { loop: dropInLoop({ assistantTwice: true }), probe: 'model answers', names: 'no-message-twice' },
  'appends the assistant message twice (full control)': { loop: controlLoop({ assistantTwice: true }), probe: 'model answers', names: 'no-message-twice' },
  'afterStep() after step/end': {
    loop: controlLoop({ afterStepAfterStepEnd: true }),
    probe: 'pressure compacts → summary succeeds',
    names: 'after-step-inside-step',
  },
  'retry without the tool results': {
    loop: controlLoop({ retryWithoutToolResults: true }),
    probe: 'openai overflow → engine retries',
    names: 'tool-results-paired',
  },
  'no recover() on reopen': { loop: controlLoop({ noRecover: true }), probe: 'process crashes → process reopens', names: 'resumes-after-crash' },
};
