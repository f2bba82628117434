/**
 * Resuming an AI SDK conversation from the session alone: the recorded messages as the AI SDK's
 * `ModelMessage[]`, to pass (with what is new) as `messages` to generateText / streamText in a
 * process that kept nothing itself. The adapter accepts a prompt that continues them.
 */
import type { ModelMessage } from 'ai';
import { toolCallsOf } from '../../session/events';
import { recordedMessages } from '../../session/recorded';
import type { Session } from '../../session/session';
import { promptOf } from './convert';

/** What a call still waiting for its result is answered with, when the caller has none to give. */
export const NO_RESULT_RECORDED =
  'No result was recorded for this call: the turn ended before its result was sent to the model (stopWhen stopped on this tool step). Run it again if it is still needed.';

/**
 * The conversation as recorded (user, assistant and tool messages; the system prompt is the
 * app's `system` option), uncompacted: a checkpoint only shadows what it replaced.
 *
 * A turn that `stopWhen` ended on a tool step left its calls without recorded results (the SDK
 * ran the tools, but no model call carried the results to the adapter). Those calls are answered
 * here, so the messages are a prompt the SDK accepts: with the tool results in `results` (the
 * ended turn's `response.messages`), else with an error result saying none was recorded.
 */
export function sessionModelMessages(session: Session, results: readonly ModelMessage[] = []): ModelMessage[] {
  // The provider prompt and the app's messages share these shapes (text, file, tool-call with a
  // parsed input, tool-result with a typed output): the prompt of the recorded messages is them.
  const messages = promptOf(recordedMessages(session), 'v3') as ModelMessage[];
  const waiting = session.surface.pendingCalls();
  if (waiting.length === 0) return messages;
  const given = new Map<string, Extract<ModelMessage, { role: 'tool' }>['content'][number]>();
  for (const m of results) if (m.role === 'tool') for (const part of m.content) if (part.type === 'tool-result') given.set(part.toolCallId, part);
  const names = new Map<string, string>();
  for (const e of session.events()) if (e.type === 'assistant/message') for (const c of toolCallsOf(e)) names.set(c.id, c.name);
  messages.push({
    role: 'tool',
    content: waiting.map(
      (id) =>
        given.get(id) ?? {
          type: 'tool-result' as const,
          toolCallId: id,
          toolName: names.get(id) ?? 'unknown',
          output: { type: 'error-text' as const, value: NO_RESULT_RECORDED },
        },
    ),
  });
  return messages;
}
