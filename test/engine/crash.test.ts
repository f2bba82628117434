/**
 * Crash paths: for every state of the transaction chart, a compaction is driven into that
 * state and held there (its service call deferred), then the process "dies": the engine's
 * actor is stopped where it is and the session file is released. The session is reopened
 * from the same JsonlStore and must show: nothing that was written is lost, the surface is
 * as before the transaction (or the committed result when the crash came after the
 * commit), an orphan lock when a compaction/start has no end, compactNow refusing with
 * `busy` until `recover()` clears it, and then a compaction that succeeds.
 *
 * Two hosts: manual compaction between turns (so `busy` can only come from the lock) and
 * pressure compaction mid-step (the crash also leaves a step and a turn open).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { XcompactError } from '../../src/errors';
import { COMPACTION_CHECKPOINT_SOURCE } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { transactionMachine } from '../../src/machines/transaction';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { attachEngine, cleanupWorlds, endTurn, fillAbove, openWorld, startTurn, startServer, toolStep, type Server, type World } from '../machines/runner';
import { settleTxStep, takeRange, TX_SUBSCRIPTS, type RunCtx, type TxStep } from '../machines/tx-outcomes';

type Host = 'manual' | 'pressure';

const S = (outcome: string, from: string): TxStep => ({ outcome, from });
const OK = TX_SUBSCRIPTS.committed!;
const FAIL = TX_SUBSCRIPTS.failed!;

/** How to reach each state: the steps settled before it, and the call held there. */
const REACH: Record<
  string,
  { steps: TxStep[]; hold?: 'validateSpan' | 'openBracket' | 'summarize' | 'truncate' | 'revalidate' | 'commit' | 'flush' | 'closeWithError' }
> = {
  validating: { steps: [], hold: 'validateSpan' },
  opening: { steps: OK.slice(0, 1), hold: 'openBracket' },
  summarizing: { steps: OK.slice(0, 2), hold: 'summarize' },
  revalidating: { steps: OK.slice(0, 3), hold: 'revalidate' },
  committing: { steps: OK.slice(0, 4), hold: 'commit' },
  flushing: { steps: OK.slice(0, 5), hold: 'flush' },
  closing: { steps: FAIL.slice(0, 3), hold: 'closeWithError' },
  // Pressure compaction with truncationFallback on: the summary failed, the truncation of the same span is under way.
  truncating: { steps: [...FAIL, S('validateSpan:lock-free', 'validating'), S('openBracket:opened', 'opening')], hold: 'truncate' },
  committed: { steps: OK },
  failed: { steps: FAIL },
  persistenceFailed: { steps: [...OK.slice(0, 4), S('commit:committed', 'committing'), S('flush:store-fails', 'flushing')] },
  rejected: { steps: [S('validateSpan:span-invalid', 'validating')] },
};

const STATES = Object.keys(transactionMachine.root.states);
/** A manual compaction never truncates (the user asked for a summary): its host cannot reach that state. */
const statesOf = (host: Host) => (host === 'manual' ? STATES.filter((s) => s !== 'truncating') : STATES);

let srv: Server;
beforeAll(async () => {
  srv = await startServer();
});
afterAll(() => srv.close());
afterEach(cleanupWorlds);

/** The transaction actor's state: live if it is running, else where its last transition went. */
function transactionState(w: World): string | undefined {
  const job = w.engine.actor.getSnapshot().children.job as
    { getSnapshot(): { children: Record<string, { getSnapshot(): { value: unknown } } | undefined> } } | undefined;
  const tx = job?.getSnapshot().children.transaction;
  if (tx) return String(tx.getSnapshot().value);
  const last = w.recorded.filter((r) => r.machine === 'transaction').at(-1);
  return last?.transitions.at(-1)?.targets[0];
}

async function crashIn(state: string, host: Host) {
  const reach = REACH[state]!;
  const w = await openWorld(srv, host === 'pressure' ? { pruner: false, ...(state === 'truncating' ? { config: { truncationFallback: true } } : {}) } : {});
  if (host === 'manual') {
    startTurn(w);
    for (let i = 0; i < 5; i++) toolStep(w);
    endTurn(w);
  } else {
    fillAbove(w, 100);
  }
  const before = { messages: JSON.stringify(w.session.deriveMessages()), length: w.session.length };

  const controller = new AbortController();
  const running: Promise<unknown> = (
    host === 'manual' ? w.engine.compactNow({ signal: controller.signal }) : w.engine.afterStep({ signal: controller.signal })
  ).then(
    (v) => ({ settled: v }),
    (err: unknown) => ({ rejected: err }),
  );
  const ctx: RunCtx = { abort: () => controller.abort(), running, range: undefined, summaryFailure: 'http-500' };
  if (host === 'manual') await (await w.ctl.take('checkAdmission', running)).runReal();
  else await (await w.ctl.take('measure', running)).runReal();
  await takeRange(w, ctx);
  // (persistenceFailed: the commit step breaks the store first, as the flush step after it asks.)
  for (let i = 0; i < reach.steps.length; i++) await settleTxStep(w, reach.steps[i]!, reach.steps[i + 1], ctx);
  let summaryRequest: number | undefined;
  if (reach.hold) {
    const call = await w.ctl.take(reach.hold, running);
    if (reach.hold === 'summarize') {
      // The summary request is in flight when the process dies.
      srv.queue.push({ kind: 'hang' });
      summaryRequest = srv.server.requests.length;
      void call.runReal();
      await srv.server.waitForRequest(summaryRequest);
    }
  } else if (host === 'pressure' && state !== 'persistenceFailed' && state !== 'failed' && state !== 'rejected') {
    // After the commit the pressure chart measures again: the process dies there.
    await w.ctl.take('measure', running);
  } else {
    await running;
  }
  expect(transactionState(w)).toBe(state);

  // In memory at the moment of the crash.
  const live = { events: w.session.events().map((e) => JSON.stringify(e)), messages: JSON.stringify(w.session.deriveMessages()) };

  // The crash: the actor stops where it is (no cleanup code runs, as in a dead process), the file is released.
  w.engine.actor.stop();
  await w.session.close().catch(() => undefined); // after a store failure the close reports it, and still releases
  const outcome = (await running) as { settled?: unknown; rejected?: unknown };
  if (reach.hold || (host === 'pressure' && 'rejected' in outcome)) {
    expect(outcome.rejected).toBeInstanceOf(XcompactError);
    expect((outcome.rejected as XcompactError).code).toBe('engine-stopped');
  }
  if (summaryRequest !== undefined) expect((await srv.server.waitForClose(summaryRequest)).aborted).toBe(true);

  const reopened = await Session.open(w.store, w.id);
  const committed = reopened
    .events()
    .slice(before.length)
    .some((e) => e.type === 'user/message' && e.data.source === COMPACTION_CHECKPOINT_SOURCE);
  return { w, reopened, before, live, committed };
}

for (const host of ['manual', 'pressure'] as const) {
  describe(`a crash in every transaction state (host: ${host} compaction)`, () => {
    it('covers every state of the transaction chart', () => {
      expect(
        Object.keys(REACH)
          .filter((s) => statesOf(host).includes(s))
          .sort(),
      ).toEqual([...statesOf(host)].sort());
      expect(Object.keys(REACH).sort()).toEqual([...STATES].sort());
    });

    for (const state of statesOf(host)) {
      it(`crash while ${state}`, async () => {
        const { w, reopened, before, live, committed } = await crashIn(state, host);
        const events = reopened.events().map((e) => JSON.stringify(e));

        if (state === 'persistenceFailed') {
          // The store refused the commit's lines: what it had before is all there, the torn bytes are set aside.
          expect(reopened.loadReport.tornTail).toBeDefined();
          expect(live.events.slice(0, events.length)).toEqual(events);
          expect(JSON.stringify(reopened.deriveMessages())).toBe(before.messages);
        } else {
          // Nothing written is lost, nothing is added: the replay is the live log.
          expect(events).toEqual(live.events);
          expect(JSON.stringify(reopened.deriveMessages())).toBe(live.messages);
          // Before the commit the surface is as before the transaction (rejected: the world rewrote a node, nothing else).
          if (!committed && state !== 'rejected') expect(live.messages).toBe(before.messages);
        }
        // Crashes after the commit keep exactly the committed result; earlier ones keep none of it.
        expect(committed).toBe(['flushing', 'committed'].includes(state));
        expect(openAIMessageProblems(reopened.deriveMessages())).toEqual([]);

        const orphan = ['summarizing', 'truncating', 'revalidating', 'committing', 'closing', 'persistenceFailed'].includes(state);
        if (orphan) expect(reopened.lock).toMatchObject({ held: true, orphan: true });
        else expect(reopened.lock.held).toBe(false);
        expect(reopened.needsRecovery).toBe(orphan || host === 'pressure');

        // A new engine over the reopened session.
        const w2 = attachEngine(srv, { dir: w.dir, store: w.store, id: w.id, session: reopened });
        w2.ctl.setAuto();
        if (host === 'pressure') {
          // The crash left the step and turn open: /compact is refused for the turn whatever the lock.
          await expect(w2.engine.compactNow()).rejects.toMatchObject({ code: 'busy' });
        } else if (orphan) {
          await expect(w2.engine.compactNow()).rejects.toMatchObject({ code: 'busy', message: expect.stringMatching(/lock/) });
        }
        const startSeq = reopened.lock.held ? reopened.lock.startSeq : undefined;
        const report = reopened.recover();
        expect(report.clearedLock).toBe(startSeq);
        expect(report.closedStep).toBe(host === 'pressure');
        expect(report.closedTurn).toBe(host === 'pressure');
        expect(reopened.lock.held).toBe(false);
        expect(reopened.needsRecovery).toBe(false);

        // The agent carries on; the next compaction succeeds.
        startTurn(w2, 'Continue.');
        for (let i = 0; i < 2; i++) toolStep(w2);
        endTurn(w2);
        const record = await w2.engine.compactNow();
        expect(record).not.toBeNull();
        expect(reopened.lock.held).toBe(false);
        expect(openAIMessageProblems(reopened.deriveMessages())).toEqual([]);
        w2.engine.stop();
        await reopened.close();
      });
    }
  });
}
