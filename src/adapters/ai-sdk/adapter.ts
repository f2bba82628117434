/**
 * The AI SDK adapter: a language-model middleware that puts an xcompact session and engine
 * between an AI SDK loop (`generateText`, `streamText`, `ToolLoopAgent`) and its model.
 *
 * Why a model wrapper and not `prepareStep`: `prepareStep` can replace the next step's
 * messages but never sees the step's own request fail, so it cannot recover a context
 * overflow (docs/spec.md#6-overflow-recovery) inside the loop. At the model boundary one object sees everything: the
 * whole prompt of each step (system prompt, the app's messages, the tool results the SDK
 * just produced), the reply with its usage, and the provider's error. So the app changes one
 * option — `model: compaction.model` — and every loop that takes a model works.
 *
 * Per model call (one AI SDK step):
 * 1. record what is new in the prompt (a user message opens a turn; tool results close the
 *    step that made the calls, after `engine.afterStep()`: pressure, pruning, compaction);
 * 2. open a step, record the request header, check the request (`engine.beforeRequest()`:
 *    pressure, then the window — every request, the first after a reopen or a user message
 *    too), send the session's (compacted) surface;
 * 3. on an error, ask `engine.onRequestError`; `retry` → rebuild the prompt and send again;
 * 4. record the reply (usage included); a reply without tool calls ends the turn.
 *
 * One adapter is one conversation; its calls must not overlap.
 *
 * Both AI SDK majors: `ai` 6 speaks provider spec v3, `ai` 7 spec v4 (and takes v3 models). The
 * adapter reads the spec of the model it wraps at each call (`specificationVersion`) and writes
 * the prompt in that spec; the two differ only in how files are held (see `SpecVersion`). The
 * wrapped model keeps the spec of the base model, so it works with whichever `ai` the app uses.
 */
import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3FinishReason,
  LanguageModelV3Message,
  LanguageModelV3Middleware,
  LanguageModelV3Prompt,
  LanguageModelV3Usage,
} from '@ai-sdk/provider';
import { createCompactionEngine, type CompactionEngine, type CompactionEngineOptions } from '../../engine/facade';
import type { SurfaceEvent } from '../../session/events';
import type { Session } from '../../session/session';
import { SessionWriter } from '../../session/writer';
import type { Summarizer } from '../../services/summarizing';
import { boundSummarizer } from '../../services/summarizing';
import { withCheckpointLedger } from '../../services/summarizing';
import { missingCapacity, modelInfoFor, type ModelInfo } from '../../services/config';
import { normaliseRequestError, recoveryFailed } from './errors';
import {
  AiSdkAdapterError,
  assistantFacts,
  fingerprint,
  promptOf,
  refuseOptions,
  replyFacts,
  toolResults,
  type SpecVersion,
  usageOf,
  userBlocks,
  type AssistantFacts,
} from './convert';
import { appMessagesIn, checkAnswered, isEcho, sameMessage, toolDefinition, type Mapped } from './history';
import { replyRecorder } from './stream';
import { specOf, wrapModel, type AiSdkLanguageModel, type AiSdkMiddleware } from './model';
import { recallTool } from './recall';
import { parseConfig, policyFor } from '../../services/config';
import { AiSdkSummarizer } from './summarizer';
import { sessionModelMessages } from './resume';
import type { ModelMessage } from 'ai';

export interface AiSdkCompactionOptions<M extends AiSdkLanguageModel = LanguageModelV3> extends Omit<
  CompactionEngineOptions,
  'session' | 'client' | 'summarizer' | 'models'
> {
  /** The model the loop talks to (any AI SDK language model of spec v3 or v4: `ai` 6 or 7). */
  model: M;
  /** Where the conversation is recorded (`Session.inMemory()`, or a store's `Session.open`). */
  session: Session;
  /** Registry key provider: defaults to the AI SDK provider id before its first dot (`openai.chat` → `openai`). */
  provider?: string;
  /** The model's window, when it is not a built-in model: registered as `provider/modelId`. */
  contextWindow?: number;
  /** The model's own output cap, when it is not a built-in model. */
  maxOutputTokens?: number;
  /** Model registry entries, merged over the built-ins. */
  models?: Record<string, Partial<ModelInfo>>;
  /**
   * Who writes summaries. Default: {@link AiSdkSummarizer} over `model` itself (the unwrapped
   * one), so summaries go through the same provider, credentials and prompt cache, bounded by
   * the model's window (`boundSummarizer`): a span that does not fit is summarized in chunks;
   * the checkpoint ledger (files, unresolved errors) is appended as with the OpenAI summarizer.
   */
  summarizer?: Summarizer;
}

export interface AiSdkCompaction<M extends AiSdkLanguageModel = LanguageModelV3> {
  /** Pass this as `model` to generateText / streamText / ToolLoopAgent: the base model (same spec) with the adapter in front. */
  readonly model: M;
  /** The middleware itself, to compose with other middleware in `wrapLanguageModel` (`ai` 6 or 7). */
  readonly middleware: AiSdkMiddleware;
  readonly engine: CompactionEngine;
  readonly session: Session;
  /** `tools: { ...yours, ...compaction.tools }`: the recall tool when `config.recall` is on for this model, else none. */
  readonly tools: Record<string, ReturnType<typeof recallTool>>;
  /**
   * The conversation recorded so far as `ModelMessage[]`: after a restart, pass them (plus what
   * is new) as `messages`, and the adapter continues the recorded conversation.
   */
  messages(): ModelMessage[];
  /** Stops the engine and closes an open step and turn, so the session is consistent; then flushes (and closes the session with `{ session: true }`). */
  close(options?: { session?: boolean }): Promise<void>;
}

/** The AI SDK provider id (`openai.chat`, `deepseek.chat`) → the registry's provider name. */
export function providerName(model: Pick<AiSdkLanguageModel, 'provider'>): string {
  return model.provider.split('.')[0] || model.provider;
}

export function createAiSdkCompaction<M extends AiSdkLanguageModel = LanguageModelV3>(options: AiSdkCompactionOptions<M>): AiSdkCompaction<M> {
  const { session } = options;
  // Called with the call options of its own spec; v4 differs from v3 only where convert.ts handles it.
  const base = options.model as unknown as LanguageModelV3;
  const provider = options.provider ?? providerName(base);
  const models: Record<string, Partial<ModelInfo>> = { ...(options.models ?? {}) };
  if (options.contextWindow !== undefined) {
    models[`${provider}/${base.modelId}`] = {
      contextWindow: options.contextWindow,
      ...(options.maxOutputTokens !== undefined ? { maxOutputTokens: options.maxOutputTokens } : {}),
    };
  }
  const { model: _m, provider: _p, contextWindow: _c, maxOutputTokens: _o, summarizer: _s, ...engineOptions } = options;
  const engine = createCompactionEngine({
    ...engineOptions,
    session,
    models,
    // Bounded by the summarizing model's window (this model's: the registry entry, or `contextWindow`):
    // a span larger than the window goes out in chunks that fit, never as one request that overflows.
    // The same checkpoint as the OpenAI summarizer's: the model's prose, the ledger derived from the span.
    summarizer:
      options.summarizer ??
      withCheckpointLedger(boundSummarizer(new AiSdkSummarizer({ model: base }), options.contextWindow !== undefined ? { window: options.contextWindow } : {})),
  });
  // A process that died mid-step (a tool-call reply recorded, its results never) left calls
  // without results and its step and turn open: closed here, as the openai drop-in does (each
  // call gets an "interrupted" error result), so `[...compaction.messages(), prompt]` goes on
  // instead of the AI SDK refusing the prompt (MissingToolResultsError) on every restart.
  if (session.needsRecovery) session.recover();
  const w = new SessionWriter(session);

  /**
   * Non-system prompt messages already recorded, by fingerprint (the app's uncompacted view).
   * A stored session continued by a new process starts with its messages read back from the
   * log (`~role`: the role is checked, not the parts).
   */
  const consumed: string[] = appMessagesIn(session).map((role) => `~${role}`);
  /** The reply the adapter recorded from the model: the next prompt repeats it, and it is skipped there. */
  let echo: string[] | undefined;
  /** The open turn's last request failed (and no reply completed it since). */
  let turnFailed = false;

  const closeStep = async (signal: AbortSignal | undefined): Promise<void> => {
    if (!session.openStep) return;
    if (session.surface.pendingCalls().length === 0) await engine.afterStep(signal ? { signal } : {});
    w.endStep();
  };
  const ensureTurn = () => {
    if (session.openTurn === null) w.startTurn();
  };

  /** Every new message mapped before anything is written: a part the session cannot hold changes nothing. */
  const mapAll = (messages: readonly LanguageModelV3Message[]): Mapped[] =>
    messages.map((message): Mapped => {
      switch (message.role) {
        case 'system':
          throw new AiSdkAdapterError(
            'unmappable-part',
            'xcompact/ai-sdk cannot record a system message in the middle of the conversation: only the leading system prompt is kept (as surface node 0); send other instructions as a user message',
          );
        case 'user':
          return { role: 'user', blocks: userBlocks(message) };
        case 'assistant':
          return { role: 'assistant', facts: assistantFacts(message) };
        case 'tool':
          return { role: 'tool', results: toolResults(message) };
      }
    });

  const record = async (m: Mapped, signal: AbortSignal | undefined): Promise<void> => {
    switch (m.role) {
      case 'user':
        await closeStep(signal);
        if (session.openTurn !== null) w.endTurn(turnFailed ? 'error' : 'completed');
        turnFailed = false;
        w.startTurn();
        w.user(m.blocks);
        return;
      case 'assistant':
        ensureTurn();
        await closeStep(signal);
        w.startStep();
        writeReply(m.facts, undefined);
        return;
      case 'tool':
        for (const r of m.results) {
          session.append({
            type: 'tool/result',
            data: {
              callId: r.callId,
              toolName: r.toolName,
              content: r.content,
              ...(r.isError ? { isError: true } : {}),
              ...(r.providerOptions ? { providerOptions: r.providerOptions } : {}),
            },
            surfaceOp: 'append',
          });
        }
        return;
    }
  };

  const writeReply = (facts: AssistantFacts, meta: { usage?: LanguageModelV3Usage; finish?: LanguageModelV3FinishReason; modelId?: string } | undefined) => {
    const usage = usageOf(meta?.usage);
    // The parts in their order with their provider options (the writer's assistant() keeps neither).
    session.append({
      type: 'assistant/message',
      data: {
        content: facts.blocks,
        ...(meta ? { provider, model: meta.modelId ?? base.modelId } : {}),
        ...(usage ? { usage } : {}),
        ...(meta?.finish?.raw ? { finishReason: meta.finish.raw } : {}),
      },
      surfaceOp: 'append',
    });
  };

  /** Steps 1–2: the new part of the app's prompt into the session; a step opened; the compacted prompt out. */
  const prepare = async (params: LanguageModelV3CallOptions, spec: SpecVersion): Promise<LanguageModelV3Prompt> => {
    const signal = params.abortSignal;
    let i = 0;
    const system: string[] = [];
    for (; i < params.prompt.length && params.prompt[i]!.role === 'system'; i++) {
      refuseOptions(params.prompt[i]!.providerOptions, 'the system prompt');
      system.push(params.prompt[i]!.content as string);
    }
    const rest = params.prompt.slice(i);
    for (let k = 0; k < consumed.length; k++) {
      if (rest[k] === undefined || !sameMessage(rest[k]!, consumed[k]!)) {
        throw new AiSdkAdapterError(
          'history-diverged',
          `the prompt does not continue the recorded conversation (message ${k} is ${rest[k] ? fingerprint(rest[k]!) : 'missing'}, recorded ${consumed[k]}): ` +
            'pass the previous messages unchanged and append to them, or create a new adapter (and session) for another conversation',
        );
      }
    }
    const candidate = rest[consumed.length];
    const echoed = echo !== undefined && candidate !== undefined && isEcho(candidate, echo);
    const fresh = rest.slice(consumed.length + (echoed ? 1 : 0));
    const mapped = mapAll(fresh);
    checkAnswered(session.surface.pendingCalls(), mapped);
    // No silent no-op: a model with no known window would never be compacted.
    const missing =
      options.requireCapacity === false ? undefined : missingCapacity(provider, base.modelId, engine.config.models, 'createAiSdkCompaction (or contextWindow)');
    if (missing) throw missing;
    if (echoed) consumed.push(fingerprint(candidate));
    echo = undefined;
    if (system.length > 0) w.system(system.join('\n\n'));
    for (const [k, m] of mapped.entries()) {
      await record(m, signal);
      consumed.push(fingerprint(fresh[k]!));
    }
    await closeStep(signal);
    ensureTurn();
    w.startStep();
    const contextWindow = modelInfoFor(engine.config, provider, base.modelId)?.contextWindow;
    w.request({
      provider,
      model: base.modelId,
      tools: (params.tools ?? []).map(toolDefinition),
      ...(params.maxOutputTokens ? { maxTokens: params.maxOutputTokens } : {}),
      ...(contextWindow !== undefined ? { contextWindow } : {}),
    });
    await check(signal);
    return derive(spec);
  };

  /** Every request passes the pressure check just before it is sent; one that cannot fit is not sent (its step ends as `error`). */
  const check = async (signal: AbortSignal | undefined): Promise<void> => {
    try {
      await engine.beforeRequest(signal ? { signal } : {});
    } catch (err) {
      try {
        abandon();
      } catch {
        // The session refuses the step's end too (a failed store): the error below says why.
      }
      throw err;
    }
  };

  /** The prompt from the surface. The step is open by now: a prompt that cannot be built (an image the model cannot fetch) ends it as `error`. */
  const derive = (spec: SpecVersion): LanguageModelV3Prompt => {
    const events: SurfaceEvent[] = [];
    for (const seq of session.surface.seqs()) events.push(session.event(seq) as SurfaceEvent);
    try {
      return promptOf(events, spec);
    } catch (err) {
      abandon();
      throw err;
    }
  };

  /** Step 4. */
  const finish = async (
    content: readonly LanguageModelV3Content[],
    meta: { usage?: LanguageModelV3Usage; finish?: LanguageModelV3FinishReason; modelId?: string },
    signal: AbortSignal | undefined,
  ) => {
    let facts: AssistantFacts;
    try {
      facts = replyFacts(content);
    } catch (err) {
      abandon();
      throw err;
    }
    writeReply(facts, meta);
    echo = facts.toolCalls.map((c) => c.id);
    if (facts.toolCalls.length === 0) {
      await closeStep(signal);
      w.endTurn('completed');
      turnFailed = false;
    }
    await session.flush();
  };

  /**
   * A request that failed for good: its step ends as `error`. The turn stays open, so a retry
   * of the same prompt (the SDK's own retries, or the app's) continues it; the next user
   * message ends it as `error` unless a reply completed it.
   */
  const abandon = () => {
    echo = undefined;
    if (session.surface.pendingCalls().length > 0) return;
    if (session.openStep) w.endStep('error');
    turnFailed = session.openTurn !== null;
  };

  /** Step 3: sends, and on an overflow the engine compacts and the prompt is rebuilt. */
  const send = async <R>(params: LanguageModelV3CallOptions, spec: SpecVersion, call: (p: LanguageModelV3CallOptions) => PromiseLike<R>): Promise<R> => {
    let prompt = await prepare(params, spec);
    for (;;) {
      try {
        return await call({ ...params, prompt });
      } catch (err) {
        const signal = params.abortSignal;
        let action: Awaited<ReturnType<CompactionEngine['onRequestError']>>;
        try {
          action = await engine.onRequestError(normaliseRequestError(err), signal ? { signal } : {});
        } catch (failure) {
          // Not the provider's error alone: the app must see why no recovery ran (a stopped
          // engine, a store that failed), with the provider's error kept beside it.
          try {
            abandon();
          } catch {
            // The session refuses the step's end too (a failed store): the error below says why.
          }
          throw recoveryFailed(err, failure);
        }
        if (action.kind !== 'retry') {
          abandon();
          throw err;
        }
        await check(signal);
        prompt = derive(spec);
      }
    }
  };

  const middleware = {
    specificationVersion: 'v3',
    wrapGenerate: async ({ params, model }) => {
      const result = await send(params, specOf(model), (p) => model.doGenerate(p));
      await finish(
        result.content,
        { usage: result.usage, finish: result.finishReason, ...(result.response?.modelId ? { modelId: result.response.modelId } : {}) },
        params.abortSignal,
      );
      return result;
    },
    wrapStream: async ({ params, model }) => {
      const result = await send(params, specOf(model), (p) => model.doStream(p));
      const recorder = replyRecorder(
        (content, meta) => finish(content, meta, params.abortSignal),
        () => abandon(),
      );
      return { ...result, stream: result.stream.pipeThrough(recorder) };
    },
  } satisfies LanguageModelV3Middleware;

  const recall = policyFor(parseConfig(options.config), provider, base.modelId).recall;
  return {
    model: wrapModel(options.model, middleware),
    middleware,
    engine,
    session,
    tools: recall ? { recall: recallTool(session) } : {},
    messages: () => sessionModelMessages(session),
    async close(opts = {}) {
      engine.stop();
      if (session.surface.pendingCalls().length === 0) {
        if (session.openStep) w.endStep('aborted');
        if (session.openTurn !== null) w.endTurn(turnFailed ? 'error' : 'aborted');
      }
      await (opts.session ? session.close() : session.flush());
    },
  };
}
