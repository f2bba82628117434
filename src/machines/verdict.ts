/**
 * The rules a prepared summary must pass before it is committed, shared by the two charts that
 * commit one: the transaction chart (foreground) and the background chart (docs/spec.md#13-background-compaction). One
 * definition, so a background commit can never be held to a weaker rule than a foreground one.
 */
import type { EventObject } from 'xstate';
import { outputOf, type ErrorInfo, type SpanCheck, type Verdict } from './types';

type Args = { event: EventObject };

/** Guards on the done events of `validateSpan` (lock) and `revalidate` (the verdict). */
export const verdictGuards = {
  'lock is held': ({ event }: Args) => outputOf<SpanCheck>(event).lockHeld,
  'checkpoint does not shrink the span': ({ event }: Args) => {
    const v = outputOf<Verdict>(event);
    return v.checkpointTokens >= v.spanTokens;
  },
  'too little progress': ({ event }: Args) => {
    const v = outputOf<Verdict>(event);
    return v.spanTokens - v.checkpointTokens < v.requiredTokens;
  },
};

/** The span is not exactly as selected (or the surface moved under it): nothing is committed. */
export const spanChanged = ({ event }: Args) => !outputOf<Verdict>(event).stable;

export function noShrinkError(event: EventObject): ErrorInfo {
  const v = outputOf<Verdict>(event);
  return {
    code: 'summary',
    cause: 'summary-no-shrink',
    message: `the checkpoint (${v.checkpointTokens} tokens) is not smaller than the span it replaces (${v.spanTokens} tokens)`,
  };
}

export function noProgressError(event: EventObject): ErrorInfo {
  const v = outputOf<Verdict>(event);
  return {
    code: 'no-progress',
    message: `the checkpoint would free ${v.spanTokens - v.checkpointTokens} tokens, less than the required ${v.requiredTokens} (minProgressRatio of ${v.spanTokens})`,
  };
}
