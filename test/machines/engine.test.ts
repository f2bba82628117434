/**
 * Every transition of the engine chart, by paths generated from the chart, run on the real
 * engine (see suite-engine.ts).
 */
import { describe, expect, it } from 'vitest';
import { describeGeneratedPaths, useServer } from './describe';
import {
  expectLogOnlyGrew,
  expectReplays,
  expectValidRequest,
  fillAbove,
  markRun,
  newEvents,
  openWorld,
  startTurn,
  summaryRequests,
  takeLock,
  toolStep,
  type World,
} from './runner';
import { runEnginePath } from './suite-engine';

const server = useServer();
describeGeneratedPaths('engine', server, runEnginePath);

/**
 * The breaker counts failures of compaction, not a compaction that could not run: `busy`
 * (another writer holds the lock) and `cancelled` leave it where it was. Each case sits
 * between real failures (the server answers 500), so a miscount shows as a breaker that
 * opens one failure early.
 */
describe('the breaker does not count a busy automatic compaction', () => {
  const SERVER_500 = {
    kind: 'status' as const,
    status: 500,
    body: { error: { message: 'The server had an error', type: 'server_error', param: null, code: null } },
  };
  const breaker = (w: World) => {
    const s = w.engine.actor.getSnapshot();
    return { state: (s.value as { breaker: string }).breaker, failures: s.context.consecutiveFailures };
  };
  /** Engine transitions taken since `from` (in `w.recorded`), by name. */
  const engineFired = (w: World, from: number) =>
    w.recorded
      .slice(from)
      .filter((r) => r.machine === 'engine')
      .flatMap((r) => r.transitions.map((t) => t.name));

  it('pressure: a transaction refused busy (another writer holds the lock) is not a failure', async () => {
    const w = await openWorld(server(), { pruner: false, config: { circuitBreaker: { failureLimit: 2, cooldownMs: 1000 } } });
    w.ctl.setAuto();
    fillAbove(w, 100);

    // 1. A real failure: counted.
    server().queue.push(SERVER_500);
    const first = await w.engine.afterStep();
    expect(first.status).toBe('failed');
    expect(first.error?.code).toBe('summary');
    expect(breaker(w)).toEqual({ state: 'closed', failures: 1 });

    // 2. Another writer's compaction/start: the transaction is refused busy, nothing is written.
    const lock = takeLock(w);
    markRun(w);
    const busy = await w.engine.afterStep();
    expect(busy.status).toBe('failed');
    expect(busy.error?.code).toBe('busy');
    expect(busy.compactions).toEqual([]);
    expect(newEvents(w)).toEqual([]);
    expect(summaryRequests(w)).toHaveLength(0);
    expect(w.ctl.calls.map((c) => c.service).slice(-3)).toEqual(['measure', 'selectRange', 'validateSpan']);
    // Not counted: no breaker event was raised, the count stays at 1, nothing announced.
    const fired = engineFired(w, w.mark);
    expect(fired.some((n) => n.includes('breaker.failure'))).toBe(false);
    expect(fired).toContain('engine: work.pressure --done(job)--> work.idle');
    expect(breaker(w)).toEqual({ state: 'closed', failures: 1 });
    expect(w.notes.filter((n) => n.type === 'breaker.opened')).toEqual([]);

    // 3. The other writer finishes; the next real failure is the second, and opens the breaker.
    w.session.append({
      type: 'compaction/end',
      data: { turn: lock.type === 'compaction/start' ? lock.data.turn : null, error: { code: 'cancelled', message: 'the other writer stopped' } },
    });
    server().queue.push(SERVER_500);
    const third = await w.engine.afterStep();
    expect(third.status).toBe('failed');
    expect(breaker(w)).toEqual({ state: 'open', failures: 2 });
    expect(w.notes.filter((n) => n.type === 'breaker.opened')).toEqual([{ type: 'breaker.opened', consecutiveFailures: 2, cooldownMs: 1000 }]);
    expect((await w.engine.afterStep()).status).toBe('paused');

    expectLogOnlyGrew(w);
    expect(w.session.lock.held).toBe(false);
    expectValidRequest(w);
    await (await expectReplays(w)).close();
  });

  it('overflow: recovery whose transaction is refused busy is not a failure; one whose summary fails is', async () => {
    const w = await openWorld(server(), { config: { circuitBreaker: { failureLimit: 1, cooldownMs: 1000 } } });
    startTurn(w);
    toolStep(w);
    toolStep(w);
    toolStep(w, { open: true });
    markRun(w);

    // The lock is free when recovery probes it; another writer takes it before the span is validated.
    const running = w.engine.onRequestError(server().overflowError);
    for (const s of ['classify', 'probeLock', 'prune', 'selectRange'] as const) await (await w.ctl.take(s, running)).runReal();
    const validate = await w.ctl.take('validateSpan', running);
    const lock = takeLock(w);
    await validate.runReal();
    w.ctl.setAuto();
    const action = await running;
    // Reported busy (another writer's lock), not a failure of compaction.
    expect(action).toMatchObject({ kind: 'fail', reason: 'busy', error: server().overflowError });
    expect(newEvents(w).map((e) => e.type)).toEqual(['compaction/start']); // the other writer's only
    expect(summaryRequests(w)).toHaveLength(0);
    // failureLimit 1: a counted failure would have opened the breaker.
    expect(engineFired(w, w.mark).some((n) => n.includes('breaker.failure'))).toBe(false);
    expect(breaker(w)).toEqual({ state: 'closed', failures: 0 });
    expect(w.notes.filter((n) => n.type === 'breaker.opened')).toEqual([]);

    // The other writer finishes; a recovery whose summary fails is counted, and opens it.
    w.session.append({
      type: 'compaction/end',
      data: { turn: lock.type === 'compaction/start' ? lock.data.turn : null, error: { code: 'cancelled', message: 'the other writer stopped' } },
    });
    toolStep(w, { open: true });
    server().queue.push(SERVER_500);
    const failed = await w.engine.onRequestError(server().overflowError);
    expect(failed).toMatchObject({ kind: 'fail', reason: 'summary-failed', compactionError: { code: 'summary' } });
    expect(breaker(w)).toEqual({ state: 'open', failures: 1 });
    expect(w.notes.filter((n) => n.type === 'breaker.opened')).toHaveLength(1);

    expectLogOnlyGrew(w);
    expect(w.session.lock.held).toBe(false);
    expectValidRequest(w);
    await (await expectReplays(w)).close();
  });
});
