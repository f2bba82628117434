/**
 * The transaction's checks on its span: before the bracket opens (still a balanced run of
 * current surface nodes at the head, and is the lock free?) and after the summary arrived
 * (did the surface change, and what would the checkpoint free?).
 */
import { XcompactError } from '../../errors';
import type { Mode, SpanCheck, SummaryOutcome, Verdict } from '../core';
import type { Session } from '../../session/session';
import { frameCheckpoint, pricingHandle } from '../summarizing';
import { recallOn } from '../core';
import type { ServiceDeps } from '../core';
import { headPosition, type RangeSelection } from '../selection';

/** The span's nodes are still on the surface, contiguous, in order. */
export function spanIntact(session: Session, range: RangeSelection): boolean {
  const s = session.surface;
  const startPos = s.positionOf(range.start);
  if (startPos === undefined) return false;
  for (let i = 0; i < range.shadowed.length; i++) {
    if (s.positionOf(range.shadowed[i]!) !== startPos + i) return false;
  }
  return true;
}

/** Throws `span-invalid` (chart code `changed`) when the span no longer holds. */
export function validateSpan(session: Session, { range }: { range: RangeSelection }): SpanCheck {
  const startsAtHead = session.surface.positionOf(range.start) === range.startPos && range.startPos >= headPosition(session);
  if (!startsAtHead || !spanIntact(session, range) || !session.balancedBefore(range.start) || !session.balancedAfter(range.end)) {
    throw Object.assign(new XcompactError('span-invalid', 'the selected span is no longer a balanced run of current surface nodes'), {
      chartCode: 'changed',
    });
  }
  return {
    lockHeld: session.lock.held,
    snapshot: { generation: session.surface.replaceGeneration, surfaceLength: session.surface.length },
  };
}

export interface RevalidateInput {
  range: RangeSelection;
  mode: Mode;
  snapshot: SpanCheck['snapshot'];
  summary: SummaryOutcome;
}

/**
 * An automatic compaction needs the surface exactly as it was (nothing appended or replaced);
 * a manual one only its span intact; a background one its span at the same positions. Automatic ones must also free minProgressRatio of the span.
 */
export function revalidateSpan(deps: Pick<ServiceDeps, 'session' | 'meter' | 'config'>, input: RevalidateInput): Verdict {
  const { session, meter, config } = deps;
  const s = session.surface;
  const stable =
    input.mode === 'automatic'
      ? s.replaceGeneration === input.snapshot.generation && s.length === input.snapshot.surfaceLength
      : input.mode === 'background'
        ? // The agent worked on meanwhile: appends after the span are fine, the span itself must be as selected.
          s.positionOf(input.range.start) === input.range.startPos && spanIntact(session, input.range)
        : spanIntact(session, input.range);
  const checkpointTokens = meter.priceUserText(frameCheckpoint(input.summary.text, pricingHandle(recallOn(deps), session.length)));
  const requiredTokens = input.mode === 'manual' ? 0 : Math.ceil(config.minProgressRatio * input.range.tokens);
  return { stable, spanTokens: input.range.tokens, checkpointTokens, requiredTokens };
}
