/**
 * Smaller engine defects, each through the public engine on the local server:
 * a lock taken just before `compaction/start` is `busy` (and not a breaker failure), a
 * caller's abort reason survives into the error and the log, `onRequestError` tells a failed
 * summary from a stuck conversation (each notified), and `measure()` is plain data.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CompactionError } from '../../src/engine/facade';
import {
  cleanupWorlds,
  endTurn,
  fillAbove,
  openWorld,
  startServer,
  startTurn,
  summaryRequests,
  takeLock,
  textOfTokens,
  toolStep,
  type Server,
} from '../machines/runner';

let srv: Server;
beforeAll(async () => {
  srv = await startServer();
});
afterAll(() => srv.close());
afterEach(cleanupWorlds);

const SERVER_500 = {
  kind: 'status' as const,
  status: 500,
  body: { error: { message: 'The server had an error', type: 'server_error', param: null, code: null } },
};

describe('engine defects', () => {
  it('a lock taken between validation and compaction/start is busy, and the breaker does not count it', async () => {
    const w = await openWorld(srv, { pruner: false, config: { circuitBreaker: { failureLimit: 1, cooldownMs: 1000 } } });
    w.ctl.setAuto();
    fillAbove(w, 100);
    w.ctl.hold();
    const running = w.engine.afterStep();
    for (const s of ['measure', 'selectRange', 'validateSpan'] as const) await (await w.ctl.take(s, running)).runReal();
    const open = await w.ctl.take('openBracket', running);
    takeLock(w); // another writer, after the span was validated
    await open.runReal();
    w.ctl.setAuto();
    const r = await running;
    expect(r.status).toBe('failed');
    expect(r.error?.code).toBe('busy');
    expect(w.engine.actor.getSnapshot().context.consecutiveFailures).toBe(0);
    expect(w.notes.filter((n) => n.type === 'breaker.opened')).toEqual([]);
    expect(summaryRequests(w)).toHaveLength(0);
  });

  it("signal.abort(reason) mid-summary keeps the caller's reason in the error and in compaction/end.error", async () => {
    const w = await openWorld(srv, { pruner: false });
    w.ctl.setAuto();
    toolStep(w);
    toolStep(w);
    toolStep(w);
    endTurn(w);
    srv.queue.push({ kind: 'hang' });
    const controller = new AbortController();
    const running = w.engine.compactNow({ signal: controller.signal }).catch((err: unknown) => err);
    await srv.server.waitForRequest(w.srv.server.requests.length);
    controller.abort(new Error('user pressed Ctrl-C'));
    const err = (await running) as CompactionError;
    expect(err).toBeInstanceOf(CompactionError);
    expect(err.code).toBe('cancelled');
    expect(err.message).toContain('user pressed Ctrl-C');
    const end = w.session
      .events()
      .filter((e) => e.type === 'compaction/end')
      .at(-1)!;
    expect(end.type === 'compaction/end' && end.data.error?.message).toContain('user pressed Ctrl-C');
  });

  it('onRequestError: a failed summary request answers summary-failed with its cause, notified', async () => {
    const w = await openWorld(srv, { pruner: false });
    w.ctl.setAuto();
    startTurn(w);
    toolStep(w);
    toolStep(w);
    toolStep(w, { open: true });
    srv.queue.push(SERVER_500);
    const action = await w.engine.onRequestError(srv.overflowError);
    expect(action).toMatchObject({ kind: 'fail', reason: 'summary-failed', error: srv.overflowError });
    const cause = action.kind === 'fail' ? action.compactionError : undefined;
    expect(cause).toBeInstanceOf(CompactionError);
    expect(cause?.code).toBe('summary');
    expect(cause?.causeCode).toBe('summary-request');
    expect(w.notes.filter((n) => n.type === 'compaction.failed')).toHaveLength(1);
  });

  it('onRequestError: an empty summary answers summary-failed too', async () => {
    const w = await openWorld(srv, { pruner: false });
    w.ctl.setAuto();
    startTurn(w);
    toolStep(w);
    toolStep(w);
    toolStep(w, { open: true });
    srv.queue.push({ kind: 'reply', content: '' });
    const action = await w.engine.onRequestError(srv.overflowError);
    expect(action).toMatchObject({ kind: 'fail', reason: 'summary-failed' });
    expect(w.notes.filter((n) => n.type === 'compaction.failed')).toHaveLength(1);
  });

  it('onRequestError: the newest unit alone over the window answers stuck, notified', async () => {
    const w = await openWorld(srv, { pruner: false });
    w.ctl.setAuto();
    w.writer.startTurn();
    toolStep(w, { open: true, result: textOfTokens(7000) });
    const action = await w.engine.onRequestError(srv.overflowError);
    expect(action).toMatchObject({ kind: 'fail', reason: 'stuck' });
    expect(w.notes.filter((n) => n.type === 'compaction.skipped')).toEqual([expect.objectContaining({ type: 'compaction.skipped', trigger: 'overflow' })]);
  });

  it('measure() is plain data: serialising it does not walk the session', async () => {
    const w = await openWorld(srv);
    w.ctl.setAuto();
    for (let i = 0; i < 5; i++) toolStep(w);
    const m = w.engine.measure();
    const json = JSON.stringify(m);
    expect(json.length).toBeLessThan(1000);
    expect(json).not.toContain('file');
    expect(JSON.parse(json)).toMatchObject({ totalTokens: m.totalTokens, threshold: m.threshold, contextWindow: 6000 });
    // The live node prices are still there for tools that read them.
    expect(m.prices.priceAt(0)).toBeGreaterThan(0);
  });
});
