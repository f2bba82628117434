/**
 * How the adapter reads the app's prompt against the recording: which recorded messages a
 * stored session holds, whether a message is the reply the adapter just recorded, and the
 * tool definitions in the chat-completions shape the meter prices.
 */
import type { LanguageModelV3CallOptions, LanguageModelV3Message } from '@ai-sdk/provider';
import { isCheckpoint } from '../../session/events';
import type { Session } from '../../session/session';
import { AiSdkAdapterError, fingerprint, type toolResults, type userBlocks, type AssistantFacts } from './convert';
import { callsHave, pairingProblem } from '../shapes/pairing';

export const sameMessage = (message: LanguageModelV3Message, recorded: string): boolean =>
  recorded.startsWith('~') ? message.role === recorded.slice(1) : fingerprint(message) === recorded;

/**
 * The roles of the app's messages a stored session already holds: every original append (not a
 * prune or checkpoint replacing one) of a user or assistant message, and each run of tool
 * results (the SDK puts one step's results in one tool message).
 */
export function appMessagesIn(session: Session): Array<'user' | 'assistant' | 'tool'> {
  const roles: Array<'user' | 'assistant' | 'tool'> = [];
  for (const e of session.events()) {
    if (e.surfaceOp !== 'append' || e.type === 'system/message') continue;
    if (e.type === 'tool/result') {
      if (roles[roles.length - 1] !== 'tool') roles.push('tool');
    } else if (e.type === 'assistant/message') roles.push('assistant');
    else if (e.type === 'user/message' && !isCheckpoint(e)) roles.push('user');
  }
  return roles;
}

/**
 * The assistant message the SDK appends after a reply is that reply: matched by its tool-call
 * ids, not its text (providers differ in the empty text and reasoning parts they keep).
 */
export function isEcho(message: LanguageModelV3Message, callIds: readonly string[]): boolean {
  if (message.role !== 'assistant') return false;
  const ids = message.content.filter((p) => p.type === 'tool-call').map((p) => (p as { toolCallId: string }).toolCallId);
  return ids.length === callIds.length && ids.every((id, k) => id === callIds[k]);
}

/** AI SDK function tools → the chat-completions shape the meter prices (and the summarizer replays). */
export function toolDefinition(tool: NonNullable<LanguageModelV3CallOptions['tools']>[number]): Record<string, unknown> {
  if (tool.type !== 'function') return { ...tool };
  return {
    type: 'function',
    function: { name: tool.name, ...(tool.description ? { description: tool.description } : {}), parameters: tool.inputSchema },
  };
}

/** A prompt message as the session will record it (mapped before anything is written). */
export type Mapped =
  | { role: 'user'; blocks: ReturnType<typeof userBlocks> }
  | { role: 'assistant'; facts: AssistantFacts }
  | { role: 'tool'; results: ReturnType<typeof toolResults> };

/**
 * Every tool call answered, and every result answering a waiting call, checked before anything is written: a message arriving while
 * calls wait, or a prompt ending with calls unanswered, would otherwise be sent to the
 * provider as a call without its result (a request providers reject, or answer blind). The
 * AI SDK refuses the same prompts itself (`MissingToolResultsError`); this catches the ones
 * that reach the model another way (a middleware before this one, a direct `doGenerate`).
 */
export function checkAnswered(pending: readonly string[], mapped: readonly Mapped[]): void {
  const problem = pairingProblem(
    pending,
    mapped.map((m) => ({
      role: m.role,
      results: m.role === 'tool' ? m.results.map((r) => r.callId) : [],
      calls: m.role === 'assistant' ? m.facts.toolCalls.map((c) => c.id) : [],
    })),
  );
  if (problem?.kind === 'unexpected-result') {
    // The session refuses it too, but only at its own append: after the results before it were written.
    const toolName = mapped.flatMap((m) => (m.role === 'tool' ? m.results : [])).find((r) => r.callId === problem.callId)?.toolName;
    throw new AiSdkAdapterError(
      'unexpected-tool-result',
      `xcompact/ai-sdk cannot record a result for tool call "${problem.callId}" (${toolName}): no call with that id is waiting for one ` +
        '(it was never made, or it has its result already); nothing was recorded or sent',
      { toolCallIds: [problem.callId] },
    );
  }
  if (problem) {
    // At the end: the next request is built from the surface, so a call still waiting would go out without its result.
    const where = problem.before === undefined ? 'at the end of the prompt' : `before the next ${problem.before} message`;
    throw new AiSdkAdapterError(
      'missing-tool-results',
      `xcompact/ai-sdk cannot send a prompt in which ${callsHave(problem.callIds)} no result ${where}: ` +
        'give every tool call its tool-result part (an error result for a call that was not run), as the AI SDK requires; nothing was recorded or sent',
      { toolCallIds: problem.callIds },
    );
  }
}
