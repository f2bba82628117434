/**
 * The conversation as it was recorded: each message's first append (so neither a prune nor a
 * checkpoint changes it), checkpoints left out. It is the caller's own, uncompacted view, which
 * a checkpoint only shadows: what a restarted process continues the conversation from.
 */
import { isCheckpoint, type SessionEvent, type SurfaceEvent } from './events';
import type { Session } from './session';

/** The recorded user, assistant and tool-result messages, in order (no system prompt). */
export function recordedMessages(session: Session): SurfaceEvent[] {
  const out: SurfaceEvent[] = [];
  for (const e of session.events()) {
    if (e.surfaceOp !== 'append') continue;
    if (e.type === 'user/message' ? isCheckpoint(e) : e.type !== 'assistant/message' && e.type !== 'tool/result') continue;
    out.push(e as SurfaceEvent);
  }
  return out;
}

/** The current system prompt (surface node 0), if one was recorded. */
export function currentSystemPrompt(session: Session): string | undefined {
  if (session.surface.length === 0) return undefined;
  const head = session.event(session.surface.seqAt(0));
  return head.type === 'system/message' ? head.data.text : undefined;
}
