/**
 * A crash path for every state of every chart a crash can happen in (test/machines/required.ts):
 * the generated path entering the state soonest runs on the real engine, and as soon as a real
 * actor of the chart enters the state the process "dies" — the engine's actor stops where it is,
 * no service runs any more, the session file is released. The session is reopened from the same
 * JsonlStore: nothing written is lost (a torn tail, when the path broke the store, is set aside),
 * the messages are a valid request, `recover()` runs when the reopened session needs it, and a new
 * engine over it compacts again.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Session } from '../../src/session/session';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { SPECS, allCoverage } from './catalogs';
import { crashPathFor } from './crash-paths';
import { crashStates } from './required';
import { attachEngine, cleanupWorlds, clearCrashPlan, endTurn, planCrash, startServer, startTurn, toolStep, type Server } from './runner';
import { RUNNERS } from './runners';

let srv: Server;
beforeAll(async () => {
  srv = await startServer();
});
afterAll(() => srv.close());
afterEach(async () => {
  clearCrashPlan();
  await cleanupWorlds();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const spec of SPECS) {
  const c = allCoverage().get(spec.name)!;
  const byKey = new Map(c.all.map((t) => [t.key, t]));
  describe(`${spec.name} chart: a crash in every state`, () => {
    for (const state of crashStates(spec.machine).states) {
      const found = crashPathFor(c, state);
      it(`crash while ${state}${found ? ` — ${found.path.title}` : ''}`, async () => {
        expect(found, `a generated path entering ${state}`).toBeDefined();
        const plan = planCrash(spec.name, state);
        const run = RUNNERS[spec.name]!(srv, found!.path, byKey).then(
          () => undefined,
          (err: unknown) => err,
        );
        await Promise.race([plan.done, run]);
        expect(plan.crashed, `a real ${spec.name} actor entered ${state}`).toBe(true);
        await plan.done;
        await plan.closed;
        await Promise.race([run, sleep(300)]); // the script notices the dead process (or is left waiting)
        const w = plan.world!;

        const reopened = await Session.open(w.store, w.id);
        const events = reopened.events().map((e) => JSON.stringify(e));
        if (reopened.loadReport.tornTail) expect(plan.live.slice(0, events.length)).toEqual(events);
        else expect(events).toEqual(plan.live);
        expect(openAIMessageProblems(reopened.deriveMessages())).toEqual([]);
        if (reopened.needsRecovery) reopened.recover();
        expect(reopened.needsRecovery).toBe(false);
        expect(reopened.lock.held).toBe(false);

        // A new engine over the reopened session: the agent carries on, and compaction works.
        clearCrashPlan();
        srv.queue.length = 0; // scripted replies the dead process never asked for
        const w2 = attachEngine(srv, { dir: w.dir, store: w.store, id: w.id, session: reopened });
        w2.ctl.setAuto();
        if (reopened.deriveMessages()[0]?.role !== 'system') {
          // A world that never routed a request (the path's `unrouted` reading): the agent cannot
          // add a system prompt after its messages, so there is nothing to compact; the engine answers.
          expect((await w2.engine.afterStep()).status).toBe('skipped');
        } else {
          for (const text of ['Continue.', 'And now the tests.']) {
            startTurn(w2, text);
            for (let i = 0; i < 2; i++) toolStep(w2);
            endTurn(w2);
          }
          const record = await w2.engine.compactNow();
          expect(record).not.toBeNull();
        }
        expect(reopened.lock.held).toBe(false);
        expect(openAIMessageProblems(reopened.deriveMessages())).toEqual([]);
        w2.engine.stop();
        await reopened.close();
      });
    }
  });
}
