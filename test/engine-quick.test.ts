/**
 * The root chart's quick check (issue 18): a step below the threshold is answered on the
 * engine chart's `step.completed` without starting the pressure chart, with the same answer
 * the pressure chart gives; everything else still runs it.
 */
import type { InspectionEvent } from 'xstate';
import { describe, expect, it } from 'vitest';
import { harness, openTurn, recordingSummarizer, stepUntilPressure, type Harness } from './helpers/engine';

/** Child actors started (anything but the root engine actor) and the root's transitions. */
function watch(): { inspect: (e: InspectionEvent) => void; children: string[]; reset(): void } {
  const w = {
    children: [] as string[],
    inspect(e: InspectionEvent) {
      const ref = e.actorRef as unknown as { id?: string; _parent?: unknown };
      if (e.type === '@xstate.actor' && ref.id !== undefined && ref._parent !== undefined) w.children.push(ref.id);
    },
    reset() {
      w.children.length = 0;
    },
  };
  return w;
}

async function twoEngines(): Promise<{ quick: Harness; full: Harness; watched: ReturnType<typeof watch> }> {
  const watched = watch();
  const quick = harness({ summarizer: recordingSummarizer(), inspect: watched.inspect });
  const full = harness({ summarizer: recordingSummarizer(), quickCheck: false });
  return { quick, full, watched };
}

describe('quick check of a step below the threshold', () => {
  it('answers below without a child actor, with the figures the pressure chart reports', async () => {
    const { quick, full, watched } = await twoEngines();
    for (const h of [quick, full]) openTurn(h);
    for (let i = 0; i < 3; i++) {
      watched.reset();
      const a = await quick.step(i);
      const b = await full.step(i);
      expect(a.status).toBe('below');
      expect(watched.children).toEqual([]);
      expect(a).toEqual(b);
      expect(a.before!.totalTokens).toBe(quick.engine.measure().totalTokens);
    }
  });

  it('still runs the pressure chart above the threshold, and the two engines compact alike', async () => {
    const { quick, full, watched } = await twoEngines();
    for (const h of [quick, full]) openTurn(h);
    watched.reset();
    const a = await stepUntilPressure(quick);
    const b = await stepUntilPressure(full);
    expect(a.result.status).toBe('compacted');
    expect(a.index).toBe(b.index);
    expect(watched.children).toContain('job');
    expect(quick.session.deriveMessages()).toEqual(full.session.deriveMessages());
  });

  it('an already aborted signal is cancelled, automatic compaction off is auto-off, an unrouted session is skipped', async () => {
    const h = harness({ summarizer: recordingSummarizer() });
    expect((await h.engine.afterStep()).status).toBe('skipped');
    openTurn(h);
    h.toolStep(0);
    const controller = new AbortController();
    controller.abort();
    expect((await h.engine.afterStep({ signal: controller.signal })).status).toBe('cancelled');
    expect((await h.engine.afterStep()).status).toBe('below');

    const off = harness({ summarizer: recordingSummarizer(), config: { auto: false } });
    openTurn(off);
    expect((await off.engine.afterStep()).status).toBe('auto-off');
  });

  it('is off when `services` replaces measure: that figure is the one judged', async () => {
    const watched = watch();
    const h = harness({
      summarizer: recordingSummarizer(),
      inspect: watched.inspect,
      services: (d) => ({ measure: (i) => d.measure(i) }),
    });
    openTurn(h);
    const r = await h.step(0);
    expect(r.status).toBe('below');
    expect(watched.children).toContain('job');
  });
});
