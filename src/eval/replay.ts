/**
 * Replays a recorded session through a live engine, as if an agent were living it: every
 * event is appended to a fresh session in order, and `afterStep()` runs where the agent calls
 * it (after a step's results, before its `step/end`).
 *
 * Recorded provider usage is dropped: it counts the prompts of the original, never-compacted
 * run, so anchoring the replayed meter to it would measure a conversation the replay no
 * longer has.
 */
import type { AfterStepResult, CompactionEngine } from '../engine';
import type { AppendInput, SessionEvent } from '../session/events';
import type { Session } from '../session/session';

export interface ReplayHooks {
  /** Called before each recorded assistant message is appended: the request that produced it is on the surface now. */
  beforeReply?: (event: SessionEvent<'assistant/message'>) => void;
}

export async function replayThroughEngine(
  source: Session,
  target: Session,
  engine: CompactionEngine,
  hooks: ReplayHooks = {},
): Promise<AfterStepResult[]> {
  const results: AfterStepResult[] = [];
  for (const e of source.events()) {
    if (e.type === 'step/end') results.push(await engine.afterStep());
    if (e.type === 'assistant/message') hooks.beforeReply?.(e);
    const data = e.type === 'assistant/message' ? withoutUsage(e.data) : e.data;
    const input = { type: e.type, data } as AppendInput;
    if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    if (e.sourceEventSeqs !== undefined) input.sourceEventSeqs = e.sourceEventSeqs;
    target.append(input);
  }
  return results;
}

function withoutUsage<T extends { usage?: unknown }>(data: T): Omit<T, 'usage'> {
  const { usage: _dropped, ...rest } = data;
  return rest;
}
