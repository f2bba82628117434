/**
 * `client.responses.create` of a wrapped openai client, for stateless use: the caller sends its
 * whole conversation as `input` items each time (or only what is new), as with
 * `chat.completions.create`; xcompact records it in the same session, sends the compacted
 * conversation as input items (reasoning items whole, with the reply they belong to) and
 * recovers an overflow inside the call. Streamed (`stream: true`: the SDK's own `Stream` of
 * events; the reply is recorded from `response.completed`) and not.
 *
 * A request that relies on state the provider holds (`previous_response_id`, `conversation`,
 * an `item_reference` item) is refused with `ShapeError('server-state')`: xcompact cannot
 * compact what it cannot see.
 */
import type { CompactionEngine } from '../../engine/facade';
import { currentSystemPrompt, recordedMessages } from '../../session/recorded';
import type { Session } from '../../session/session';
import { createConversation } from '../shapes/conversation';
import { serverState } from '../shapes/errors';
import {
  chatToolsOfResponses,
  messagesOfResponsesItems,
  replyOfResponse,
  responsesInputOf,
  splitResponsesSystem,
  type ResponsesItem,
} from '../shapes/responses-map';
import { forward, recordingStream } from '../shapes/stream';

type CreateOptions = { signal?: AbortSignal } & Record<string, unknown>;
type ResponsesParams = Record<string, unknown> & {
  model?: unknown;
  input?: unknown;
  instructions?: unknown;
  stream?: unknown;
  tools?: unknown;
  max_output_tokens?: unknown;
};
type RawCreate = (body: ResponsesParams, options?: CreateOptions) => Promise<unknown>;
type ResponseLike = Parameters<typeof replyOfResponse>[0];

export interface ResponsesContext {
  session: Session;
  engine: CompactionEngine;
  provider: string;
  requireCapacity?: boolean;
}

/** The client's `responses` with `create` recorded and compacted; undefined when the SDK has no Responses API. */
export function wrapResponses(client: object, ctx: ResponsesContext): object | undefined {
  const responses = (client as { responses?: { create?: unknown } }).responses;
  if (!responses || typeof responses.create !== 'function') return undefined;
  const rawCreate = (responses.create as RawCreate).bind(responses);
  const conv = createConversation({ ...ctx, what: 'withCompaction' });

  const create = async (params: ResponsesParams, requestOptions?: CreateOptions): Promise<unknown> => {
    const held = (['previous_response_id', 'conversation'] as const).filter((k) => params[k] !== undefined && params[k] !== null);
    if (held.length > 0) throw serverState(held);
    const mine = conv.nextGeneration();
    const signal = requestOptions?.signal;
    const items: ResponsesItem[] =
      typeof params.input === 'string' ? [{ role: 'user', content: params.input }] : Array.isArray(params.input) ? (params.input as ResponsesItem[]) : [];
    const { system, rest } = splitResponsesSystem(params.instructions, items);
    const messages = messagesOfResponsesItems(rest);
    await conv.prepare(
      {
        system,
        messages,
        model: String(params.model),
        tools: chatToolsOfResponses(params.tools),
        ...(typeof params.max_output_tokens === 'number' ? { maxTokens: params.max_output_tokens } : {}),
      },
      signal,
    );
    const result = await conv.send(() => {
      const { instructions, input } = responsesInputOf(conv.surface());
      const body: ResponsesParams = { ...params, input };
      if (instructions !== undefined) body.instructions = instructions;
      else delete body.instructions;
      return rawCreate(body, requestOptions);
    }, signal);
    if (params.stream === true) {
      type Event = { type?: string; response?: ResponseLike };
      const source = result as AsyncIterable<Event> & { controller: AbortController };
      let final: ResponseLike | undefined;
      let failed = false;
      return recordingStream<Event, typeof source>(
        source,
        {
          see: (event) => {
            if (event.type === 'response.completed' || event.type === 'response.incomplete') final = event.response;
            if (event.type === 'response.failed' || event.type === 'error') failed = true;
            return event;
          },
          done: async (aborted) => {
            if (mine !== conv.generation) return;
            if (aborted || signal?.aborted || failed || !final) return conv.abandon(failed ? 'error' : 'aborted');
            await finish(final, signal);
          },
          failed: async () => {
            if (mine === conv.generation) conv.abandon('aborted');
          },
        },
        client,
      );
    }
    await finish(result as ResponseLike, signal);
    return result;
  };

  /** A reply the session cannot hold (an item of another tool type) ends its step; the caller gets the error. */
  const finish = async (response: ResponseLike, signal: AbortSignal | undefined) => {
    let reply: ReturnType<typeof replyOfResponse>;
    try {
      reply = replyOfResponse(response);
    } catch (err) {
      conv.abandon();
      throw err;
    }
    await conv.finish(reply, signal);
  };

  return forward(responses, { create });
}

/**
 * The conversation to continue with as Responses input (e.g. after a restart): `instructions`
 * (the current system prompt) and every message as it was recorded, as input items. Push what
 * is new and pass `{ instructions, input }` to the wrapped client's `responses.create`.
 */
export function sessionInput(session: Session): { instructions: string | undefined; input: ResponsesItem[] } {
  const { input } = responsesInputOf(recordedMessages(session));
  return { instructions: currentSystemPrompt(session), input };
}
