/**
 * A summary request for surface positions [1, end) of a session (everything after the system
 * prompt), counted with o200k: what the summarizer tests hand a summarizer directly, without an
 * engine (the engine builds its own with src/services/transaction/request.ts).
 */
import type { SummaryRequest } from '../../src/services/summarizing';
import { getTokenizer } from '../../src/services/metering';
import type { SurfaceEvent } from '../../src/session/events';
import type { Session } from '../../src/session/session';

export const countO200k = (text: string): number => getTokenizer('o200k_base').count(text);

export function spanRequest(session: Session, end: number, maxTokens: number, target = { provider: 'none', model: 'none' }): SummaryRequest {
  const seqs = session.surface.slice(1, end);
  return {
    system: session.messageAt(0),
    tools: [],
    context: [],
    messages: seqs.map((_, i) => session.messageAt(i + 1)),
    events: seqs.map((s) => session.event(s) as SurfaceEvent),
    target,
    maxTokens,
    countTokens: countO200k,
  };
}
