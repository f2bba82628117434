/**
 * withCompaction(): an `openai` client whose `chat.completions.create` records the conversation
 * in a session and sends its compacted form, with nothing else changed for the caller.
 *
 * Per call (one step of the caller's loop):
 * 1. the caller's messages are read against the recording (reconcile.ts): new ones are
 *    mapped and checked before anything is written (a message the session cannot hold, a tool
 *    call without its result, a model whose window is unknown: a typed error, nothing recorded);
 * 2. the new messages are recorded: a user message opens a turn; tool results close the step
 *    that made the calls, after `engine.afterStep()` (pressure, pruning, compaction) — the
 *    pressure check runs once the step's facts are in, before its `step/end`;
 * 3. a step opens with its request header, the request passes the pressure check
 *    (`engine.beforeRequest()`: every request, also the first after a reopen or a user message;
 *    one that cannot fit the window is not sent, a `BudgetError` `request-over-window` is thrown)
 *    and the session's (compacted) messages are sent; on an error the engine decides
 *    (`engine.onRequestError`): `retry` → the request is rebuilt from the shrunken surface,
 *    checked, and sent again; otherwise the provider's own error is thrown;
 * 4. the reply is recorded with its usage (a streamed one when its stream ends); a reply
 *    without tool calls runs the pressure check and ends the turn.
 *
 * One wrapped client is one conversation; its calls must not overlap.
 */
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionCreateParams, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { createCompactionEngine, type CompactionEngine, type CompactionEngineOptions } from '../../engine/facade';
import type { Session } from '../../session/session';
import { SessionWriter } from '../../session/writer';
import { missingCapacity, modelInfoFor, modelKey, type ModelInfo } from '../../services/config';
import { withErrorBodyRecovery, type OpenAIClient } from '../../services/overflow';
import { DropInError, recoveryFailed } from './errors';
import { recordedMessages } from '../../session/recorded';
import { fingerprint, mapMessage, recordedFingerprint, sessionMessages, splitSystem, type MappedMessage } from './messages';
import { firstNewMessage } from './reconcile';
import { callsHave, pairingProblem } from '../shapes/pairing';
import { recordingStream, type StreamedReply } from './stream';
import { wrapResponses } from './responses';
import { isAnthropicClient, withAnthropicCompaction, type AnthropicClientLike, type AnthropicCompactingClient } from '../anthropic/client';

export interface WithCompactionOptions extends Omit<CompactionEngineOptions, 'session' | 'client' | 'models'> {
  /** Where the conversation is recorded: `Session.inMemory()`, or a store's `Session.open(store, id)`. */
  session: Session;
  /**
   * Windows of models xcompact does not know, keyed `provider/model` or by the model name alone
   * (then under `provider`): `{ 'my-model': { contextWindow: 32_768 } }`.
   */
  models?: Record<string, Partial<ModelInfo>>;
  /** The registry's provider name. Default: from the client's `baseURL` (`openai`, `deepseek`, else `local`). */
  provider?: string;
}

/** What `client.compaction` holds: the conversation's session and engine. */
export interface Compaction {
  readonly session: Session;
  readonly engine: CompactionEngine;
  /** The provider name the models are looked up under (`provider/model`). */
  readonly provider: string;
  /** The conversation so far, to continue it with (after a restart): the system prompt, then every message as recorded. */
  messages(): ChatCompletionMessageParam[];
  /** Stops the engine, closes an open step and turn, and flushes the session; `{ session: true }` closes it too (its store released). */
  close(options?: { session?: boolean }): Promise<void>;
}

export type CompactingClient<C> = C & { readonly compaction: Compaction };

/** The provider name of an endpoint, for the registry key `provider/model`. */
export function providerOfBaseURL(baseURL: string | undefined): string {
  if (!baseURL) return 'openai';
  let host: string;
  try {
    host = new URL(baseURL).hostname;
  } catch {
    return 'local';
  }
  if (host === 'api.deepseek.com' || host.endsWith('.deepseek.com')) return 'deepseek';
  if (host === 'api.openai.com' || host.endsWith('.openai.com')) return 'openai';
  return 'local';
}

type CreateOptions = { signal?: AbortSignal } & Record<string, unknown>;
type RawCreate = (body: ChatCompletionCreateParams, options?: CreateOptions) => Promise<unknown>;

/** An `@anthropic-ai/sdk` client: its `messages.create` is wrapped (anthropic/client.ts). */
export function withCompaction<C extends AnthropicClientLike>(client: C, options: WithCompactionOptions): AnthropicCompactingClient<C>;
export function withCompaction<C extends OpenAIClient>(client: C, options: WithCompactionOptions): CompactingClient<C>;
export function withCompaction<C extends OpenAIClient>(client: C, options: WithCompactionOptions): CompactingClient<C> {
  if (isAnthropicClient(client)) return withAnthropicCompaction(client, options) as unknown as CompactingClient<C>;
  const { session, models: given = {}, provider: _p, ...engineOptions } = options;
  const provider = options.provider ?? providerOfBaseURL((client as { baseURL?: string }).baseURL);
  // vLLM's and Mistral's flat error bodies reach the classifier with their text: nothing to remember.
  withErrorBodyRecovery(client);
  const models: Record<string, Partial<ModelInfo>> = {};
  for (const [key, entry] of Object.entries(given)) models[key.includes('/') ? key : modelKey(provider, key)] = entry;
  // The caller's client, unwrapped: summary requests go through it and are not recorded.
  const engine = createCompactionEngine({ ...engineOptions, session, client, models });
  // A process that died mid-turn left its step and turn open: closed here, so the loop just goes on.
  if (session.needsRecovery) session.recover();
  const w = new SessionWriter(session);
  const rawCreate = (client.chat.completions.create as unknown as RawCreate).bind(client.chat.completions);

  /** Fingerprints of the recorded messages, in order; tool names by call id. */
  const recorded: string[] = [];
  const toolNames = new Map<string, string>();
  for (const e of recordedMessages(session)) {
    recorded.push(recordedFingerprint(e));
    if (e.type === 'assistant/message') for (const b of e.data.content) if (b.type === 'tool-call') toolNames.set(b.id, b.name);
  }
  /** The caller's message objects are usually the same from call to call: each is mapped once. */
  const seen = new WeakMap<object, { mapped: MappedMessage; print: string }>();
  let turnFailed = false;
  /** Bumped per call: a stream left unread when the next call starts records nothing. */
  let generation = 0;

  const closeStep = async (signal: AbortSignal | undefined): Promise<void> => {
    if (!session.openStep) return;
    if (session.surface.pendingCalls().length === 0) await engine.afterStep(signal ? { signal } : {});
    w.endStep();
  };
  const ensureTurn = () => {
    if (session.openTurn === null) w.startTurn();
  };

  const record = async (m: MappedMessage, signal: AbortSignal | undefined): Promise<void> => {
    switch (m.role) {
      case 'user':
        await closeStep(signal);
        if (session.openTurn !== null) w.endTurn(turnFailed ? 'error' : 'completed');
        turnFailed = false;
        w.startTurn();
        w.user(m.content);
        return;
      case 'assistant':
        ensureTurn();
        await closeStep(signal);
        w.startStep();
        w.assistant({ text: m.text, toolCalls: m.toolCalls });
        for (const c of m.toolCalls) toolNames.set(c.id, c.name);
        return;
      case 'tool': {
        const name = toolNames.get(m.callId);
        w.toolResult(m.callId, m.content, name ? { toolName: name } : {});
        return;
      }
    }
  };

  /** A request that failed for good, or a reply that cannot be recorded: its step ends as `error`. */
  const abandon = (reason: 'error' | 'aborted' = 'error') => {
    if (session.surface.pendingCalls().length > 0) return;
    if (session.openStep) w.endStep(reason);
    turnFailed = session.openTurn !== null;
  };

  const finish = async (reply: StreamedReply, signal: AbortSignal | undefined): Promise<void> => {
    const event = w.assistantFromCompletion(reply.message, {
      usage: reply.usage ?? null,
      provider,
      ...(reply.model ? { model: reply.model } : {}),
      ...(reply.finishReason ? { finishReason: reply.finishReason } : {}),
    });
    recorded.push(recordedFingerprint(event));
    const calls = reply.message.tool_calls ?? [];
    for (const c of calls) if (c.function) toolNames.set(c.id, c.function.name);
    if (calls.length === 0) {
      await closeStep(signal);
      w.endTurn('completed');
      turnFailed = false;
    }
    await session.flush();
  };

  /** Steps 1–2: what is new, checked, then recorded; the step opened with its request header. */
  const prepare = async (params: ChatCompletionCreateParams, signal: AbortSignal | undefined): Promise<void> => {
    const { system, rest } = splitSystem(params.messages);
    const mapped: MappedMessage[] = [];
    const prints: string[] = [];
    rest.forEach((m, i) => {
      let known = seen.get(m);
      if (!known) {
        const mm = mapMessage(m, i);
        known = { mapped: mm, print: fingerprint(mm) };
        seen.set(m, known);
      }
      mapped.push(known.mapped);
      prints.push(known.print);
    });
    const from = firstNewMessage(recorded, prints);
    const fresh = mapped.slice(from);
    checkAnswered(session.surface.pendingCalls(), fresh);
    requireWindow(params.model);
    // Surface node 0 comes first; a changed prompt replaces it in place.
    if (system !== undefined) w.system(system);
    for (const [k, m] of fresh.entries()) {
      await record(m, signal);
      recorded.push(prints[from + k]!);
    }
    await closeStep(signal);
    ensureTurn();
    w.startStep();
    const maxTokens = params.max_completion_tokens ?? params.max_tokens;
    const contextWindow = modelInfoFor(engine.config, provider, params.model)?.contextWindow;
    w.request({
      provider,
      model: params.model,
      tools: params.tools ?? [],
      ...(typeof maxTokens === 'number' ? { maxTokens } : {}),
      ...(contextWindow !== undefined ? { contextWindow } : {}),
    });
    await check(signal);
  };

  /**
   * Every request passes the pressure check just before it is sent (engine.beforeRequest): the
   * first after a reopen or a new user message too, which no step's end checked. A request that
   * cannot be brought under the window is not sent: its step ends as `error`, the typed error thrown.
   */
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

  /** No silent no-op: a model with no known window would never be compacted. */
  const requireWindow = (model: string) => {
    const missing = options.requireCapacity === false ? undefined : missingCapacity(provider, model, engine.config.models, 'withCompaction');
    if (missing) throw missing;
  };

  const create = async (params: ChatCompletionCreateParams, requestOptions?: CreateOptions): Promise<unknown> => {
    const mine = ++generation;
    const signal = requestOptions?.signal;
    await prepare(params, signal);
    const streaming = params.stream === true;
    const showUsage = streaming && params.stream_options?.include_usage === true;
    const body: ChatCompletionCreateParams =
      streaming && !showUsage ? { ...params, stream_options: { ...params.stream_options, include_usage: true } } : params;
    for (;;) {
      let result: unknown;
      try {
        result = await rawCreate({ ...body, messages: [...session.deriveMessages()] }, requestOptions);
      } catch (err) {
        let action: Awaited<ReturnType<CompactionEngine['onRequestError']>>;
        try {
          action = await engine.onRequestError(err, signal ? { signal } : {});
        } catch (failure) {
          try {
            abandon();
          } catch {
            // The session refuses the step's end too (a failed store): the error below says why.
          }
          throw recoveryFailed(err, failure);
        }
        if (action.kind === 'retry') {
          await check(signal);
          continue;
        }
        abandon();
        throw err;
      }
      if (streaming) {
        const source = result as AsyncIterable<ChatCompletionChunk> & { controller: AbortController };
        return recordingStream(
          source,
          {
            showUsage,
            done: async (reply, aborted) => {
              if (mine !== generation) return;
              if (aborted || signal?.aborted) return abandon('aborted');
              await finish(reply, signal);
            },
            failed: async () => {
              if (mine === generation) abandon('aborted');
            },
          },
          client,
        );
      }
      const completion = result as ChatCompletion;
      const choice = completion.choices[0];
      if (!choice) {
        abandon();
        return completion;
      }
      await finish(
        {
          message: choice.message,
          usage: completion.usage ?? undefined,
          model: completion.model,
          finishReason: choice.finish_reason ?? undefined,
        },
        signal,
      );
      return completion;
    }
  };

  const compaction: Compaction = {
    session,
    engine,
    provider,
    messages: () => sessionMessages(session),
    async close(opts = {}) {
      engine.stop();
      if (session.surface.pendingCalls().length === 0) {
        if (session.openStep) w.endStep('aborted');
        if (session.openTurn !== null) w.endTurn(turnFailed ? 'error' : 'aborted');
      }
      await (opts.session ? session.close() : session.flush());
    },
  };

  const completions = forward(client.chat.completions, { create });
  const chat = forward(client.chat, { completions });
  // The Responses API, stateless, over the same session and engine (responses.ts).
  const responses = wrapResponses(client, {
    session,
    engine,
    provider,
    ...(options.requireCapacity !== undefined ? { requireCapacity: options.requireCapacity } : {}),
  });
  return forward(client, { chat, compaction, ...(responses ? { responses } : {}) }) as CompactingClient<C>;
}

/** The caller's object with some members replaced; every other member read from (and bound to) the object itself. */
function forward<T extends object>(target: T, replaced: Record<string, unknown>): T {
  return new Proxy(target, {
    get(t, key) {
      if (typeof key === 'string' && Object.hasOwn(replaced, key)) return replaced[key];
      const value: unknown = Reflect.get(t, key, t);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(t) : value;
    },
    has(t, key) {
      return (typeof key === 'string' && Object.hasOwn(replaced, key)) || Reflect.has(t, key);
    },
  });
}

/** Every tool call answered, and every result answering a waiting call, before anything is written (shapes/pairing.ts). */
function checkAnswered(pending: readonly string[], fresh: readonly MappedMessage[]): void {
  const problem = pairingProblem(
    pending,
    fresh.map((m) => ({ role: m.role, results: m.role === 'tool' ? [m.callId] : [], calls: m.role === 'assistant' ? m.toolCalls.map((c) => c.id) : [] })),
  );
  if (problem?.kind === 'unexpected-result') {
    throw new DropInError(
      'unexpected-tool-result',
      `a tool message answers tool call "${problem.callId}", which is not waiting for a result (it was never made, or it has its result already); nothing was recorded or sent`,
      { toolCallIds: [problem.callId] },
    );
  }
  if (problem) {
    const where = problem.before === undefined ? 'at the end of the messages' : `before the next ${problem.before} message`;
    throw new DropInError(
      'missing-tool-results',
      `${callsHave(problem.callIds)} no result ${where}: ` +
        'append a { role: "tool", tool_call_id, content } message for every tool call (an error text for a call that was not run); nothing was recorded or sent',
      { toolCallIds: problem.callIds },
    );
  }
}
