/**
 * Range selection, rule by rule, with prices we control: every node costs what its text
 * says (`n<price>`), so each expected span can be read off the test.
 */
import { describe, expect, it } from 'vitest';
import { selectRange, type RangeSelection } from '../../../src/services/selection';
import type { NodePrices } from '../../../src/services/metering';
import { COMPACTION_CHECKPOINT_SOURCE } from '../../../src/session/events';
import { Session } from '../../../src/session/session';
import { SessionWriter } from '../../../src/session/writer';

/** Price of a node = the number in its text ("u100" costs 100). */
function pricesOf(session: Session): NodePrices {
  const priceOf = (seq: number): number => {
    const e = session.event(seq);
    const text = JSON.stringify(e.data);
    return Number(/"text":"[a-zC](\d+)/.exec(text)?.[1] ?? 1);
  };
  return {
    get length() {
      return session.surface.length;
    },
    priceAt: (p) => priceOf(session.surface.seqAt(p)),
    priceOf,
  };
}

function build(spec: string[], system = true): { session: Session; seqs: number[] } {
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  const seqs: number[] = [];
  if (system) seqs.push(w.system('s1')!.seq);
  let call = 0;
  for (const item of spec) {
    if (item.startsWith('u')) seqs.push(w.user(item).seq);
    else if (item.startsWith('C')) seqs.push(w.user(`x${item.slice(1)}`, COMPACTION_CHECKPOINT_SOURCE).seq);
    else if (item.startsWith('a')) {
      // a<price>:<calls> — an assistant message with that many parallel calls
      const [price, calls] = item.slice(1).split(':');
      const ids = Array.from({ length: Number(calls ?? 0) }, () => `call${call++}`);
      seqs.push(w.assistant({ text: `a${price}`, toolCalls: ids.map((id) => ({ id, name: 't', arguments: '{}' })) }).seq);
    } else if (item.startsWith('t')) {
      const id = session.surface.pendingCalls()[0]!;
      seqs.push(w.toolResult(id, item).seq);
    }
  }
  return { session, seqs };
}

const positions = (r: RangeSelection | null) => (r ? [r.startPos, r.endPos] : null);

describe('selectRange', () => {
  it('walks from the tail until retainTokens are kept and condenses everything older, after the system prompt', () => {
    const { session, seqs } = build(['u100', 'u100', 'u100', 'u100']);
    const r = selectRange(session, pricesOf(session), { retainTokens: 150 });
    // tail: u100 (100) + u100 (200 ≥ 150) → positions 3,4 kept; 1..2 condensed
    expect(positions(r)).toEqual([1, 2]);
    expect(r!.shadowed).toEqual([seqs[1], seqs[2]]);
    expect(r!.tokens).toBe(200);
    expect(r!.contextPos).toBe(1);
  });

  it('moves the cut toward the head until it is balanced: a parallel batch stays whole', () => {
    const { session } = build(['u100', 'a10:2', 't100', 't100', 'u10']);
    // retain 150 from the tail: u10, t100, t100 → cut at position 3 (between the two results) is unbalanced
    const r = selectRange(session, pricesOf(session), { retainTokens: 150 });
    expect(positions(r)).toEqual([1, 1]);
  });

  it('always keeps the newest unit, even with retainTokens 0', () => {
    const { session } = build(['u100', 'a10:1', 't100']);
    expect(positions(selectRange(session, pricesOf(session), { retainTokens: 0 }))).toEqual([1, 1]);
  });

  it('never condenses an open tail: pending calls stay with their assistant message', () => {
    const { session } = build(['u100', 'u100', 'a10:2', 't5']);
    expect(positions(selectRange(session, pricesOf(session), { retainTokens: 0 }))).toEqual([1, 2]);
  });

  it('returns null when everything is retained, or only a lone checkpoint would be condensed', () => {
    const a = build(['u100']);
    expect(selectRange(a.session, pricesOf(a.session), { retainTokens: 0 })).toBeNull();
    const b = build(['C100', 'u100']);
    expect(selectRange(b.session, pricesOf(b.session), { retainTokens: 0 })).toBeNull();
  });

  it('works without a system prompt: the head is position 0', () => {
    const { session } = build(['u100', 'u100', 'u100'], false);
    const r = selectRange(session, pricesOf(session), { retainTokens: 100 });
    expect(positions(r)).toEqual([0, 1]);
    expect(r!.contextPos).toBe(0);
  });

  it('stacking keeps small earlier checkpoints in place and condenses what follows them', () => {
    const { session } = build(['C50', 'u300', 'u300', 'u100']);
    const r = selectRange(session, pricesOf(session), { retainTokens: 100, stack: { maxCheckpoints: 4, maxTokens: 100 } });
    expect(positions(r)).toEqual([2, 3]);
    expect(r!.contextPos).toBe(1); // the checkpoint at position 1 is context, not shadowed
  });

  it('merges from the head when the stacked checkpoints are too big or too many', () => {
    const big = build(['C500', 'u300', 'u300', 'u100']);
    expect(positions(selectRange(big.session, pricesOf(big.session), { retainTokens: 100, stack: { maxCheckpoints: 4, maxTokens: 100 } }))).toEqual([1, 3]);
    const many = build(['C10', 'C10', 'u300', 'u100']);
    expect(positions(selectRange(many.session, pricesOf(many.session), { retainTokens: 100, stack: { maxCheckpoints: 2, maxTokens: 100 } }))).toEqual([1, 3]);
  });

  it('minSpanTokens: a stacked span too small to shrink falls back to a head merge; a head span too small is not selected', () => {
    const { session } = build(['C90', 'u20', 'u100']);
    const stacked = { retainTokens: 100, stack: { maxCheckpoints: 4, maxTokens: 100 } };
    expect(positions(selectRange(session, pricesOf(session), { ...stacked, minSpanTokens: 10 }))).toEqual([2, 2]);
    expect(positions(selectRange(session, pricesOf(session), { ...stacked, minSpanTokens: 50 }))).toEqual([1, 2]);
    expect(selectRange(session, pricesOf(session), { ...stacked, minSpanTokens: 200 })).toBeNull();
  });

  it('reads nothing but the surface and the prices: the session is unchanged', () => {
    const { session } = build(['u100', 'a10:1', 't100', 'u100']);
    const before = JSON.stringify(session.events());
    selectRange(session, pricesOf(session), { retainTokens: 50 });
    expect(JSON.stringify(session.events())).toBe(before);
  });
  it('a parallel batch straddling the cut: the cut moves toward the tail when moving it toward the head leaves nothing worth condensing (docs/spec.md#4-pressure-compaction)', () => {
    // u5, then one batch of 3 calls (results 100 each), then small steps; retain 250 ends inside the batch.
    const { session } = build(['u5', 'a5:3', 't100', 't100', 't100', 'a5:1', 't50', 'a5:1', 't50', 'u40']);
    // Toward the head the cut reaches position 2 (before the batch): a span of u5 only, under minSpanTokens.
    const r = selectRange(session, pricesOf(session), { retainTokens: 250, minSpanTokens: 50 });
    // Toward the tail: the first balanced cut after the batch (position 6): the batch is condensed.
    expect(positions(r)).toEqual([1, 5]);
    expect(r!.tokens).toBe(5 + 5 + 300);
  });

  it("checkpoint bound: a span whose checkpoint (the user's words it carries, a summary up to the cap) could not shrink it is widened toward the tail", () => {
    // Two earlier checkpoints and little new above a retained tail of 1,000: the span [1, 4] costs 750.
    const { session } = build(['C300', 'C300', 'a50:1', 't100', 'a10:1', 't500', 'a10:1', 't500', 'u20']);
    const plain = { retainTokens: 1000 };
    expect(positions(selectRange(session, pricesOf(session), plain))).toEqual([1, 4]);
    // Its checkpoint may cost 10 + min(200, 600) + min(500, 550) = 710: it would free 40 < 10% of 750.
    const bound = { userWords: 200, cap: 500, frameTokens: 10, minProgressRatio: 0.1 };
    const r = selectRange(session, pricesOf(session), { ...plain, checkpoint: bound });
    // The next balanced cut: 1,260 tokens, a checkpoint of at most 710 frees 550 ≥ 126.
    expect(positions(r)).toEqual([1, 6]);
    expect(r!.tokens).toBe(1260);
    // A cap that fits every span: as without the bound.
    expect(positions(selectRange(session, pricesOf(session), { ...plain, checkpoint: { ...bound, cap: 300 } }))).toEqual([1, 4]);
    // No span surely shrinks: the span as without the bound (its summary may be short enough).
    expect(positions(selectRange(session, pricesOf(session), { ...plain, checkpoint: { ...bound, cap: 5000 } }))).toEqual([1, 4]);
  });

  it('moves toward the tail only as far as a span worth a checkpoint, and never past the newest unit', () => {
    const { session } = build(['u5', 'a5:2', 't10', 't10', 'a5:1', 't10', 'u40']);
    expect(positions(selectRange(session, pricesOf(session), { retainTokens: 1000, minSpanTokens: 30 }))).toEqual([1, 4]);
    // Nothing before the newest unit pays for a checkpoint: null (stuck only then).
    expect(selectRange(session, pricesOf(session), { retainTokens: 1000, minSpanTokens: 100 })).toBeNull();
  });
});
