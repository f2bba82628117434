/**
 * One recorded conversation, sent compacted: the protocol every face calls (the Chat
 * Completions drop-in, the Responses API, Anthropic Messages, the AI SDK). A face keeps only
 * its message map (its messages ↔ `ConversationMessage`, the surface → its request) and its
 * stream accumulator; every promise the faces make lives here once.
 *
 * One call of the caller's loop is one step:
 * 1. **Read** (`begin`): the caller's messages, mapped by its face, are read against the
 *    recording (reconcile.ts): the whole conversation or only what is new, either way.
 * 2. **Plan**: everything the call would write is checked before the first append: each new
 *    message on its own (the session's rules: storable text, a known block shape), the pairing
 *    of tool calls and results (none left waiting, none answered twice, no call id made twice),
 *    a system prompt that can still be surface node 0, a model whose window is known, and room
 *    in that window for what nothing can shrink (`engine.admits`: the system prompt, the tools
 *    and the newest user message, with the output cap). A refused call writes nothing, so the
 *    caller's next valid call continues as if it never came.
 * 3. **Commit**: the new messages are recorded (a user message opens a turn; an assistant
 *    message opens a step; tool results answer their calls and close their step, after the
 *    pressure check of its facts, `engine.afterStep()`), then a step opens with its request
 *    header (model, tools, output cap, window).
 * 4. **Check**: the request passes `engine.beforeRequest()` (prune, compact, and whatever else
 *    brings it under the window) before it is sent — every request: the first after a reopen
 *    or a user message, and each retry. One that cannot be brought under it is not sent.
 * 5. **Send** (`step.send`): the face builds its request from the surface and sends it; on an
 *    error the engine decides (`engine.onRequestError`): `retry` → checked and built again
 *    from the shrunken surface; otherwise the provider's own error is thrown.
 * 6. **Finish** (`step.finish`): the reply is recorded with its usage; a reply without tool
 *    calls runs the pressure check and ends the turn. A request that failed for good, a reply
 *    that cannot be recorded, a stream that stopped early: the step ends (`abandon`), so the
 *    session stays one an agent — this process or the next — continues.
 *
 * One conversation is one caller's loop: its calls must not overlap. A streamed reply is
 * recorded when its stream ends; a stream left unread when the next call begins records nothing.
 */
import { createCompactionEngine, type CompactionEngine, type CompactionEngineOptions } from '../../engine/facade';
import { missingCapacity, modelInfoFor, modelKey, type ModelInfo } from '../../services/config';
import { isCheckpoint, type ReasoningBlock, type SessionEvent, type SurfaceEvent, type TextBlock, type ToolCallBlock, type Usage } from '../../session/events';
import { SessionRuleError } from '../../session/errors';
import type { Session } from '../../session/session';
import { SessionWriter } from '../../session/writer';
import { ConversationError, recoveryFailed } from './errors';
import { callsOf, fingerprint, isEmptyReply, messageOf, type ConversationMessage } from './messages';
import { callsHave, pairingProblem } from './pairing';
import { firstNewMessage } from './reconcile';

/** How a face names things in its refusals: the caller reads them in its own SDK's terms. */
export interface Face {
  /** The call that wrapped the client, named in a missing-window error (`withCompaction`). */
  entry: string;
  /** What the caller's list is called (`messages`, `input`, `prompt`). */
  list: string;
  /** How the caller gives a tool call its result, in its terms. */
  resultHint: string;
  /** The caller always passes the whole conversation (reconcile.ts): a list that does not begin as the recording is refused. */
  whole?: boolean;
  /**
   * The caller's list cannot tell where one reply ends and the next begins (Responses output
   * items pushed one response after another): consecutive assistant messages are read as one,
   * on both sides of the match.
   */
  mergeReplies?: boolean;
}

/** What one call of the caller's loop says about the conversation, mapped by its face. */
export interface TurnCall {
  /** The system prompt the caller gave (joined text), if any. */
  system: string | undefined;
  /** The caller's conversation messages (whole, or only the new ones), mapped. */
  messages: readonly ConversationMessage[];
  model: string;
  /** Tool definitions in the Chat Completions shape (what the request header keeps). */
  tools: ReadonlyArray<Record<string, unknown>>;
  /** The request's output cap, if the caller set one. */
  maxTokens?: number;
  /** The face this call came through, when one conversation serves two (a wrapped openai client's chat and responses). */
  face?: Face;
}

/** A reply, as its face read it. */
export interface Reply {
  blocks: Array<TextBlock | ReasoningBlock | ToolCallBlock>;
  usage?: Usage;
  model?: string;
  finishReason?: string;
}

/** One step of the conversation: the request being made, from its check to its reply. */
export interface Step {
  /** Per caller message: the seq of its recorded event (-1: an empty reply, neither matched nor recorded). */
  readonly seqs: readonly number[];
  /** Still the conversation's newest step: a stream left unread when the next call began records nothing. */
  readonly current: boolean;
  /** The events on the surface, in order: what the face builds its request from (again after each recovery). */
  surface(): SurfaceEvent[];
  /**
   * Sends `attempt()` (which builds its request from `surface()` each time it is called). On an
   * error the engine decides: retry (checked again first), or the provider's own error is thrown
   * and the step ends. `view`: the error as the classifier should read it (an SDK that keeps its
   * error body elsewhere); the caller always gets the SDK's own error.
   */
  send<T>(attempt: () => Promise<T>, view?: (err: unknown) => unknown): Promise<T>;
  /** Records the reply `read()` gives (a reply it cannot read ends the step, and its error is thrown). */
  finish(read: () => Reply): Promise<void>;
  /** The request failed for good, or its stream stopped early: the step ends (a later step of a newer call is left alone). */
  abandon(reason?: 'error' | 'aborted'): void;
}

export interface Conversation {
  readonly session: Session;
  readonly engine: CompactionEngine;
  readonly provider: string;
  /** Steps 1–4: read, plan, commit and check one call; the step it opened, to send and finish. */
  begin(call: TurnCall, signal: AbortSignal | undefined): Promise<Step>;
  /** Stops the engine, closes an open step and turn, and flushes the session; `{ session: true }` closes it too. */
  close(options?: { session?: boolean }): Promise<void>;
}

/** A recorded message as the caller's are matched against it. */
interface Known {
  seq: number;
  print: string;
  message: ConversationMessage;
}

export interface ConversationOptions {
  session: Session;
  engine: CompactionEngine;
  provider: string;
  face: Face;
  /** `false`: a model with no known window is sent anyway (overflow recovery only). */
  requireCapacity?: boolean;
}

export interface OpenConversationOptions extends Omit<CompactionEngineOptions, 'session' | 'models'> {
  session: Session;
  provider: string;
  face: Face;
  /** Windows of models xcompact does not know, keyed `provider/model` or by the model name alone (then under `provider`). */
  models?: Record<string, Partial<ModelInfo>>;
}

/** The engine and the conversation over it: what every face opens with its options. */
export function openConversation(options: OpenConversationOptions): Conversation {
  const { session, provider, face, models: given = {}, ...engineOptions } = options;
  const models: Record<string, Partial<ModelInfo>> = {};
  for (const [key, entry] of Object.entries(given)) models[key.includes('/') ? key : modelKey(provider, key)] = entry;
  const engine = createCompactionEngine({ ...engineOptions, session, models });
  return createConversation({
    session,
    engine,
    provider,
    face,
    ...(options.requireCapacity !== undefined ? { requireCapacity: options.requireCapacity } : {}),
  });
}

export function createConversation(options: ConversationOptions): Conversation {
  const { session, engine, provider } = options;
  // A process that died mid-turn left calls without results and its step and turn open:
  // closed here (each call gets an "interrupted" error result), so the loop just goes on.
  if (session.needsRecovery) session.recover();
  const w = new SessionWriter(session);
  /** The recorded messages (empty replies left out: a caller may not pass one back), read incrementally: events never change. */
  const known: Known[] = [];
  let scanned = 0;
  /** `known` with consecutive assistant messages as one (face.mergeReplies), extended as `known` grows. */
  const merged: Array<Known & { run: Extract<ConversationMessage, { role: 'assistant' }> | undefined }> = [];
  let mergedUpTo = 0;
  /** Every call id made in the session, with its tool's name. */
  const toolNames = new Map<string, string>();
  /** The caller's mapped messages are usually the same objects from call to call: each is fingerprinted once. */
  const prints = new WeakMap<ConversationMessage, string>();
  let turnFailed = false;
  let generation = 0;

  const recorded = (): Known[] => {
    const events = session.events();
    for (; scanned < events.length; scanned++) {
      const e = events[scanned]!;
      if (e.surfaceOp !== 'append' || (e.type !== 'user/message' && e.type !== 'assistant/message' && e.type !== 'tool/result')) continue;
      if (e.type === 'user/message' && isCheckpoint(e)) continue;
      if (e.type === 'assistant/message') for (const b of e.data.content) if (b.type === 'tool-call') toolNames.set(b.id, b.name);
      const m = messageOf(e as SurfaceEvent);
      if (isEmptyReply(m)) continue;
      known.push({ seq: e.seq, print: fingerprint(m), message: m });
    }
    return known;
  };
  /** What the caller's messages are matched against: the recorded messages, a reply run as one where the face says so. */
  const units = (face: Face): Known[] => {
    const list = recorded();
    if (!face.mergeReplies) return list;
    for (; mergedUpTo < list.length; mergedUpTo++) {
      const k = list[mergedUpTo]!;
      const last = merged[merged.length - 1];
      if (k.message.role === 'assistant' && last?.run) {
        const run: Extract<ConversationMessage, { role: 'assistant' }> = { role: 'assistant', blocks: [...last.run.blocks, ...k.message.blocks] };
        merged[merged.length - 1] = { seq: k.seq, print: fingerprint(run), message: run, run };
      } else merged.push({ ...k, run: k.message.role === 'assistant' ? k.message : undefined });
    }
    return merged;
  };
  const printOf = (m: ConversationMessage): string => {
    let print = prints.get(m);
    if (print === undefined) {
      print = fingerprint(m);
      prints.set(m, print);
    }
    return print;
  };

  const ensureTurn = () => {
    if (session.openTurn === null) w.startTurn();
  };
  /**
   * Closes the open step unless its calls still wait for results, after the pressure check of
   * its facts (`engine.afterStep`: prune, compact, a background summary started or committed).
   */
  const endStep = async (signal: AbortSignal | undefined) => {
    if (!session.openStep || session.surface.pendingCalls().length > 0) return;
    // Before the first request header nothing is routed: the pressure check has no window to
    // judge by, and the request's own check (step 4) prices the whole history once. A first call
    // bringing 5,000 messages skips 2,500 passes that could decide nothing.
    if (session.latestHeader) await engine.afterStep(signal ? { signal } : {});
    w.endStep();
  };
  const abandonStep = (reason: 'error' | 'aborted' = 'error') => {
    if (session.surface.pendingCalls().length > 0) return;
    if (session.openStep) w.endStep(reason);
    turnFailed = session.openTurn !== null;
  };
  /** Abandons, whatever the session says: a failed store refuses the step's end too, and the error being thrown says why. */
  const abandonQuietly = (reason?: 'error' | 'aborted') => {
    try {
      abandonStep(reason);
    } catch {
      // see above
    }
  };

  // ── Plan: every check before the first append ──

  const requireWindow = (model: string, face: Face) => {
    if (options.requireCapacity === false) return;
    const missing = missingCapacity(provider, model, engine.config.models as Record<string, Partial<ModelInfo>>, face.entry);
    if (missing) throw missing;
  };

  const checkPairing = (fresh: readonly ConversationMessage[], face: Face) => {
    const problem = pairingProblem(
      session.surface.pendingCalls(),
      fresh.map((m) => ({ role: m.role, results: m.role === 'tool' ? [m.callId] : [], calls: callsOf(m).map((c) => c.id) })),
      toolNames,
    );
    if (!problem) return;
    switch (problem.kind) {
      case 'unexpected-result':
        throw new ConversationError(
          'unexpected-tool-result',
          `a tool result answers tool call "${problem.callId}", which is not waiting for a result (it was never made, or it has its result already); nothing was recorded or sent`,
          { toolCallIds: [problem.callId] },
        );
      case 'duplicate-call':
        throw new ConversationError(
          'duplicate-tool-call',
          `tool call id "${problem.callId}" is made twice in the conversation: every tool call needs its own id, or its result could answer either; nothing was recorded or sent`,
          { toolCallIds: [problem.callId] },
        );
      case 'missing-results': {
        const where = problem.before === undefined ? `at the end of the ${face.list}` : `before the next ${problem.before} message`;
        throw new ConversationError(
          'missing-tool-results',
          `${callsHave(problem.callIds)} no result ${where}: ${face.resultHint} (an error text for a call that was not run); nothing was recorded or sent`,
          { toolCallIds: problem.callIds },
        );
      }
    }
  };

  /**
   * One new message as it will be appended, checked by the session's rules for an event on its
   * own. A new call's arguments must be JSON: a reply cut mid-call is recorded as it came (and
   * repaired in every request), but it comes back from the caller matched, never as new.
   */
  const checkMessage = (m: ConversationMessage, index: number, face: Face) => {
    for (const c of callsOf(m)) {
      if (isJson(c.arguments)) continue;
      throw new ConversationError(
        'invalid-request',
        `${face.list} message ${index} (assistant): tool call "${c.id}" has arguments that are not JSON (${JSON.stringify(c.arguments.slice(0, 60))}): ` +
          'pass the calls as the model gave them; nothing was recorded or sent',
        { toolCallIds: [c.id] },
      );
    }
    const input = appendInputOf(m);
    const problem = session.checkEvent(input);
    if (problem) {
      throw new ConversationError(
        'invalid-request',
        `${face.list} message ${index} (${m.role}) cannot be recorded: ${problem.message} Nothing was recorded or sent`,
        { cause: problem },
      );
    }
  };

  const checkSystem = (system: string | undefined) => {
    if (system === undefined) return;
    const problem = session.checkEvent({ type: 'system/message', data: { text: system }, surfaceOp: 'append' });
    const late = session.surface.length > 0 && session.event(session.surface.seqAt(0)).type !== 'system/message';
    if (!problem && !late) return;
    throw new ConversationError(
      'invalid-request',
      problem
        ? `the system prompt cannot be recorded: ${problem.message} Nothing was recorded or sent`
        : 'a system prompt came after the conversation began without one: the session keeps the system prompt as its first message, ' +
            'so give it from the first call on (or send the new instructions as a user message). Nothing was recorded or sent',
      problem ? { cause: problem } : undefined,
    );
  };

  const appendInputOf = (m: ConversationMessage): Parameters<Session['append']>[0] => {
    switch (m.role) {
      case 'user':
        return { type: 'user/message', data: { content: m.content }, surfaceOp: 'append' };
      case 'assistant':
        return { type: 'assistant/message', data: { content: m.blocks }, surfaceOp: 'append' };
      case 'tool': {
        const name = m.toolName ?? toolNames.get(m.callId);
        return {
          type: 'tool/result',
          data: {
            callId: m.callId,
            content: m.content,
            ...(name ? { toolName: name } : {}),
            ...(m.isError ? { isError: true } : {}),
            ...(m.providerOptions ? { providerOptions: m.providerOptions } : {}),
          },
          surfaceOp: 'append',
        };
      }
    }
  };

  // ── Commit ──

  const record = async (m: ConversationMessage, signal: AbortSignal | undefined): Promise<number> => {
    switch (m.role) {
      case 'user':
        await endStep(signal);
        if (session.openTurn !== null) w.endTurn(turnFailed ? 'error' : 'completed');
        turnFailed = false;
        w.startTurn();
        break;
      case 'assistant':
        ensureTurn();
        await endStep(signal);
        w.startStep();
        break;
      case 'tool':
        break;
    }
    const event = session.append(appendInputOf(m));
    if (m.role === 'assistant') for (const c of callsOf(m)) toolNames.set(c.id, c.name);
    return event.seq;
  };

  const appendReply = (reply: Reply): SessionEvent<'assistant/message'> => {
    const event = session.append({
      type: 'assistant/message',
      data: {
        content: reply.blocks,
        provider,
        ...(reply.model ? { model: reply.model } : {}),
        ...(reply.usage ? { usage: reply.usage } : {}),
        ...(reply.finishReason ? { finishReason: reply.finishReason } : {}),
      },
      surfaceOp: 'append',
    });
    for (const b of reply.blocks) if (b.type === 'tool-call') toolNames.set(b.id, b.name);
    return event;
  };

  /** Step 4: every request passes the pressure check just before it is sent; one that cannot fit is not sent (its step ends as `error`). */
  const check = async (signal: AbortSignal | undefined) => {
    try {
      await engine.beforeRequest(signal ? { signal } : {});
    } catch (err) {
      abandonQuietly();
      throw err;
    }
  };

  const surface = (): SurfaceEvent[] => {
    const out: SurfaceEvent[] = [];
    for (const seq of session.surface.seqs()) out.push(session.event(seq) as SurfaceEvent);
    return out;
  };

  return {
    session,
    engine,
    provider,
    async begin(call, signal) {
      const mine = ++generation;
      const face = call.face ?? options.face;
      // 1. Read: which of the caller's messages are new.
      const list = units(face);
      const kept: number[] = [];
      call.messages.forEach((m, i) => {
        if (!isEmptyReply(m)) kept.push(i);
      });
      const pause = slicer();
      const given: string[] = [];
      for (const i of kept) {
        given.push(printOf(call.messages[i]!));
        await pause();
      }
      const from = firstNewMessage(
        list.map((k) => k.print),
        given,
        { whole: face.whole === true },
      );
      const fresh = kept.slice(from).map((i) => call.messages[i]!);
      // 2. Plan: nothing is written unless all of it can be.
      checkPairing(fresh, face);
      for (const [k, m] of fresh.entries()) {
        checkMessage(m, kept[from + k]!, face);
        await pause();
      }
      checkSystem(call.system);
      requireWindow(call.model, face);
      const newest = [...fresh].reverse().find((m): m is Extract<ConversationMessage, { role: 'user' }> => m.role === 'user');
      const refused = engine.admits({
        provider,
        model: call.model,
        system: call.system,
        tools: call.tools,
        ...(call.maxTokens !== undefined ? { maxTokens: call.maxTokens } : {}),
        newest: newest?.content,
      });
      if (refused) throw refused;
      // 3. Commit.
      // The caller's message i is recorded event list[offset + i] (for i < from).
      const offset = list.length - from;
      const seqs: number[] = call.messages.map(() => -1);
      for (let k = 0; k < from; k++) seqs[kept[k]!] = list[offset + k]!.seq;
      if (call.system !== undefined) w.system(call.system);
      for (const [k, m] of fresh.entries()) {
        const seq = await record(m, signal);
        seqs[kept[from + k]!] = seq;
        known.push({ seq, print: given[from + k]!, message: m });
        scanned = session.length;
        await pause();
      }
      await endStep(signal);
      ensureTurn();
      w.startStep();
      const contextWindow = modelInfoFor(engine.config, provider, call.model)?.contextWindow;
      w.request({
        provider,
        model: call.model,
        tools: call.tools as object[],
        ...(call.maxTokens !== undefined ? { maxTokens: call.maxTokens } : {}),
        ...(contextWindow !== undefined ? { contextWindow } : {}),
      });
      // 4. Check.
      await check(signal);

      const step: Step = {
        seqs,
        get current() {
          return mine === generation;
        },
        surface,
        async send(attempt, view = (err) => err) {
          for (;;) {
            try {
              return await attempt();
            } catch (err) {
              // A request the face could not build from the surface is not the provider's error.
              if (err instanceof ConversationError) {
                abandonQuietly();
                throw err;
              }
              let action: Awaited<ReturnType<CompactionEngine['onRequestError']>>;
              try {
                action = await engine.onRequestError(view(err), signal ? { signal } : {});
              } catch (failure) {
                // Not the provider's error alone: the caller must see why no recovery ran (a stopped
                // engine, a store that failed), with the provider's error kept beside it.
                abandonQuietly();
                throw recoveryFailed(err, failure);
              }
              if (action.kind !== 'retry') {
                abandonQuietly();
                throw err;
              }
              await check(signal);
            }
          }
        },
        async finish(read) {
          if (!step.current) return;
          let reply: Reply;
          try {
            reply = read();
            appendReply(reply);
          } catch (err) {
            abandonQuietly();
            throw err instanceof SessionRuleError
              ? new ConversationError('invalid-request', `the reply cannot be recorded: ${err.message} The step was ended; the reply was not recorded`, {
                  cause: err,
                })
              : err;
          }
          if (!reply.blocks.some((b) => b.type === 'tool-call')) {
            // Between turns: the pressure check runs now (a background summary may start while the user types).
            await endStep(signal);
            if (session.openTurn !== null) w.endTurn('completed');
            turnFailed = false;
          }
          await session.flush();
        },
        abandon(reason) {
          if (step.current) abandonStep(reason);
        },
      };
      return step;
    },
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

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Lets the event loop turn after every `sliceMs` of work: a first call that brings thousands of
 * messages reads, checks and records them without keeping the process's timers and sockets
 * waiting (the other agents of a server, a stream being read).
 */
function slicer(sliceMs = 10): () => Promise<void> {
  let since = performance.now();
  return async () => {
    if (performance.now() - since < sliceMs) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    since = performance.now();
  };
}
