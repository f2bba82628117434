/**
 * `client.responses.create` of a wrapped openai client, for stateless use: the caller sends its
 * whole conversation as `input` items each time (or only what is new), as with
 * `chat.completions.create`; xcompact records it in the same conversation, sends the compacted
 * conversation as input items (reasoning items whole, with the reply they belong to) and
 * recovers an overflow inside the call. Streamed (`stream: true`: the SDK's own `Stream` of
 * events; the reply is recorded from `response.completed`) and not. The steps of a call are the
 * conversation's (conversation/conversation.ts); this face maps items (map.ts).
 *
 * A request that relies on state the provider holds (`previous_response_id`, `conversation`,
 * an `item_reference` item) is refused with `ConversationError('server-state')`: xcompact cannot
 * compact what it cannot see.
 */
import { currentSystemPrompt, recordedMessages } from '../../session/recorded';
import type { Session } from '../../session/session';
import { ConversationError, forward, recordStream, serverState, type Conversation, type Face } from '../conversation';
import { chatToolsOfResponses, messagesOfResponsesItems, replyOfResponse, responsesInputOf, splitResponsesSystem, type ResponsesItem } from './map';

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

/** How Responses callers are told what to fix. */
export const RESPONSES_FACE: Face = {
  entry: 'withCompaction',
  list: 'input',
  resultHint: 'append a { type: "function_call_output", call_id, output } item for every function_call',
  // Output items carry no mark of the response they came in.
  mergeReplies: true,
};

/** The client's `responses` with `create` recorded and compacted; undefined when the SDK has no Responses API. */
export function wrapResponses(client: object, conversation: Conversation): object | undefined {
  const responses = (client as { responses?: { create?: unknown } }).responses;
  if (!responses || typeof responses.create !== 'function') return undefined;
  const rawCreate = (responses.create as RawCreate).bind(responses);

  const create = async (params: ResponsesParams, requestOptions?: CreateOptions): Promise<unknown> => {
    if (typeof params !== 'object' || params === null) throw invalid('responses.create needs { model, input }');
    const held = (['previous_response_id', 'conversation'] as const).filter((k) => params[k] !== undefined && params[k] !== null);
    if (held.length > 0) throw serverState(held);
    const signal = requestOptions?.signal;
    if (params.input !== undefined && typeof params.input !== 'string' && !Array.isArray(params.input))
      throw invalid(`input is ${params.input === null ? 'null' : typeof params.input}: give a string or an array of input items`);
    const items: ResponsesItem[] =
      typeof params.input === 'string' ? [{ role: 'user', content: params.input }] : ((params.input as ResponsesItem[] | undefined) ?? []);
    const { system, rest } = splitResponsesSystem(params.instructions, items);
    const step = await conversation.begin(
      {
        system,
        messages: messagesOfResponsesItems(rest, items.length - rest.length),
        model: String(params.model),
        tools: chatToolsOfResponses(params.tools),
        ...(typeof params.max_output_tokens === 'number' ? { maxTokens: params.max_output_tokens } : {}),
        face: RESPONSES_FACE,
      },
      signal,
    );
    const result = await step.send(() => {
      const { instructions, input } = responsesInputOf(step.surface());
      const body: ResponsesParams = { ...params, input };
      if (instructions !== undefined) body.instructions = instructions;
      else delete body.instructions;
      return rawCreate(body, requestOptions);
    });
    if (params.stream === true) {
      type Event = { type?: string; response?: ResponseLike };
      const source = result as AsyncIterable<Event> & { controller: AbortController };
      let final: ResponseLike | undefined;
      let failed = false;
      return recordStream<Event, typeof source>(
        step,
        source,
        {
          see: (event) => {
            if (event.type === 'response.completed' || event.type === 'response.incomplete') final = event.response;
            if (event.type === 'response.failed' || event.type === 'error') failed = true;
            return event;
          },
          outcome: () => (failed ? 'error' : final ? 'complete' : 'aborted'),
          reply: () => replyOfResponse(final!),
        },
        client,
        signal,
      );
    }
    await step.finish(() => replyOfResponse(result as ResponseLike));
    return result;
  };

  return forward(responses, { create });
}

const invalid = (what: string): ConversationError => new ConversationError('invalid-request', `${what}; nothing was recorded or sent`);

/**
 * The conversation to continue with as Responses input (e.g. after a restart): `instructions`
 * (the current system prompt) and every message as it was recorded, as input items. Push what
 * is new and pass `{ instructions, input }` to the wrapped client's `responses.create`.
 */
export function sessionInput(session: Session): { instructions: string | undefined; input: ResponsesItem[] } {
  const { input } = responsesInputOf(recordedMessages(session));
  return { instructions: currentSystemPrompt(session), input };
}
