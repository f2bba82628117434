/**
 * The root chart's quick check (docs/measured.md): a step below the threshold is answered on the
 * engine chart's `step.completed` without starting the pressure chart, with the same answer
 * the pressure chart gives; everything else still runs it. With background compaction (the
 * default) the limit is the prepare point, and only while no background summary is in flight
 * or waits to be reported.
 */
import type { InspectionEvent } from 'xstate';
import { describe, expect, it } from 'vitest';
import { deferredSummarizer, harness, openTurn, recordingSummarizer, SMALL_CONFIG, stepUntilPressure, type Harness } from '../helpers/engine';

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

/** Resolves once the engine has announced a committed compaction (a background one lands on its own). */
async function committed(h: Harness): Promise<void> {
  while (!h.events.some((e) => e.type === 'compaction.committed')) await new Promise((r) => setTimeout(r, 1));
}

/** A background summary committed as soon as it is ready (not held until the threshold): a run that ends unasked, to be reported. */
const COMMIT_WHEN_READY = { ...SMALL_CONFIG, backgroundCommit: 'ready' } as const;

async function twoEngines(): Promise<{ quick: Harness; full: Harness; watched: ReturnType<typeof watch> }> {
  const watched = watch();
  const quick = harness({ summarizer: recordingSummarizer(), inspect: watched.inspect, config: COMMIT_WHEN_READY });
  const full = harness({ summarizer: recordingSummarizer(), quickCheck: false, config: COMMIT_WHEN_READY });
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

  it('still runs a job from the prepare point on, and the two engines compact alike', async () => {
    const { quick, full, watched } = await twoEngines();
    for (const h of [quick, full]) openTurn(h);
    watched.reset();
    const a = await stepUntilPressure(quick);
    const b = await stepUntilPressure(full);
    // Background compaction is on by default: the prepare point (below the threshold) starts a summary.
    expect(a.result.status).toBe('preparing');
    expect(a.result.before!.totalTokens).toBeLessThan(a.result.before!.threshold);
    expect(b.result.status).toBe('preparing');
    expect(a.index).toBe(b.index);
    expect(watched.children).toContain('job');
    expect(watched.children).toContain('0.gate.measuring');
    // Until the summary lands, no step is answered quickly: the next one reports the commit.
    await committed(quick);
    await committed(full);
    const c = await quick.step(a.index + 1);
    const d = await full.step(b.index + 1);
    expect(c.status).toBe('committed');
    expect(d.status).toBe('committed');
    expect(quick.session.deriveMessages()).toEqual(full.session.deriveMessages());
  });

  it('answers quickly only while the background chart is idle with nothing to report', async () => {
    const watched = watch();
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, inspect: watched.inspect, config: COMMIT_WHEN_READY });
    openTurn(h);
    const { index } = await stepUntilPressure(h);
    const call = await sum.call(0);
    // A summary in flight: the step goes to the gate (it would have to wait at the threshold).
    watched.reset();
    expect((await h.step(index + 1)).status).toBe('preparing');
    expect(watched.children).toContain('job');
    call.resolve({ text: 'The user asked to fix the build; files were listed.', requests: 1 });
    await committed(h);
    // An ended run not yet reported: the gate hands it over.
    watched.reset();
    const r = await h.step(index + 2);
    expect(r.status).toBe('committed');
    expect(watched.children).toContain('job');
    // Idle, nothing to report, below the prepare point: answered on the root chart's event.
    watched.reset();
    const quiet = await h.step(index + 3);
    expect(quiet.status).toBe('below');
    expect(quiet.before!.totalTokens).toBeLessThan(quiet.before!.prepareAt!);
    expect(watched.children).toEqual([]);
  });

  it('a held summary (the default) keeps every step below the threshold on the gate: none is answered quickly', async () => {
    const watched = watch();
    const h = harness({ summarizer: recordingSummarizer(), inspect: watched.inspect });
    openTurn(h);
    const { index } = await stepUntilPressure(h);
    await new Promise((r) => setTimeout(r, 10));
    for (let k = 1; k <= 2; k++) {
      watched.reset();
      const r = await h.step(index + k);
      if (h.engine.measure().totalTokens >= h.engine.measure().threshold!) break;
      expect(r.status).toBe('preparing');
      expect(watched.children).toContain('job');
    }
    expect(h.events.filter((e) => e.type === 'compaction.committed')).toEqual([]);
  });

  it('with background off, runs the pressure chart at the threshold, and the two engines compact alike', async () => {
    const watched = watch();
    const config = { ...SMALL_CONFIG, background: false };
    const quick = harness({ summarizer: recordingSummarizer(), inspect: watched.inspect, config });
    const full = harness({ summarizer: recordingSummarizer(), quickCheck: false, config });
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
