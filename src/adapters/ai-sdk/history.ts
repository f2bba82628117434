/**
 * What the app's prompt and the recorded session have in common: which of the app's messages a
 * stored session already holds, the reply the SDK echoes back, and the tools as the meter prices them.
 */
import type { LanguageModelV3CallOptions, LanguageModelV3Message } from '@ai-sdk/provider';
import { isCheckpoint } from '../../session/events';
import type { Session } from '../../session/session';
import { fingerprint } from './convert';

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
