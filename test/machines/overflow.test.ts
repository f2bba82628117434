/**
 * Every transition of the overflow chart, by paths generated from the chart, run on the real
 * engine (see suite-overflow.ts).
 */
import { describe, expect, it } from 'vitest';
import { describeGeneratedPaths, useServer } from './describe';
import {
  expectLogOnlyGrew,
  expectReplays,
  expectValidRequest,
  markRun,
  newEvents,
  openWorld,
  startTurn,
  summaryRequests,
  toolStep,
  type WorldOptions,
} from './runner';
import { runOverflowPath } from './suite-overflow';

const server = useServer();
describeGeneratedPaths('overflow', server, runOverflowPath);

/**
 * Pruning off, both ways a host turns it off (`pruner: false`, `prune.enabled: false`), against
 * pruning on in the same world: recovery still compacts and grants the retry, but it leaves
 * tool output alone — no prune call, no compaction/prune, no `pruned` notification.
 */
describe('overflow recovery with pruning off', () => {
  const PRUNE = { thresholdChars: 2000, headChars: 800, tailChars: 400 };
  const LONG = Array.from({ length: 400 }, (_, i) => `out${i}`).join(' '); // over thresholdChars
  const cases: Array<{ label: string; options: WorldOptions; prunes: boolean }> = [
    { label: 'pruner: false', options: { pruner: false, config: { prune: PRUNE } }, prunes: false },
    { label: 'config prune.enabled: false', options: { config: { prune: { ...PRUNE, enabled: false } } }, prunes: false },
    { label: 'pruning on (the same world, for contrast)', options: { config: { prune: PRUNE } }, prunes: true },
  ];
  for (const c of cases) {
    it(`${c.label}: compacts and retries${c.prunes ? ', pruning first' : ' without pruning'}`, async () => {
      const w = await openWorld(server(), c.options);
      startTurn(w);
      toolStep(w, { result: LONG });
      toolStep(w);
      toolStep(w, { open: true });
      const tokensBefore = w.engine.measure().totalTokens;
      markRun(w);
      w.ctl.setAuto();
      const action = await w.engine.onRequestError(server().overflowError);
      expect(action.kind).toBe('retry');
      expect(w.engine.measure().totalTokens).toBeLessThan(tokensBefore);

      const types = newEvents(w).map((e) => e.type);
      expect(types.filter((t) => t === 'compaction/prune').length > 0).toBe(c.prunes);
      expect(types.filter((t) => t !== 'compaction/prune' && t !== 'tool/result')).toEqual([
        'compaction/start',
        'compaction/summary',
        'user/message',
        'compaction/end',
      ]);
      expect(w.ctl.calls.some((x) => x.service === 'prune')).toBe(c.prunes);
      expect(w.notes.some((n) => n.type === 'pruned')).toBe(c.prunes);
      expect(summaryRequests(w)).toHaveLength(1);
      if (!c.prunes) {
        // The long result went to the summarizer verbatim: nothing cut it first.
        expect(summaryRequests(w)[0]!.raw).toContain(LONG);
      }
      expectLogOnlyGrew(w);
      expect(w.session.lock.held).toBe(false);
      expectValidRequest(w);
      await (await expectReplays(w)).close();
    });
  }
});
