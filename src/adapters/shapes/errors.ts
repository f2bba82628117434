/**
 * Errors of the Responses and Anthropic Messages wrappers that the Chat Completions drop-in has
 * no counterpart for. Their other faults (a part the session cannot hold, a tool call without
 * its result, a diverged history) are `DropInError`s with the drop-in's codes, so one `switch`
 * over `XcompactErrorCode` covers every shape.
 */
import { XcompactError } from '../../errors';

export type ShapeErrorCode = 'server-state';

export class ShapeError extends XcompactError {
  declare readonly code: ShapeErrorCode;
  /** For `server-state`: the request parameters that refer to state the provider holds. */
  readonly parameters: readonly string[];
  constructor(code: ShapeErrorCode, message: string, parameters: readonly string[]) {
    super(code, message);
    this.parameters = parameters;
  }
}

/**
 * A Responses request that leans on conversation state the provider keeps (`previous_response_id`,
 * `conversation`, an `item_reference`): xcompact cannot compact what it cannot see.
 */
export function serverState(parameters: readonly string[]): ShapeError {
  return new ShapeError(
    'server-state',
    `xcompact cannot compact a conversation the provider holds (${parameters.join(', ')}): send the whole conversation as \`input\` items each time ` +
      "(push each response's `output` items and your function_call_output items onto one array, or start from client.compaction.input()), " +
      'with `store: false` and, for reasoning models, `include: ["reasoning.encrypted_content"]`. Nothing was recorded or sent',
    parameters,
  );
}
