/**
 * From-scratch recomputations of what src/session keeps incrementally. Deliberately naive
 * (O(n²) where that is the plainest way to say it) and sharing no code with the projection,
 * so a test can compare the incremental answer with the obvious one.
 */
import type { SessionEvent } from '../../src/session/index';

/** The surface seqs, folding every surface event's op over an array in log order. */
export function referenceSurface(events: readonly SessionEvent[]): number[] {
  const nodes: number[] = [];
  for (const e of events) {
    const op = e.surfaceOp;
    if (op === undefined) continue;
    if (op === 'append') {
      nodes.push(e.seq);
      continue;
    }
    const start = nodes.indexOf(op.start);
    const end = nodes.indexOf(op.end);
    if (start < 0 || end < start) throw new Error(`reference: replace ${JSON.stringify(op)} at seq ${e.seq} is not a surface span`);
    nodes.splice(start, end - start + 1, e.seq);
  }
  return nodes;
}

function callIdsOf(e: SessionEvent): string[] {
  if (e.type !== 'assistant/message') return [];
  return e.data.content.flatMap((b) => (b.type === 'tool-call' ? [b.id] : []));
}

function resultIdOf(e: SessionEvent): string | undefined {
  return e.type === 'tool/result' ? e.data.callId : undefined;
}

/**
 * Balanced cut positions of a surface: cut p (before node p) is balanced when every call made
 * in nodes [0, p) is answered in [0, p) and every result in [p, n) answers a call in [p, n).
 * The second half is what makes a parallel batch one unit whatever order its results came in.
 */
export function referenceCuts(surface: readonly number[], eventAt: (seq: number) => SessionEvent): number[] {
  const events = surface.map(eventAt);
  const cuts: number[] = [];
  for (let p = 0; p <= events.length; p++) {
    const before = events.slice(0, p);
    const after = events.slice(p);
    const answeredBefore = new Set(before.map(resultIdOf).filter((x): x is string => x !== undefined));
    const calledAfter = new Set(after.flatMap(callIdsOf));
    const callsClosed = before.flatMap(callIdsOf).every((id) => answeredBefore.has(id));
    const resultsLocal = after.map(resultIdOf).every((id) => id === undefined || calledAfter.has(id));
    if (callsClosed && resultsLocal) cuts.push(p);
  }
  return cuts;
}

/** Calls on the surface that have no result on it, in call order. */
export function referencePending(surface: readonly number[], eventAt: (seq: number) => SessionEvent): string[] {
  const events = surface.map(eventAt);
  const answered = new Set(events.map(resultIdOf).filter((x): x is string => x !== undefined));
  return events.flatMap(callIdsOf).filter((id) => !answered.has(id));
}
