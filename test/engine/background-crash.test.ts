/**
 * A crash in every state of the background chart (docs/spec.md#13-background-compaction): the engine actor is stopped where
 * it is (as a dying process leaves it), the JSONL file is reopened, `recover()` clears the
 * orphan background bracket, and a new engine over the reopened session compacts again.
 * Each state is reached by holding the service call it waits on (a promise that never settles).
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { EngineServices } from '../../src/engine/facade';
import { JsonlStore } from '../../src/session/index';
import { Session } from '../../src/session/session';
import { deferredSummarizer, harness, openTurn, recordingSummarizer, type Harness } from '../helpers/engine';
import { removeTempDirs, tempDir } from '../helpers/session';

afterAll(removeTempDirs);

const BG = { headroomTokens: 500, maxTokens: 400, thresholdRatio: 0.8, retainRatio: 0.2, background: true } as const;
const SUMMARY = { text: 'The user asked to fix the build; files were listed.', requests: 1 };
const never = () => new Promise<never>(() => undefined);

type Held = keyof EngineServices | undefined;
interface Case {
  state: string;
  hold: Held;
  /** What happens once the summary is asked for. */
  summary: 'pending' | 'resolve' | 'reject';
  /** A step at the wait point waits (waitingAtThreshold), and is cancelled for `cancelled`. */
  wait?: 'wait' | 'cancel';
  /** The route commits a ready summary at once (backgroundCommit 'ready'): the commit states are reached unasked. */
  commitWhenReady?: boolean;
}

const CASES: Case[] = [
  { state: 'selecting', hold: 'selectRange', summary: 'pending' },
  { state: 'validating', hold: 'validateSpan', summary: 'pending' },
  { state: 'opening', hold: 'openBracket', summary: 'pending' },
  { state: 'summarizing.preparing', hold: undefined, summary: 'pending' },
  { state: 'summarizing.waitingAtThreshold', hold: undefined, summary: 'pending', wait: 'wait' },
  { state: 'ready', hold: 'revalidate', summary: 'resolve' },
  // The summary is ready below the threshold: held, bracket open, lock held.
  { state: 'held', hold: undefined, summary: 'resolve' },
  { state: 'committing', hold: 'commit', summary: 'resolve', commitWhenReady: true },
  { state: 'flushing', hold: 'flush', summary: 'resolve', commitWhenReady: true },
  { state: 'closing', hold: 'closeWithError', summary: 'reject' },
  { state: 'cancelled', hold: 'closeWithError', summary: 'pending', wait: 'cancel' },
];

const backgroundValue = (h: Harness): unknown => {
  const child = (h.engine.actor.getSnapshot().children as Record<string, { getSnapshot(): { value: unknown } } | undefined>).background;
  return child?.getSnapshot().value;
};
const flat = (v: unknown): string => (typeof v === 'string' ? v : Object.entries(v as Record<string, unknown>).map(([k, c]) => `${k}.${flat(c)}`)[0]!);
const until = async (ok: () => boolean) => {
  for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(ok()).toBe(true);
};

describe('a crash in every background state leaves an orphan that recover() clears', () => {
  for (const c of CASES) {
    it(`${c.state}`, async () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      const session = await Session.open(store, 'crash');
      const sum = deferredSummarizer();
      let armed = false;
      const h = harness(
        {
          summarizer: sum,
          config: c.commitWhenReady ? { ...BG, backgroundCommit: 'ready' } : BG,
          services: (d) => {
            if (!c.hold) return {};
            const name = c.hold;
            const real = d[name] as (i: never) => unknown;
            // Held only in the background run (the foreground pressure path shares these services).
            return { [name]: (i: never) => (armed ? never() : real(i)) };
          },
        },
        session,
      );
      openTurn(h);
      let i = 0;
      let pending: Promise<unknown> | undefined;
      for (; i < 40; i++) {
        h.toolStep(i);
        const m = h.engine.measure();
        if (m.totalTokens >= m.threshold! - 10) throw new Error('the threshold came before the prepare point');
        // Arm the hold for the call that reaches the prepare point.
        armed = c.hold === 'selectRange' || c.hold === 'validateSpan' || c.hold === 'openBracket';
        const step = h.engine.afterStep();
        await new Promise((r) => setTimeout(r, 20));
        if (armed && flat(backgroundValue(h) ?? 'idle') === c.state) {
          // The step that starts the run is answered once its bracket opens: held before that, it
          // is still waiting when the crash comes.
          pending = step.catch((e: unknown) => e);
          break;
        }
        const r = await step;
        armed = false;
        h.writer.endStep();
        if (r.status === 'preparing') break;
      }
      if (c.summary !== 'pending' || c.wait) {
        const call = await sum.call(0);
        armed = c.hold !== undefined;
        if (c.summary === 'resolve') call.resolve(SUMMARY);
        if (c.summary === 'reject') call.reject(Object.assign(new Error('the server had an error'), { status: 500 }));
        if (c.wait) {
          // The wait point: past the threshold the request still fits and the agent goes on.
          for (h.toolStep(++i); h.engine.measure().totalTokens < h.engine.measure().waitAt!; h.toolStep(++i)) h.writer.endStep();
          const controller = new AbortController();
          pending = h.engine.afterStep({ signal: controller.signal }).catch((e: unknown) => e);
          await until(() => flat(backgroundValue(h)) === 'summarizing.waitingAtThreshold');
          if (c.wait === 'cancel') controller.abort(new Error('user pressed Ctrl-C'));
        }
      }
      await until(() => flat(backgroundValue(h) ?? 'gone') === c.state);

      // The crash: the actor stops where it is; the file is released.
      const startSeq = h.session.lock.held ? h.session.lock.startSeq : undefined;
      h.engine.actor.stop();
      await pending;
      await h.session.close().catch(() => undefined);

      const reopened = await Session.open(store, 'crash');
      if (reopened.lock.held) {
        expect(reopened.lock).toMatchObject({ orphan: true, startSeq });
        expect(reopened.events().find((e) => e.seq === startSeq)?.data).toMatchObject({ background: true });
      }
      const held = reopened.lock.held ? reopened.lock.startSeq : undefined;
      const report = reopened.recover();
      expect(report.clearedLock).toBe(held);
      expect(reopened.lock.held).toBe(false);

      // A new engine over the reopened session carries on and compacts.
      const h2 = harness({ summarizer: recordingSummarizer(), config: BG }, reopened);
      openTurn(h2, 'Continue.');
      for (let k = 0; k < 3; k++) await h2.step(100 + k);
      h2.writer.endTurn();
      await new Promise((r) => setTimeout(r, 10));
      const record = await h2.engine.compactNow();
      expect(record).not.toBeNull();
      expect(reopened.lock.held).toBe(false);
      h2.engine.stop();
      await reopened.close();
    });
  }
});
