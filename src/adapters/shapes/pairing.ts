/**
 * The tool-call pairing check every adapter runs on the messages a caller hands it, before
 * anything is recorded or sent: each tool result answers a call that is waiting for one, and no
 * other message comes while calls wait, nor does the input end with calls unanswered (a request
 * providers reject, or answer blind). One walk; each adapter words the refusal in its own error
 * (DropInError, AiSdkAdapterError) and its caller's terms.
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
  | { kind: 'missing-results'; callIds: string[]; before?: string };

/** The first pairing problem of `steps` after the calls `pending` the session already waits on; undefined when there is none. */
export function pairingProblem(pending: readonly string[], steps: Iterable<PairingStep>): PairingProblem | undefined {
  const waiting = new Set(pending);
  for (const s of steps) {
    if (s.role === 'tool') {
      for (const id of s.results) if (!waiting.delete(id)) return { kind: 'unexpected-result', callId: id };
      continue;
    }
    if (waiting.size > 0) return { kind: 'missing-results', callIds: [...waiting], before: s.role };
    for (const id of s.calls) waiting.add(id);
  }
  return waiting.size > 0 ? { kind: 'missing-results', callIds: [...waiting] } : undefined;
}

/** "call "a" has" / "calls "a", "b" have": the refusals' common phrase. */
export const callsHave = (ids: readonly string[]): string =>
  `tool call${ids.length > 1 ? 's' : ''} ${ids.map((id) => `"${id}"`).join(', ')} ha${ids.length > 1 ? 've' : 's'}`;
