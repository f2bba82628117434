/**
 * Replays a recorded session through a live engine, as if an agent were living it: every
 * event is appended to a fresh session in order, and `afterStep()` runs where the agent calls
 * it (after a step's results, before its `step/end`).
 *
 * Recorded provider usage is dropped: it counts the prompts of the original, never-compacted
 * run, so anchoring the replayed meter to it would measure a conversation the replay no
 * longer has. `hooks.usage` gives each reply the usage the replayed provider reports instead
 * (what the replay bills for the request it sent): the engine anchors and calibrates on it as
 * it does live.
 *
 * A background summary under way is let land before the next event: a replay runs its steps in
 * microseconds, a live agent in seconds, and a summary over HTTP would otherwise still be on its
 * way at every later step, so the figures would depend on the summarizer's latency. Every
 * summarizer is then replayed alike (the extractive one is done by then anyway): the summary of
 * a live agent whose steps take longer than a summary.
 */
import type { AnyActorRef } from 'xstate';
import type { AfterStepResult, CompactionEngine } from '../engine/facade';
import type { AppendInput, SessionEvent, Usage } from '../session/events';
import type { Session } from '../session/session';

export interface ReplayHooks {
  /** Called before each recorded assistant message is appended: the request that produced it is on the surface now. */
  beforeReply?: (event: SessionEvent<'assistant/message'>) => void;
  /** The usage the replayed reply reports (called after beforeReply); none when undefined. */
  usage?: (event: SessionEvent<'assistant/message'>) => Usage | undefined;
}

export async function replayThroughEngine(source: Session, target: Session, engine: CompactionEngine, hooks: ReplayHooks = {}): Promise<AfterStepResult[]> {
  const results: AfterStepResult[] = [];
  for (const e of source.events()) {
    if (e.type === 'step/end') {
      const r = await engine.afterStep();
      results.push(r);
      if (r.status === 'preparing') await backgroundLanded(engine);
    }
    let data: unknown = e.data;
    if (e.type === 'assistant/message') {
      hooks.beforeReply?.(e);
      const usage = hooks.usage?.(e);
      data = usage ? { ...withoutUsage(e.data), usage } : withoutUsage(e.data);
    }
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

/** States of the background chart in which its run waits for nothing the replay does not send. */
const UNDER_WAY = new Set(['selecting', 'validating', 'opening', 'summarizing', 'ready', 'committing', 'flushing', 'closing', 'cancelled']);

/** Until the background run, if one is under way, is held, has ended, or waits for the agent's next reply (one slot). */
function backgroundLanded(engine: CompactionEngine): Promise<void> {
  const ref = (engine.actor.getSnapshot().context as { backgroundRef?: AnyActorRef }).backgroundRef;
  const busy = () => {
    const v = ref?.getSnapshot().value as unknown;
    return UNDER_WAY.has(typeof v === 'string' ? v : (Object.keys(v ?? {})[0] ?? ''));
  };
  if (!ref || !busy()) return Promise.resolve();
  return new Promise((resolve) => {
    const sub = ref.subscribe({
      next: () => {
        if (busy()) return;
        sub.unsubscribe();
        resolve();
      },
      complete: () => resolve(),
      error: () => resolve(),
    });
  });
}
