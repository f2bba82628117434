/**
 * The one error of a recorded conversation, whatever face the caller came through (Chat
 * Completions, Responses, Anthropic Messages, the AI SDK): one class, one list of codes, so
 * one `switch` over `XcompactErrorCode` covers every face. A face words the fix in its own
 * terms (a `tool` message, a `function_call_output` item, a `tool-result` part) through the
 * conversation's `Face` (conversation.ts); the code and the fields are the same.
 *
 * `DropInError`, `ShapeError` and `AiSdkAdapterError`, the names of the three copies this
 * replaced, stay exported as this class, so `err instanceof DropInError` still holds.
 */
import { XcompactError } from '../../errors';

export type ConversationErrorCode =
  | 'history-diverged' // the caller's messages do not continue the recorded conversation
  | 'unmappable-part' // a message part the session cannot hold (named in the message)
  | 'missing-tool-results' // a tool call left without its result (`toolCallIds`)
  | 'unexpected-tool-result' // a result for a call that is not waiting for one (`toolCallIds`)
  | 'duplicate-tool-call' // a tool call id made twice (`toolCallIds`)
  | 'invalid-request' // a request the session cannot record as it is (a bad field, text it cannot store)
  | 'server-state' // a request relying on state the provider holds (`previous_response_id`, `conversation`, `item_reference`)
  | 'recovery-failed'; // the provider rejected the request and the engine failed handling it (`cause`, `requestError`)

export class ConversationError extends XcompactError {
  declare readonly code: ConversationErrorCode;
  /** `missing-tool-results`: the calls without a result; `unexpected-tool-result`, `duplicate-tool-call`: the call named. */
  readonly toolCallIds: readonly string[] | undefined;
  /** `recovery-failed`: the provider's error the engine was handling. */
  readonly requestError: unknown;
  /** `server-state`: the request parameters that refer to state the provider holds. */
  readonly parameters: readonly string[] | undefined;
  constructor(
    code: ConversationErrorCode,
    message: string,
    options?: { cause?: unknown; toolCallIds?: readonly string[]; requestError?: unknown; parameters?: readonly string[] },
  ) {
    super(code, message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.toolCallIds = options?.toolCallIds;
    this.requestError = options?.requestError;
    this.parameters = options?.parameters;
  }
}

const describe = (e: unknown): string => (e instanceof XcompactError ? `${e.message} [${e.code}]` : e instanceof Error ? e.message : String(e));

/** The engine failed while handling a provider's error: both kept, xcompact's as the cause. */
export function recoveryFailed(requestError: unknown, failure: unknown): ConversationError {
  return new ConversationError(
    'recovery-failed',
    `the provider rejected the request (${describe(requestError)}) and xcompact could not handle that error: ${describe(failure)}. The provider's error is in requestError, xcompact's in cause`,
    { cause: failure, requestError },
  );
}

/**
 * A request that leans on conversation state the provider keeps (`previous_response_id`,
 * `conversation`, an `item_reference`): xcompact cannot compact what it cannot see.
 */
export function serverState(parameters: readonly string[]): ConversationError {
  return new ConversationError(
    'server-state',
    `xcompact cannot compact a conversation the provider holds (${parameters.join(', ')}): send the whole conversation as \`input\` items each time ` +
      "(push each response's `output` items and your function_call_output items onto one array, or start from sessionInput(session).input), " +
      'with `store: false` and, for reasoning models, `include: ["reasoning.encrypted_content"]`. Nothing was recorded or sent',
    { parameters },
  );
}

/** The names of the copies this class replaced (the Chat Completions drop-in's, the Responses and Anthropic wrappers'): the same class. */
export const DropInError = ConversationError;
export type DropInError = ConversationError;
export type DropInErrorCode = ConversationErrorCode;
export const ShapeError = ConversationError;
export type ShapeError = ConversationError;
export type ShapeErrorCode = ConversationErrorCode;
