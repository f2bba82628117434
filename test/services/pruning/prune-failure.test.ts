/**
 * A prune that throws is an optimisation that failed, not a reason to give up: the pressure
 * and overflow charts announce it (`prune.failed`) and go on to select and compact. Through the
 * public engine on the local server; the prune service is made to throw as a store that refuses
 * the write, or a pruner with a bug, would.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanupWorlds,
  fillAbove,
  openWorld,
  startServer,
  startTurn,
  summaryRequests,
  toolStep,
  type Call,
  type Server,
  type World,
} from '../../machines/runner';

let srv: Server;
beforeAll(async () => {
  srv = await startServer();
});
afterAll(() => srv.close());
afterEach(cleanupWorlds);

const failingPrune = (call: Call) => call.reject(Object.assign(new Error('the store refused the prune'), { code: 'store-write' }));
const committed = (w: World) => w.session.events().filter((e) => e.type === 'compaction/end' && !e.data.error);

describe('a prune that throws', () => {
  it('pressure: announced as prune.failed, and the chart still compacts', async () => {
    const w = await openWorld(srv, {
      config: { prune: { thresholdChars: 2000, headChars: 800, tailChars: 400, protectRecentTokens: 0, minReclaimTokens: 1 } },
    });
    w.ctl.setAuto({ prune: failingPrune });
    fillAbove(w, 100, { result: Array.from({ length: 600 }, (_, i) => `line${i}`).join(' ') });
    const r = await w.engine.afterStep();
    expect(w.ctl.calls.map((c) => c.service)).toContain('prune');
    expect(w.notes).toContainEqual({
      type: 'prune.failed',
      trigger: 'pressure',
      error: { code: 'internal', message: 'the store refused the prune', cause: 'store-write' },
    });
    expect(r.status).toBe('compacted');
    expect(committed(w)).toHaveLength(1);
    expect(summaryRequests(w).length).toBeGreaterThan(0);
    expect(w.session.events().some((e) => e.type === 'compaction/prune')).toBe(false);
  });

  it('overflow: announced as prune.failed, and recovery still compacts and answers retry', async () => {
    const w = await openWorld(srv);
    w.ctl.setAuto({ prune: failingPrune });
    startTurn(w);
    toolStep(w);
    toolStep(w);
    toolStep(w, { open: true });
    const action = await w.engine.onRequestError(srv.overflowError);
    expect(w.ctl.calls.map((c) => c.service)).toContain('prune');
    expect(w.notes).toContainEqual({
      type: 'prune.failed',
      trigger: 'overflow',
      error: { code: 'internal', message: 'the store refused the prune', cause: 'store-write' },
    });
    expect(action.kind).toBe('retry');
    expect(committed(w)).toHaveLength(1);
  });
});
