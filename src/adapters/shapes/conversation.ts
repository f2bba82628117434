/**
 * One conversation recorded in a session and sent compacted, for any request shape: what the
 * Responses and Anthropic Messages wrappers share (the Chat Completions wrapper,
 * drop-in/client.ts, does the same for its own messages).
 *
 * Per call (one step of the caller's loop):
 * 1. `prepare`: the caller's messages (already mapped by its shape, so a message the session
 *    cannot hold was refused before anything is written) are read against the recording; the
 *    new ones are checked (every tool call answered, every result answering a waiting call, a
 *    known window) and recorded: a user message opens a turn, tool results close the step
 *    that made the calls after `engine.afterStep()`; a step opens with its request header;
 * 2. `send`: the shape builds its request from the surface and sends it; on an error the
 *    engine decides (`engine.onRequestError`): `retry` → built again from the shrunken surface;
 *    otherwise the provider's own error is thrown;
 * 3. `finish`: the reply is recorded with its usage; a reply without tool calls runs the
 *    pressure check and ends the turn.
 */
import type { CompactionEngine } from '../../engine/facade';
import { missingCapacity, type ModelInfo } from '../../services/config';
import {
  COMPACTION_CHECKPOINT_SOURCE,
  type ImageBlock,
  type ReasoningBlock,
  type SessionEvent,
  type SurfaceEvent,
  type TextBlock,
  type ToolCallBlock,
  type Usage,
} from '../../session/events';
import { recordedMessages } from '../../session/recorded';
import type { Session } from '../../session/session';
import { SessionWriter } from '../../session/writer';
import { firstNewMessage } from '../drop-in/reconcile';
import { DropInError, recoveryFailed } from '../drop-in/errors';
import { callsOf, isEmptyReply, shapeFingerprint, shapeMessageOf, type ShapeMessage } from './items';
import { callsHave, pairingProblem } from './pairing';

/** What a shape's call says about the conversation, mapped. */
export interface ShapeCall {
  /** The system prompt the caller gave (joined text), if any. */
  system: string | undefined;
  /** The caller's conversation messages (whole, or only the new ones), mapped. */
  messages: readonly ShapeMessage[];
  model: string;
  /** Tool definitions in the Chat Completions shape (what the request header keeps). */
  tools: ReadonlyArray<Record<string, unknown>>;
  maxTokens?: number;
}

/** A reply, as its shape read it. */
export interface ShapeReply {
  blocks: Array<TextBlock | ReasoningBlock | ToolCallBlock>;
  usage?: Usage;
  model?: string;
  finishReason?: string;
}

export interface Conversation {
  readonly session: Session;
  readonly engine: CompactionEngine;
  readonly provider: string;
  /** Step 1: checks and records; returns, per caller message, the seq of its recorded event (-1 for an empty reply, not recorded). */
  prepare(call: ShapeCall, signal: AbortSignal | undefined): Promise<number[]>;
  /**
   * Step 2: `attempt` builds its request from `surface()` each time it is called. `view`: the
   * error as the classifier should read it (an SDK that keeps its error body elsewhere); the
   * caller always gets the SDK's own error.
   */
  send<T>(attempt: () => Promise<T>, signal: AbortSignal | undefined, view?: (err: unknown) => unknown): Promise<T>;
  /** Step 3. */
  finish(reply: ShapeReply, signal: AbortSignal | undefined): Promise<void>;
  /** A request that failed for good, or a reply that cannot be recorded: its step ends. */
  abandon(reason?: 'error' | 'aborted'): void;
  /** The events on the surface, in order: what the shape builds its request from. */
  surface(): SurfaceEvent[];
  /** Bumped per call: a stream left unread when the next call starts records nothing. */
  readonly generation: number;
  nextGeneration(): number;
  close(options?: { session?: boolean }): Promise<void>;
}

export interface ConversationOptions {
  session: Session;
  engine: CompactionEngine;
  provider: string;
  requireCapacity?: boolean;
  /** The wrapper's name, in a missing-window error. */
  what: string;
}

export function createConversation(options: ConversationOptions): Conversation {
  const { session, engine, provider } = options;
  if (session.needsRecovery) session.recover();
  const w = new SessionWriter(session);
  /** Fingerprints of recorded events by seq (events never change). */
  const prints = new Map<number, string>();
  const toolNames = new Map<string, string>();
  let turnFailed = false;
  let generation = 0;

  // Empty replies are matched on neither side: a caller may not pass one back.
  const recorded = (): Array<{ seq: number; print: string }> =>
    recordedMessages(session).flatMap((e) => {
      const m = shapeMessageOf(e);
      if (isEmptyReply(m)) return [];
      let print = prints.get(e.seq);
      if (print === undefined) {
        print = shapeFingerprint(m);
        prints.set(e.seq, print);
        if (e.type === 'assistant/message') for (const b of e.data.content) if (b.type === 'tool-call') toolNames.set(b.id, b.name);
      }
      return [{ seq: e.seq, print }];
    });

  const closeStep = async (signal: AbortSignal | undefined): Promise<void> => {
    if (!session.openStep) return;
    if (session.surface.pendingCalls().length === 0) await engine.afterStep(signal ? { signal } : {});
    w.endStep();
  };
  const ensureTurn = () => {
    if (session.openTurn === null) w.startTurn();
  };

  const appendAssistant = (blocks: ShapeReply['blocks'], meta: Omit<ShapeReply, 'blocks'> & { provider?: string }): SessionEvent<'assistant/message'> => {
    for (const c of blocks) if (c.type === 'tool-call') toolNames.set(c.id, c.name);
    return session.append({
      type: 'assistant/message',
      data: {
        content: blocks,
        ...(meta.provider ? { provider: meta.provider } : {}),
        ...(meta.model ? { model: meta.model } : {}),
        ...(meta.usage ? { usage: meta.usage } : {}),
        ...(meta.finishReason ? { finishReason: meta.finishReason } : {}),
      },
      surfaceOp: 'append',
    });
  };

  const record = async (m: ShapeMessage, signal: AbortSignal | undefined): Promise<number> => {
    switch (m.role) {
      case 'user':
        await closeStep(signal);
        if (session.openTurn !== null) w.endTurn(turnFailed ? 'error' : 'completed');
        turnFailed = false;
        w.startTurn();
        return w.user(m.content).seq;
      case 'assistant':
        ensureTurn();
        await closeStep(signal);
        w.startStep();
        return appendAssistant(m.blocks, {}).seq;
      case 'tool': {
        const name = m.toolName ?? toolNames.get(m.callId);
        return w.toolResult(m.callId, m.content, { ...(name ? { toolName: name } : {}), ...(m.isError ? { isError: true } : {}) }).seq;
      }
    }
  };

  const requireWindow = (model: string) => {
    const missing =
      options.requireCapacity === false
        ? undefined
        : missingCapacity(provider, model, engine.config.models as Record<string, Partial<ModelInfo>>, options.what);
    if (missing) throw missing;
  };

  const abandon = (reason: 'error' | 'aborted' = 'error') => {
    if (session.surface.pendingCalls().length > 0) return;
    if (session.openStep) w.endStep(reason);
    turnFailed = session.openTurn !== null;
  };

  return {
    session,
    engine,
    provider,
    get generation() {
      return generation;
    },
    nextGeneration: () => ++generation,
    surface: () => {
      const out: SurfaceEvent[] = [];
      for (const seq of session.surface.seqs()) out.push(session.event(seq) as SurfaceEvent);
      return out;
    },
    async prepare(call, signal) {
      const known = recorded();
      // The caller's empty replies are neither matched nor recorded (-1: no event).
      const kept: number[] = [];
      call.messages.forEach((m, i) => {
        if (!isEmptyReply(m)) kept.push(i);
      });
      const messages = kept.map((i) => call.messages[i]!);
      const given = messages.map(shapeFingerprint);
      const from = firstNewMessage(
        known.map((k) => k.print),
        given,
      );
      // The caller's message i is recorded event known[offset + i] (for i < from).
      const offset = known.length - from;
      const fresh = messages.slice(from);
      checkAnswered(session.surface.pendingCalls(), fresh);
      requireWindow(call.model);
      if (call.system !== undefined) w.system(call.system);
      const seqs: number[] = [];
      for (let i = 0; i < from; i++) seqs.push(known[offset + i]!.seq);
      for (const [k, m] of fresh.entries()) {
        const seq = await record(m, signal);
        prints.set(seq, given[from + k]!);
        seqs.push(seq);
      }
      await closeStep(signal);
      ensureTurn();
      w.startStep();
      w.request({ provider, model: call.model, tools: call.tools as object[], ...(call.maxTokens !== undefined ? { maxTokens: call.maxTokens } : {}) });
      const byCaller: number[] = call.messages.map(() => -1);
      kept.forEach((i, k) => (byCaller[i] = seqs[k]!));
      return byCaller;
    },
    async send(attempt, signal, view = (err) => err) {
      for (;;) {
        try {
          return await attempt();
        } catch (err) {
          let action: Awaited<ReturnType<CompactionEngine['onRequestError']>>;
          try {
            action = await engine.onRequestError(view(err), signal ? { signal } : {});
          } catch (failure) {
            try {
              abandon();
            } catch {
              // The session refuses the step's end too (a failed store): the error below says why.
            }
            throw recoveryFailed(err, failure);
          }
          if (action.kind === 'retry') continue;
          abandon();
          throw err;
        }
      }
    },
    async finish(reply, signal) {
      appendAssistant(reply.blocks, { ...reply, provider });
      if (!reply.blocks.some((b) => b.type === 'tool-call')) {
        await closeStep(signal);
        w.endTurn('completed');
        turnFailed = false;
      }
      await session.flush();
    },
    abandon,
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

/** A checkpoint is a user message the compaction wrote. */
export const isCheckpointEvent = (e: SurfaceEvent): boolean => e.type === 'user/message' && e.data.source === COMPACTION_CHECKPOINT_SOURCE;

/** What the caller appends for a call left without its result. */
const RESULT_HINT = 'send a result for every tool call (a function_call_output item, a tool_result block)';

/** Every tool call answered, and every result answering a waiting call, before anything is written (shapes/pairing.ts). */
export function checkAnswered(pending: readonly string[], fresh: readonly ShapeMessage[], hint = RESULT_HINT): void {
  const problem = pairingProblem(
    pending,
    fresh.map((m) => ({ role: m.role, results: m.role === 'tool' ? [m.callId] : [], calls: callsOf(m).map((c) => c.id) })),
  );
  if (problem?.kind === 'unexpected-result') {
    throw new DropInError(
      'unexpected-tool-result',
      `a tool result answers tool call "${problem.callId}", which is not waiting for a result (it was never made, or it has its result already); nothing was recorded or sent`,
      { toolCallIds: [problem.callId] },
    );
  }
  if (problem) {
    const where = problem.before === undefined ? 'at the end of the input' : `before the next ${problem.before} message`;
    throw new DropInError(
      'missing-tool-results',
      `${callsHave(problem.callIds)} no result ${where}: ${hint} (an error text for a call that was not run); nothing was recorded or sent`,
      { toolCallIds: problem.callIds },
    );
  }
}
