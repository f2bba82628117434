/**
 * Writing a prune plan (pruner.ts makes it): each rewrite as a `compaction/prune` event and
 * the replacement that follows it, everything checked against the session before the first
 * append, and the writes made oldest first.
 */
import { EventDataSchemas, type EventData, type SessionEvent } from '../../session/events';
import type { Session } from '../../session/session';
import { argumentWrites, type ArgumentPruneTarget } from './arguments';
import { PrunePlanStaleError, type PrunePlan, type PruneResult, type PruneTarget, type ToolResultContent } from './types';

function sameContent(a: ToolResultContent, b: ToolResultContent): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.type !== y.type) return false;
    if (x.type === 'text' && x.text !== (y as typeof x).text) return false;
    if (x.type === 'image' && (x.url !== (y as typeof x).url || x.detail !== (y as typeof x).detail)) return false;
  }
  return true;
}

/**
 * Writes a plan: per target, `compaction/prune` then the `tool/result` that replaces exactly
 * that node, identical except for its content. Every target is checked against the session
 * (still a current tool/result with the planned content) and every event is validated before
 * the first append, so a stale or malformed plan throws PrunePlanStaleError with the log untouched.
 */
export function applyPrune(session: Session, plan: PrunePlan): PruneResult {
  const seen = new Set<number>();
  const writes: Array<{ target: PruneTarget; prune: EventData<'compaction/prune'>; replacement: EventData<'tool/result'> }> = [];
  const argumentPlans: Array<{ target: ArgumentPruneTarget; write: Exclude<ReturnType<typeof argumentWrites>, string> }> = [];
  for (const target of plan.argumentTargets ?? []) {
    if (seen.has(target.seq))
      throw new PrunePlanStaleError(
        target.seq,
        `prune plan is stale: seq ${target.seq} is named twice in the plan. Plan again from the current session; nothing was written.`,
      );
    seen.add(target.seq);
    const write = argumentWrites(session, target);
    if (typeof write === 'string') {
      throw new PrunePlanStaleError(
        target.seq,
        `prune plan is stale: seq ${target.seq} (call "${target.calls[0]?.callId}") ${write}. Plan again from the current session; nothing was written.`,
      );
    }
    const refused = session.check({
      type: 'assistant/message',
      data: write.replacement(0).data,
      surfaceOp: { op: 'replace', start: target.seq, end: target.seq },
      sourceEventSeqs: [target.seq],
    });
    if (refused) throw new PrunePlanStaleError(target.seq, `prune plan is stale: seq ${target.seq}: ${refused.message} Nothing was written.`);
    argumentPlans.push({ target, write });
  }
  for (const target of plan.targets) {
    const stale = (why: string): PrunePlanStaleError =>
      new PrunePlanStaleError(
        target.seq,
        `prune plan is stale: seq ${target.seq} (call "${target.callId}") ${why}. Plan again from the current session; nothing was written.`,
      );
    if (seen.has(target.seq)) throw stale('is named twice in the plan');
    seen.add(target.seq);
    if (!session.surface.has(target.seq)) throw stale('is no longer a current surface node (shadowed, or never on this surface)');
    const event = session.event(target.seq);
    if (event.type !== 'tool/result') throw stale(`is a ${event.type}, not a tool/result`);
    if (event.data.callId !== target.callId) throw stale(`answers call "${event.data.callId}"`);
    if (!sameContent(event.data.content, target.contentBefore)) throw stale('has different content than the plan was made from');

    const prune: EventData<'compaction/prune'> = {
      targetSeq: target.seq,
      callId: target.callId,
      tokensBefore: target.tokensBefore,
      tokensAfter: target.tokensAfter,
      charsBefore: target.charsBefore,
      charsAfter: target.charsAfter,
    };
    const replacement: EventData<'tool/result'> = { ...event.data, content: target.content.map((b) => ({ ...b })) };
    const bad = !EventDataSchemas['compaction/prune'].safeParse(prune).success
      ? 'compaction/prune'
      : !EventDataSchemas['tool/result'].safeParse(replacement).success
        ? 'tool/result replacement'
        : undefined;
    if (bad) throw stale(`would get a malformed ${bad} event`);
    writes.push({ target, prune, replacement });
  }

  const result: PruneResult = { pruned: [], tokensFreed: 0 };
  if (plan.skipped) result.skipped = plan.skipped;
  // Oldest first across both kinds, so a pass cut short leaves a prefix of the prompt rewritten.
  const position = (seq: number) => session.surface.positionOf(seq) ?? 0;
  const order = [
    ...writes.map((w) => ({ at: position(w.target.seq), run: () => writeResult(w) })),
    ...argumentPlans.map((a) => ({ at: position(a.target.seq), run: () => writeArguments(a) })),
  ].sort((a, b) => a.at - b.at);
  for (const step of order) step.run();
  return result;

  function writeArguments({ target, write }: (typeof argumentPlans)[number]): void {
    const pruneEvent = session.append({ type: 'compaction/prune', data: write.prune });
    const { data, sourceEventSeqs } = write.replacement(pruneEvent.seq);
    const replaced = session.append({ type: 'assistant/message', data, surfaceOp: { op: 'replace', start: target.seq, end: target.seq }, sourceEventSeqs });
    result.pruned.push({
      seq: target.seq,
      kind: 'arguments',
      replacementSeq: replaced.seq,
      callId: target.calls[0]!.callId,
      toolName: target.calls[0]!.name,
      charsBefore: target.charsBefore,
      charsAfter: target.charsAfter,
      tokensBefore: target.tokensBefore,
      tokensAfter: target.tokensAfter,
    });
    result.tokensFreed += target.tokensBefore - target.tokensAfter;
  }

  function writeResult({ target, prune, replacement }: (typeof writes)[number]): void {
    const pruneEvent = session.append({ type: 'compaction/prune', data: prune });
    const replaced = session.append({
      type: 'tool/result',
      data: replacement,
      surfaceOp: { op: 'replace', start: target.seq, end: target.seq },
      sourceEventSeqs: [target.seq, pruneEvent.seq],
    });
    result.pruned.push({
      seq: target.seq,
      kind: 'result',
      replacementSeq: replaced.seq,
      callId: target.callId,
      ...(target.toolName !== undefined ? { toolName: target.toolName } : {}),
      charsBefore: target.charsBefore,
      charsAfter: target.charsAfter,
      tokensBefore: target.tokensBefore,
      tokensAfter: target.tokensAfter,
    });
    result.tokensFreed += target.tokensBefore - target.tokensAfter;
  }
}
