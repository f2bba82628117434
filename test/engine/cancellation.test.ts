/**
 * Cancellation from every waiting state: the engine is held in the state (its service call
 * deferred), the caller's signal aborts, and the user must see: the summary HTTP request
 * aborted (OpenAISummarizer against the local server, which hangs), no summary committed
 * after the abort, the lock released (exactly one compaction/end {cancelled} for a
 * transaction that had written its compaction/start), and the facade's cancelled answer.
 *
 * Some steps run to completion whatever a cancel says (the transaction validating its span or
 * opening its bracket, overflow recovery probing the lock, pruning, selecting): the chart
 * notes the cancel and the decision after the step honours it, so no summary request is made
 * after the abort and nothing new starts. A commit already under way is kept.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CompactionError, type AfterStepResult, type CompactionRecord, type RequestErrorAction } from '../../src/engine/facade';
import { COMPACTION_CHECKPOINT_SOURCE } from '../../src/session/events';
import { Session } from '../../src/session/session';
import {
  attachEngine,
  cleanupWorlds,
  endTurn,
  expectLogOnlyGrew,
  expectReplays,
  expectValidRequest,
  fillAbove,
  markRun,
  openWorld,
  startServer,
  startTurn,
  summaryOfTokens,
  summaryRequests,
  toolStep,
  type Call,
  type Server,
  type ServiceName,
  type World,
} from '../machines/runner';

type Host = 'pressure' | 'overflow' | 'manual';
type Answer = AfterStepResult | RequestErrorAction | CompactionRecord | null | CompactionError;

const OVERSIZED = Array.from({ length: 1500 }, (_, i) => `row ${i}: ok`).join('\n');
const TX = ['validateSpan', 'openBracket'] as const;
const COMMIT = ['validateSpan', 'openBracket', 'summarize', 'revalidate', 'commit', 'flush'] as const;

interface Case {
  host: Host;
  state: string;
  prune?: boolean;
  /** Calls that run for real before the held one. */
  before: readonly ServiceName[];
  hold: ServiceName;
  /** The held call is never answered (its actor is gone); by default it answers late, for real. */
  abandon?: boolean;
}

const CASES: Case[] = [
  { host: 'pressure', state: 'measuring', before: [], hold: 'measure' },
  { host: 'pressure', state: 'pruning', prune: true, before: ['measure'], hold: 'prune', abandon: true },
  { host: 'pressure', state: 'remeasuringAfterPrune', prune: true, before: ['measure', 'prune'], hold: 'measure' },
  { host: 'pressure', state: 'selecting', before: ['measure'], hold: 'selectRange' },
  { host: 'pressure', state: 'compacting › transaction summarizing', before: ['measure', 'selectRange', ...TX], hold: 'summarize' },
  { host: 'pressure', state: 'compacting › transaction revalidating', before: ['measure', 'selectRange', ...TX, 'summarize'], hold: 'revalidate' },
  { host: 'pressure', state: 'remeasuring', before: ['measure', 'selectRange', ...COMMIT], hold: 'measure' },
  { host: 'overflow', state: 'classifying', before: [], hold: 'classify' },
  { host: 'overflow', state: 'compacting › transaction summarizing', before: ['classify', 'probeLock', 'prune', 'selectRange', ...TX], hold: 'summarize' },
  { host: 'overflow', state: 'deciding', before: ['classify', 'probeLock', 'prune', 'selectRange', ...COMMIT], hold: 'probeLock' },
  { host: 'manual', state: 'admitting', before: [], hold: 'checkAdmission' },
  { host: 'manual', state: 'selecting', before: ['checkAdmission'], hold: 'selectRange' },
  { host: 'manual', state: 'compacting › transaction summarizing', before: ['checkAdmission', 'selectRange', ...TX], hold: 'summarize' },
  { host: 'manual', state: 'compacting › transaction revalidating', before: ['checkAdmission', 'selectRange', ...TX, 'summarize'], hold: 'revalidate' },
];

/** States whose step runs to completion: the held call answers after the abort, and the next decision honours the cancel. */
const NOTED: Case[] = [
  { host: 'pressure', state: 'compacting › transaction validating', before: ['measure', 'selectRange'], hold: 'validateSpan' },
  { host: 'pressure', state: 'compacting › transaction opening', before: ['measure', 'selectRange', 'validateSpan'], hold: 'openBracket' },
  { host: 'overflow', state: 'probingLock', before: ['classify'], hold: 'probeLock' },
  { host: 'overflow', state: 'pruning', before: ['classify', 'probeLock'], hold: 'prune' },
  { host: 'overflow', state: 'selecting', before: ['classify', 'probeLock', 'prune'], hold: 'selectRange' },
  { host: 'overflow', state: 'compacting › transaction validating', before: ['classify', 'probeLock', 'prune', 'selectRange'], hold: 'validateSpan' },
  {
    host: 'overflow',
    state: 'compacting › transaction opening',
    before: ['classify', 'probeLock', 'prune', 'selectRange', 'validateSpan'],
    hold: 'openBracket',
  },
  { host: 'manual', state: 'compacting › transaction validating', before: ['checkAdmission', 'selectRange'], hold: 'validateSpan' },
  { host: 'manual', state: 'compacting › transaction opening', before: ['checkAdmission', 'selectRange', 'validateSpan'], hold: 'openBracket' },
];

let srv: Server;
beforeAll(async () => {
  srv = await startServer();
});
afterAll(() => srv.close());
afterEach(cleanupWorlds);

async function world(c: Pick<Case, 'host' | 'prune'>): Promise<World> {
  const w = await openWorld(srv, c.host === 'pressure' && !c.prune ? { pruner: false } : {});
  if (c.host === 'pressure') fillAbove(w, 100);
  else if (c.host === 'overflow') {
    startTurn(w);
    toolStep(w, { result: OVERSIZED });
    toolStep(w);
    toolStep(w, { open: true });
  } else {
    startTurn(w);
    for (let i = 0; i < 4; i++) toolStep(w);
    endTurn(w);
  }
  return w;
}

function start(w: World, host: Host, signal: AbortSignal): Promise<Answer> {
  if (host === 'pressure') return w.engine.afterStep({ signal });
  if (host === 'overflow') return w.engine.onRequestError(w.srv.overflowError, { signal });
  return w.engine.compactNow({ signal }).catch((err: unknown) => err as CompactionError);
}

/** Runs the engine up to the held call; returns it (unsettled). */
async function holdAt(w: World, running: Promise<unknown>, c: Pick<Case, 'before' | 'hold'>): Promise<Call> {
  for (const s of c.before) await (await w.ctl.take(s, running)).runReal();
  return w.ctl.take(c.hold, running);
}

function expectCancelledAnswer(host: Host, answer: Answer): void {
  if (host === 'pressure') {
    expect((answer as AfterStepResult).status).toBe('cancelled');
  } else if (host === 'overflow') {
    expect(answer).toMatchObject({ kind: 'fail', reason: 'cancelled', error: srv.overflowError });
  } else {
    expect(answer).toBeInstanceOf(CompactionError);
    expect((answer as CompactionError).code).toBe('cancelled');
  }
}

/**
 * When the held call is the summary, lets it go out for real against a server that never
 * answers: the summary request is then in flight. Returns its index in the server's log.
 */
async function summaryInFlight(call: Awaited<ReturnType<typeof holdAt>>, c: Case): Promise<number | undefined> {
  if (c.hold !== 'summarize') return undefined;
  srv.queue.push({ kind: 'hang' });
  const request = srv.server.requests.length;
  void call.runReal();
  await srv.server.waitForRequest(request);
  return request;
}

/** The abort, at the held call; returns what the user can observe afterwards. */
async function cancelAt(c: Case) {
  const w = await world(c);
  markRun(w);
  const controller = new AbortController();
  const running = start(w, c.host, controller.signal);
  const call = await holdAt(w, running, c);
  const request = await summaryInFlight(call, c);
  const logAtAbort = w.session.length;
  const requestsAtAbort = srv.server.requests.length;
  controller.abort(new Error('user pressed Ctrl-C'));
  if (c.abandon) call.reject(new Error('abandoned: its actor was stopped'));
  else if (c.hold !== 'summarize') w.ctl.putBack(call);
  w.ctl.setAuto();
  const answer = await running;
  return { w, answer, logAtAbort, requestsAtAbort, request };
}

function expectLockReleased(w: World): void {
  const added = w.session.events().slice(w.logMark.length);
  const starts = added.filter((e) => e.type === 'compaction/start').length;
  expect(added.filter((e) => e.type === 'compaction/end')).toHaveLength(starts);
  expect(w.session.lock.held).toBe(false);
}

type Observed = Awaited<ReturnType<typeof cancelAt>>;

/** What every cancelled run must show the user. */
async function expectCancelledRun(c: Case, { w, answer, logAtAbort, requestsAtAbort, request }: Observed): Promise<void> {
  expectCancelledAnswer(c.host, answer);

  // The summary request in flight was aborted; no new one was started after the abort.
  if (request !== undefined) expect((await srv.server.waitForClose(request)).aborted).toBe(true);
  expect(srv.server.requests.length).toBe(requestsAtAbort);

  // Nothing was committed after the abort; a transaction that had opened (or was opening) closed as cancelled.
  const afterAbort = w.session.events().slice(logAtAbort);
  expect(afterAbort.some((e) => e.type === 'compaction/summary' || (e.type === 'user/message' && e.data.source === COMPACTION_CHECKPOINT_SOURCE))).toBe(false);
  const opened = (c.before.includes('openBracket') || c.hold === 'openBracket') && !c.before.includes('commit');
  const ends = afterAbort.filter((e) => e.type === 'compaction/end');
  if (opened) {
    expect(ends).toHaveLength(1);
    expect(ends[0]!.type === 'compaction/end' && ends[0]!.data.error?.code).toBe('cancelled');
  } else {
    expect(ends).toHaveLength(0);
  }
  expectLockReleased(w);

  // A commit made before the abort stays, and is reported.
  const committedBefore = c.before.includes('commit');
  expect(
    w.session
      .events()
      .slice(w.logMark.length)
      .some((e) => e.type === 'compaction/summary'),
  ).toBe(committedBefore);
  if (c.host === 'pressure') expect((answer as AfterStepResult).compactions).toHaveLength(committedBefore ? 1 : 0);

  expectLogOnlyGrew(w);
  expectValidRequest(w);
  await (await expectReplays(w)).close();
}

describe('cancel in every waiting state', () => {
  for (const c of CASES) {
    it(`${c.host}: ${c.state}`, async () => expectCancelledRun(c, await cancelAt(c)));
  }
});

describe('a cancel during a step that runs to completion is honoured by the next decision', () => {
  for (const c of NOTED) {
    it(`${c.host}: an abort while ${c.state} stops it before the summary request`, async () => {
      const observed = await cancelAt(c);
      const { w, requestsAtAbort, logAtAbort } = observed;
      expect(srv.server.requests.length).toBe(requestsAtAbort);

      // The held step finished, then nothing new started.
      const services = w.ctl.calls.map((x) => x.service);
      const held = services.lastIndexOf(c.hold);
      const after = services.slice(held + 1);
      const added = w.session
        .events()
        .slice(logAtAbort)
        .map((e) => e.type);
      if (c.hold === 'validateSpan') {
        // Rejected: nothing written, no bracket.
        expect(after.filter((s) => s !== 'probeLock')).toEqual([]);
        expect(added).toEqual([]);
      } else if (c.hold === 'openBracket') {
        // The lock was taken as the cancel arrived: it is closed at once, no summary asked for.
        expect(after.filter((s) => s !== 'probeLock')).toEqual(['closeWithError']);
        expect(added).toEqual(['compaction/start', 'compaction/end']);
        // Listeners see the pair: started (the lock was taken), then failed as cancelled.
        const pair = w.notes.filter((n) => n.type === 'compaction.started' || n.type === 'compaction.failed');
        expect(pair.map((n) => n.type)).toEqual(['compaction.started', 'compaction.failed']);
        expect(pair.map((n) => n.type === 'compaction.failed' && n.error.code)).toEqual([false, 'cancelled']);
      } else if (c.hold === 'probeLock') {
        // Declined at once: no prune, no selection, nothing written.
        expect(after).toEqual([]);
        expect(added).toEqual([]);
      } else {
        // Only the final generation check follows; a prune under way is kept (its rewritten results too).
        expect(after).toEqual(['probeLock']);
        if (c.hold === 'prune') expect(added).toContain('compaction/prune');
        else expect(added).toEqual([]);
        expect(added.filter((t) => t.startsWith('compaction/') && t !== 'compaction/prune')).toEqual([]);
      }
      await expectCancelledRun(c, observed);
    });
  }
});

describe('cancel where it is too late by design', () => {
  it('pressure: while the transaction commits, the checkpoint is committed, durable and reported', async () => {
    const w = await world({ host: 'pressure' });
    markRun(w);
    const controller = new AbortController();
    const running = start(w, 'pressure', controller.signal);
    const call = await holdAt(w, running, { before: ['measure', 'selectRange', 'validateSpan', 'openBracket', 'summarize', 'revalidate'], hold: 'commit' });
    controller.abort();
    w.ctl.putBack(call);
    w.ctl.setAuto();
    const answer = (await running) as AfterStepResult;
    // Kept and reported, but nothing new starts after it: no remeasure, no retry.
    expect(answer.status).toBe('cancelled');
    expect(answer.error).toBeUndefined();
    expect(answer.compactions).toHaveLength(1);
    expect(w.ctl.calls.map((x) => x.service).at(-1)).toBe('flush');
    expect(
      w.session
        .events()
        .slice(w.logMark.length)
        .map((e) => e.type),
    ).toEqual(['compaction/start', 'compaction/summary', 'user/message', 'compaction/end']);
    expectLockReleased(w);
    const reopened = await expectReplays(w);
    expect(reopened.lock.held).toBe(false);
    await reopened.close();
  });
});

describe('a cancel that comes too late for the commit still stops what would follow it', () => {
  it('pressure: an abort during the commit (too late for it) stops the convergence retry that would follow', async () => {
    // Summaries that barely shrink: after attempt 1 pressure is still above, with an attempt left.
    const w = await openWorld(srv, { pruner: false, config: { minProgressRatio: 0 } });
    fillAbove(w);
    w.ctl.setAuto();
    expect((await w.engine.afterStep()).status).toBe('compacted');
    w.ctl.hold();
    fillAbove(w, 150);
    markRun(w);
    const controller = new AbortController();
    const running = start(w, 'pressure', controller.signal);
    await holdAt(w, running, { before: ['measure'], hold: 'selectRange' }).then(async (call) => {
      await call.runReal();
      const range = call.output as { tokens: number };
      // One summary only: a retry would be the second request.
      srv.queue.push({ kind: 'reply', content: summaryOfTokens(range.tokens - 15) });
    });
    const commit = await holdAt(w, running, { before: ['validateSpan', 'openBracket', 'summarize', 'revalidate'], hold: 'commit' });
    const requestsAtAbort = srv.server.requests.length;
    controller.abort();
    w.ctl.putBack(commit);
    w.ctl.setAuto();
    const answer = (await running) as AfterStepResult;
    expect(srv.server.requests.length).toBe(requestsAtAbort);
    expect(srv.queue).toHaveLength(0);

    // The commit is kept and reported; no remeasure, no second selection, no second bracket.
    expect(answer.status).toBe('cancelled');
    expect(answer.error).toBeUndefined();
    expect(answer.compactions).toHaveLength(1);
    expect(answer.compactions[0]!.tokensAfter).toBeLessThan(answer.compactions[0]!.tokensBefore);
    expect(w.ctl.calls.map((x) => x.service).slice(-2)).toEqual(['commit', 'flush']);
    expect(w.ctl.calls.filter((x) => x.service === 'selectRange')).toHaveLength(2); // the run before, and this one
    expect(
      w.session
        .events()
        .slice(w.logMark.length)
        .map((e) => e.type),
    ).toEqual(['compaction/start', 'compaction/summary', 'user/message', 'compaction/end']);
    expectLockReleased(w);
    expectLogOnlyGrew(w);
    expectValidRequest(w);
    await (await expectReplays(w)).close();
  });
});

describe('a signal already aborted', () => {
  it('pressure: afterStep with an already aborted signal compacts nothing', async () => {
    const w = await world({ host: 'pressure' });
    markRun(w);
    w.ctl.setAuto();
    const messagesBefore = JSON.stringify(w.session.deriveMessages());
    const controller = new AbortController();
    controller.abort();
    const answer = await w.engine.afterStep({ signal: controller.signal });
    expect(summaryRequests(w)).toHaveLength(0);
    expect(answer.status).toBe('cancelled');
    expect(answer.error).toBeUndefined();
    expect(answer.compactions).toEqual([]);
    // Not even a measurement: the engine called no service and wrote nothing.
    expect(w.ctl.calls).toHaveLength(0);
    expect(w.session.events().slice(w.logMark.length)).toEqual([]);
    expect(JSON.stringify(w.session.deriveMessages())).toBe(messagesBefore);
    // The engine is free again: the next step compacts.
    const next = await w.engine.afterStep();
    expect(next.status).toBe('compacted');
    expectLockReleased(w);
    await (await expectReplays(w)).close();
  });
});

/**
 * `engine.stop()` is a graceful stop (a host shutting down, not a dead process: that is
 * `engine.actor.stop()`, see crash.test.ts). The running compaction is cancelled where it
 * waits: the summary request is aborted, the call in flight rejects `engine-stopped`, and a
 * bracket this engine opened is closed with one compaction/end {cancelled}, so the session
 * reopens with no orphan lock and compacts again without `recover()`.
 */
describe('engine.stop(): a graceful stop closes what this engine opened', () => {
  const STOPS: Array<Case & { bracket: boolean }> = [
    { host: 'manual', state: 'selecting', before: ['checkAdmission'], hold: 'selectRange', bracket: false },
    { host: 'manual', state: 'compacting › transaction summarizing', before: ['checkAdmission', 'selectRange', ...TX], hold: 'summarize', bracket: true },
    {
      host: 'manual',
      state: 'compacting › transaction revalidating',
      before: ['checkAdmission', 'selectRange', ...TX, 'summarize'],
      hold: 'revalidate',
      bracket: true,
    },
    {
      host: 'overflow',
      state: 'compacting › transaction summarizing',
      before: ['classify', 'probeLock', 'prune', 'selectRange', ...TX],
      hold: 'summarize',
      bracket: true,
    },
  ];
  for (const c of STOPS) {
    it(`${c.host}: stopped while ${c.state}`, async () => {
      const w = await world(c);
      markRun(w);
      const running = start(w, c.host, new AbortController().signal).then(
        (v) => ({ settled: v }),
        (err: unknown) => ({ rejected: err }),
      );
      const call = await holdAt(w, running, c);
      const request = await summaryInFlight(call, c);
      const logAtStop = w.session.length;
      const messagesAtStop = JSON.stringify(w.session.deriveMessages()); // (overflow: after its prune)
      const requestsAtStop = srv.server.requests.length;
      w.engine.stop();
      if (c.hold !== 'summarize') void call.runReal(); // a late answer to a stopped actor: dropped

      // The facade call is rejected (start() hands compactNow's rejection back as its value).
      const outcome = (await running) as { settled?: unknown; rejected?: unknown };
      expect(outcome.rejected ?? outcome.settled).toMatchObject({ code: 'engine-stopped' });
      if (request !== undefined) expect((await srv.server.waitForClose(request)).aborted, 'the summary HTTP request was aborted').toBe(true);
      expect(srv.server.requests.length).toBe(requestsAtStop);

      // The log: one compaction/end {cancelled} for the bracket this engine opened; nothing else.
      const added = w.session.events().slice(logAtStop);
      if (c.bracket) {
        expect(added.map((e) => e.type)).toEqual(['compaction/end']);
        expect(added[0]!.type === 'compaction/end' && added[0].data.error?.code).toBe('cancelled');
      } else {
        expect(added).toEqual([]);
      }
      expect(w.session.lock.held).toBe(false);
      expect(JSON.stringify(w.session.deriveMessages())).toBe(messagesAtStop);
      expectLogOnlyGrew(w);
      expectValidRequest(w);

      // Reopened: no orphan lock (between turns, nothing to recover); the next compaction runs.
      const live = w.session.events().map((e) => JSON.stringify(e));
      await w.session.close();
      const reopened = await Session.open(w.store, w.id);
      expect(reopened.events().map((e) => JSON.stringify(e))).toEqual(live);
      expect(reopened.lock.held).toBe(false);
      expect(reopened.needsRecovery).toBe(c.host === 'overflow'); // the overflow host's step is still open
      if (c.host === 'manual') {
        const w2 = attachEngine(srv, { dir: w.dir, store: w.store, id: w.id, session: reopened });
        w2.ctl.setAuto();
        expect(await w2.engine.compactNow()).not.toBeNull();
        w2.engine.stop();
      }
      await reopened.close();
    });
  }

  it('a lock another writer holds is left alone', async () => {
    const w = await world({ host: 'manual' });
    const foreign = w.session.append({ type: 'compaction/start', data: { turn: null, trigger: 'manual' } });
    w.ctl.setAuto();
    await expect(w.engine.compactNow()).rejects.toMatchObject({ code: 'busy' });
    const length = w.session.length;
    w.engine.stop();
    expect(w.session.length).toBe(length);
    expect(w.session.lock).toMatchObject({ held: true, startSeq: foreign.seq });
    await w.session.close();
  });
});
