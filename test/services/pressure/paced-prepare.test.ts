/**
 * The paced prepare point (src/services/pressure/measure.ts): with prepareRatio unset, a
 * background summary starts when the growth expected while one is written would reach the
 * threshold, from the latencies of the summaries the log records and the agent's growth per ms.
 */
import { describe, expect, it } from 'vitest';
import { pacedPoint, pacedPrepare, PREPARE_LEAD } from '../../../src/services/pressure';
import type { AppendInput } from '../../../src/session/events';
import { Session } from '../../../src/session/session';

const budget = { threshold: 10_000, retain: 2_000, prepare: 8_000 };
/** Five steps of 100 ms, each adding 200 tokens: 2 tokens per ms. */
const steps: Array<[number, number]> = [0, 1, 2, 3, 4].map((i) => [i * 100, 3_000 + i * 200]);

describe('the paced prepare point', () => {
  it('is the growth of one summary, twice over, ahead of the threshold: late for a fast summarizer, early for a slow one', () => {
    expect(pacedPoint([50], steps, budget)).toBe(budget.threshold - PREPARE_LEAD * 2 * 50);
    expect(pacedPoint([20, 500, 80], steps, budget)).toBe(budget.threshold - PREPARE_LEAD * 2 * 500); // the slowest recent one
    // Never earlier than twice the static point's distance from the threshold, never above it.
    expect(pacedPoint([5_000], steps, budget)).toBe(budget.threshold - 2 * (budget.threshold - budget.prepare));
    expect(pacedPoint([0], [[0, 3_000], [1_000_000, 3_001]], budget)).toBe(budget.threshold - 1);
  });

  it('is undefined (the static point applies) with no summary timed, no growth, or one reading', () => {
    expect(pacedPoint([], steps, budget)).toBeUndefined();
    expect(pacedPoint([50], [[0, 3_000], [100, 3_000]], budget)).toBeUndefined();
    expect(pacedPoint([50], [[0, 3_000]], budget)).toBeUndefined();
    expect(pacedPoint([50], steps, { ...budget, prepare: undefined })).toBeUndefined();
  });

  it('reads a log with no summary yet as undefined, whatever the growth', () => {
    let now = 1_700_000_000_000;
    const session = Session.inMemory('paced', { now: () => now });
    const add = (type: AppendInput['type'], data: unknown) => session.append({ type, data } as AppendInput);
    for (let t = 0; t < 4; t++) {
      now += 100;
      add('turn/start', { turn: t });
      add('turn/end', { turn: t });
      expect(pacedPrepare(session, 3_000 + t * 500, budget)).toBeUndefined();
    }
  });
});
