/**
 * Resuming an AI SDK conversation from the session alone: the recorded messages as the AI SDK's
 * `ModelMessage[]`, to pass (with what is new) as `messages` to generateText / streamText in a
 * process that kept nothing itself. The adapter accepts a prompt that continues them.
 */
import type { ModelMessage } from 'ai';
import { recordedMessages } from '../../session/recorded';
import type { Session } from '../../session/session';
import { promptOf } from './convert';

/**
 * The conversation as recorded (user, assistant and tool messages; the system prompt is the
 * app's `system` option), uncompacted: a checkpoint only shadows what it replaced.
 */
export function sessionModelMessages(session: Session): ModelMessage[] {
  // The provider prompt and the app's messages share these shapes (text, file, tool-call with a
  // parsed input, tool-result with a typed output): the prompt of the recorded messages is them.
  return promptOf(recordedMessages(session), 'v3');
}
