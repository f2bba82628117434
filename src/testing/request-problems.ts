/**
 * Checks an OpenAI chat-completions `messages` array the way a provider does before it runs
 * a request, written independently of src/session so it can catch the projection lying:
 *
 * - every assistant `tool_calls` id is answered by a `tool` message that follows it, before
 *   the next non-tool message;
 * - every `tool` message answers a call of the assistant message just before its run of
 *   tool messages, and answers it once;
 * - tool call ids are unique in the conversation;
 * - each message has the fields its role needs (strings where the API wants strings).
 *
 * Returns the problems found (empty = a provider would accept the pairing).
 */
export function openAIMessageProblems(messages: readonly unknown[]): string[] {
  const problems: string[] = [];
  const seenCallIds = new Set<string>();
  /** Calls of the last assistant message still waiting for a tool message. */
  let open = new Set<string>();
  /** Calls of the last assistant message (answered or not), for a tool message to name. */
  let callsOfLastAssistant = new Set<string>();
  let openSince = -1;

  const closeRun = (i: number, role: string) => {
    if (open.size > 0) {
      problems.push(`message ${i} (${role}) comes before the tool results of ${[...open].map((c) => `"${c}"`).join(', ')} called at message ${openSince}`);
    }
    open = new Set();
    callsOfLastAssistant = new Set();
  };

  messages.forEach((raw, i) => {
    if (raw === null || typeof raw !== 'object') {
      problems.push(`message ${i} is not an object`);
      return;
    }
    const m = raw as Record<string, unknown>;
    const role = m.role;
    switch (role) {
      case 'system':
      case 'developer':
        closeRun(i, role);
        if (typeof m.content !== 'string' && !Array.isArray(m.content)) problems.push(`message ${i} (${role}) has no content`);
        return;
      case 'user':
        closeRun(i, role);
        if (typeof m.content === 'string') return;
        if (!Array.isArray(m.content) || m.content.length === 0) {
          problems.push(`message ${i} (user) content must be a string or a non-empty array of parts`);
          return;
        }
        for (const part of m.content as Array<Record<string, unknown>>) {
          if (part.type === 'text' && typeof part.text === 'string') continue;
          if (part.type === 'image_url' && typeof (part.image_url as { url?: unknown } | undefined)?.url === 'string') continue;
          problems.push(`message ${i} (user) has an invalid content part ${JSON.stringify(part)}`);
        }
        return;
      case 'assistant': {
        closeRun(i, role);
        const calls = m.tool_calls;
        if (calls === undefined) {
          if (typeof m.content !== 'string') problems.push(`message ${i} (assistant) without tool_calls needs string content`);
          return;
        }
        if (!Array.isArray(calls) || calls.length === 0) {
          problems.push(`message ${i} (assistant) tool_calls must be a non-empty array when present`);
          return;
        }
        if (m.content !== null && typeof m.content !== 'string') problems.push(`message ${i} (assistant) content must be a string or null`);
        for (const c of calls as Array<Record<string, unknown>>) {
          const fn = c.function as { name?: unknown; arguments?: unknown } | undefined;
          if (typeof c.id !== 'string' || c.id === '' || c.type !== 'function' || typeof fn?.name !== 'string' || typeof fn.arguments !== 'string') {
            problems.push(`message ${i} (assistant) has a malformed tool call ${JSON.stringify(c)}`);
            continue;
          }
          if (seenCallIds.has(c.id)) problems.push(`message ${i} (assistant) repeats tool call id "${c.id}"`);
          seenCallIds.add(c.id);
          open.add(c.id);
          callsOfLastAssistant.add(c.id);
        }
        openSince = i;
        return;
      }
      case 'tool': {
        const id = m.tool_call_id;
        if (typeof id !== 'string') {
          problems.push(`message ${i} (tool) has no tool_call_id`);
          return;
        }
        if (typeof m.content !== 'string') problems.push(`message ${i} (tool) content must be a string`);
        if (!callsOfLastAssistant.has(id)) {
          problems.push(`message ${i} (tool) answers "${id}", which the preceding assistant message did not call`);
        } else if (!open.has(id)) {
          problems.push(`message ${i} (tool) answers "${id}" a second time`);
        }
        open.delete(id);
        return;
      }
      default:
        problems.push(`message ${i} has an unknown role ${JSON.stringify(role)}`);
    }
  });
  if (open.size > 0) {
    problems.push(`the conversation ends with unanswered tool calls ${[...open].map((c) => `"${c}"`).join(', ')} (message ${openSince})`);
  }
  return problems;
}
