/**
 * The tool-call pairing check the conversation runs on the messages a caller hands it, before
 * anything is recorded or sent: each tool result answers a call that is waiting for one, no call
 * id is made twice, and no other message comes while calls wait, nor does the input end with
 * calls unanswered (a request providers reject, or answer blind).
 */

/** One message as the pairing sees it: the results it brings (a tool message) or the calls it makes. */
export interface PairingStep {
  role: string;
  /** Call ids this message answers (a tool message: one, or several for an AI SDK tool message). */
  results: readonly string[];
  /** Call ids this message makes (an assistant message with tool calls). */
  calls: readonly string[];
}

export type PairingProblem =
  /** A result for a call that is not waiting: never made, or answered already. */
  | { kind: 'unexpected-result'; callId: string }
  /** Calls still waiting when `before` (a message of that role) came, or at the end of the input (`before` undefined). */
  | { kind: 'missing-results'; callIds: string[]; before?: string }
  /** A call id made before (`made`, or earlier in `steps`): a result could not tell the two calls apart. */
  | { kind: 'duplicate-call'; callId: string };

/**
 * The first pairing problem of `steps` after the calls `pending` the session already waits on,
 * `made` holding every call id made so far; undefined when there is none.
 */
export function pairingProblem(
  pending: readonly string[],
  steps: Iterable<PairingStep>,
  made: { has(id: string): boolean } = new Set(),
): PairingProblem | undefined {
  const waiting = new Set(pending);
  const fresh = new Set<string>();
  for (const s of steps) {
    if (s.role === 'tool') {
      for (const id of s.results) if (!waiting.delete(id)) return { kind: 'unexpected-result', callId: id };
      continue;
    }
    if (waiting.size > 0) return { kind: 'missing-results', callIds: [...waiting], before: s.role };
    for (const id of s.calls) {
      if (made.has(id) || fresh.has(id)) return { kind: 'duplicate-call', callId: id };
      fresh.add(id);
      waiting.add(id);
    }
  }
  return waiting.size > 0 ? { kind: 'missing-results', callIds: [...waiting] } : undefined;
}

/** "call "a" has" / "calls "a", "b" have": the refusals' common phrase. */
export const callsHave = (ids: readonly string[]): string =>
  `tool call${ids.length > 1 ? 's' : ''} ${ids.map((id) => `"${id}"`).join(', ')} ha${ids.length > 1 ? 've' : 's'}`;
