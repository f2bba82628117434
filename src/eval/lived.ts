/**
 * A recorded session as an agent lived it before any compaction: the same events without the
 * recording harness's own compaction decisions (`compaction/*` brackets, and the checkpoints
 * and pruned results they committed). An imported Claude Code, Codex or pi session carries its
 * harness's compactions as checkpoints, so it derives what that harness sent; a replay that
 * lets each policy (xcompact, the simulated peers) make its own decisions starts from the
 * conversation itself, the same for all. A changed system prompt (a replace of node 0) stays.
 */
import type { AppendInput } from '../session/events';
import { Session } from '../session/session';

export function withoutCompactions(source: Session, id = `${source.id}-lived`): Session {
  const out = Session.inMemory(id);
  /** Seq in `source` → seq in `out`, for the events kept. */
  const mapped = new Map<number, number>();
  for (const e of source.events()) {
    if (e.type.startsWith('compaction/')) continue;
    const replace = e.surfaceOp !== undefined && e.surfaceOp !== 'append' ? e.surfaceOp : undefined;
    if (replace && e.type !== 'system/message') continue;
    const input = { type: e.type, data: e.data } as AppendInput;
    if (replace) {
      const start = mapped.get(replace.start);
      const end = mapped.get(replace.end);
      if (start === undefined || end === undefined) continue;
      input.surfaceOp = { op: 'replace', start, end };
    } else if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    if (e.sourceEventSeqs !== undefined) input.sourceEventSeqs = e.sourceEventSeqs.map((s) => mapped.get(s)).filter((s): s is number => s !== undefined);
    mapped.set(e.seq, out.append(input).seq);
  }
  return out;
}
