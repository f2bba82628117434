/**
 * Background compaction (docs/spec.md#13-background-compaction) on the real engine: the summary is prepared from the prepare
 * point while the agent works on, held once ready until a job must wait (the threshold, an
 * overflow, /compact; or committed at once with backgroundCommit 'ready'), and waited for only
 * when the threshold comes first. Summaries are held by the test (deferredSummarizer) so every
 * interleaving is produced on purpose, not by timing.
 */
import { describe, expect, it } from 'vitest';
import { CompactionError } from '../../src/engine/facade';
import { deferredSummarizer, harness, openTurn, replaceFirstToolResult, type Harness } from '../helpers/engine';

// The cost model's early compactions (economics) are off: these tests drive the prepare point itself.
const BG = { headroomTokens: 500, maxTokens: 400, thresholdRatio: 0.8, retainRatio: 0.2, background: true, economics: false } as const;
const SUMMARY = { text: 'The user asked to fix the build; files were listed.', requests: 1 };

/** Settles pending promise callbacks and actor messages. */
const settle = () => new Promise<void>((r) => setTimeout(r, 10));

/** Tracks whether a promise has settled, without awaiting it. */
function track<T>(p: Promise<T>): { done: () => boolean; value: Promise<T> } {
  let done = false;
  const value = p.finally(() => (done = true));
  return { done: () => done, value };
}

/** Steps until the engine reports `preparing`; returns the step index after it. */
async function stepToPrepare(h: Harness): Promise<number> {
  for (let i = 0; i < 40; i++) {
    const r = await h.step(i);
    if (r.status === 'preparing') return i + 1;
    expect(r.status).toBe('below');
  }
  throw new Error('the prepare point was never reached');
}

const pressure = (h: Harness) => {
  const m = h.engine.measure();
  return { total: m.totalTokens, threshold: m.threshold! };
};

describe('background compaction (docs/spec.md#13-background-compaction)', () => {
  it('prepares from the prepare point, keeps the agent going, holds the ready summary until the threshold, then commits without waiting for a model', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: BG });
    openTurn(h);
    let i = await stepToPrepare(h);
    const start = h.session.events().find((e) => e.type === 'compaction/start')!;
    expect(start.data).toMatchObject({ background: true, trigger: 'pressure' });
    expect(h.events.find((e) => e.type === 'compaction.started')).toMatchObject({ background: true });
    const call = await sum.call(0);
    call.resolve(SUMMARY);
    await settle();
    // Ready, below the threshold: held. Nothing is shadowed, the bracket stays open, the agent goes on.
    const surfaceBefore = h.session.surface.length;
    const heldSteps: number[] = [];
    let r = await h.step(i++);
    while (pressure(h).total < pressure(h).threshold) {
      expect(r).toMatchObject({ status: 'preparing', waitedMs: 0 });
      expect(r.compactions).toEqual([]);
      heldSteps.push(i);
      h.toolStep(i++);
      if (pressure(h).total >= pressure(h).threshold) break;
      r = await h.engine.afterStep();
      h.writer.endStep();
    }
    expect(heldSteps.length).toBeGreaterThan(0);
    expect(h.session.lock.held).toBe(true);
    expect(h.events.filter((e) => e.type === 'compaction.committed')).toEqual([]);
    expect(h.session.surface.length).toBeGreaterThan(surfaceBefore); // appended to, nothing replaced
    // The step at the threshold commits the held summary: no second summary request, no wait for one.
    const atThreshold = await h.engine.afterStep();
    h.writer.endStep();
    expect(sum.calls).toHaveLength(1);
    expect(atThreshold.status).toBe('committed'); // it waited for three appends, not for a model
    expect(atThreshold.compactions).toHaveLength(1);
    expect(h.events.find((e) => e.type === 'compaction.committed')).toMatchObject({ background: true });
    expect(h.session.lock.held).toBe(false);
    expect(pressure(h).total).toBeLessThan(pressure(h).threshold);
    // The span was as selected; everything appended after it survives behind the checkpoint.
    const cp = h.session.event(atThreshold.compactions[0]!.checkpointSeq);
    expect(h.session.surface.positionOf(cp.seq)).toBe(1);
    expect(h.session.surface.pendingCalls()).toEqual([]);
  });

  it("with backgroundCommit 'ready', commits as soon as the summary is ready", async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: { ...BG, backgroundCommit: 'ready' } });
    openTurn(h);
    let i = await stepToPrepare(h);
    const call = await sum.call(0);
    // The agent works on, below the threshold, while the summary is prepared: nothing waits.
    const more = await h.step(i++);
    expect(more).toMatchObject({ status: 'preparing', waitedMs: 0 });
    expect(pressure(h).total).toBeLessThan(pressure(h).threshold);
    call.resolve(SUMMARY);
    await settle();
    // Committed at once: the lock is free and the next request is smaller.
    expect(h.session.lock.held).toBe(false);
    expect(h.events.find((e) => e.type === 'compaction.committed')).toMatchObject({ background: true });
    const next = await h.step(i++);
    expect(next.status).toBe('committed');
    expect(next.compactions).toHaveLength(1);
    const cp = h.session.event(next.compactions[0]!.checkpointSeq);
    expect(h.session.surface.positionOf(cp.seq)).toBe(1);
    expect(h.session.surface.pendingCalls()).toEqual([]);
  });

  it("on a one-slot server (concurrency 1) an unset backgroundCommit commits once ready: the summary already evicted the agent's cached prompt", async () => {
    /** One slot, the summary ready below the threshold (it waits for the agent's reply, which the next step records). */
    const readyOnOneSlot = async (backgroundCommit?: 'threshold') => {
      const sum = deferredSummarizer();
      const h = harness({
        summarizer: sum,
        config: { ...BG, ...(backgroundCommit ? { backgroundCommit } : {}), models: { 'test/small': { concurrency: 1 } } },
      });
      openTurn(h);
      const i = await stepToPrepare(h);
      await h.step(i);
      (await sum.call(0)).resolve(SUMMARY);
      await settle();
      return h;
    };
    const h = await readyOnOneSlot();
    expect(h.session.lock.held).toBe(false);
    expect(h.events.find((e) => e.type === 'compaction.committed')).toMatchObject({ background: true });
    expect(pressure(h).total).toBeLessThan(pressure(h).threshold);
    // Set explicitly, 'threshold' holds it there too.
    const h2 = await readyOnOneSlot('threshold');
    expect(h2.session.lock.held).toBe(true);
    expect(h2.events.filter((e) => e.type === 'compaction.committed')).toEqual([]);
  });

  it('a request error that is no overflow is answered at once: it neither waits for a summary being prepared nor commits a held one', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: BG });
    openTurn(h);
    await stepToPrepare(h);
    const call = await sum.call(0);
    // Being prepared: a 500 is declined without waiting for the summary.
    const during = track(h.engine.onRequestError(Object.assign(new Error('Internal server error'), { status: 500 })));
    await settle();
    expect(during.done()).toBe(true);
    expect(await during.value).toMatchObject({ kind: 'fail', reason: 'not-overflow' });
    // Held: an abort is declined, and the summary stays held (nothing shadowed for it).
    call.resolve(SUMMARY);
    await settle();
    expect(h.session.lock.held).toBe(true);
    const aborted = await h.engine.onRequestError(Object.assign(new Error('Request was aborted.'), { name: 'AbortError' }));
    expect(aborted).toMatchObject({ kind: 'fail' });
    await settle();
    expect(h.session.lock.held).toBe(true);
    expect(h.events.filter((e) => e.type === 'compaction.committed')).toEqual([]);
    // An overflow still waits for (here: commits) the held summary, then recovers as usual.
    void sum.call(1).then((c) => c.resolve(SUMMARY)); // should recovery compact once more
    const overflow = await h.engine.onRequestError(
      Object.assign(new Error("This model's maximum context length is 6000 tokens. However, your messages resulted in 7000 tokens."), {
        status: 400,
        code: 'context_length_exceeded',
      }),
    );
    expect(h.events.find((e) => e.type === 'compaction.committed')).toMatchObject({ background: true });
    expect(overflow.kind).toBe('retry');
  });

  it('a session that ends below the threshold has shadowed nothing: the held summary is cancelled at stop, the log keeps every message', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: BG });
    openTurn(h);
    await stepToPrepare(h);
    (await sum.call(0)).resolve(SUMMARY);
    await settle();
    expect(h.session.lock.held).toBe(true);
    h.engine.stop();
    await settle();
    const types = h.types();
    expect(types.filter((t) => t === 'compaction/checkpoint' || t === 'compaction/summary')).toEqual([]);
    expect(types.filter((t) => t === 'compaction/start')).toHaveLength(types.filter((t) => t === 'compaction/end').length);
    expect(h.session.lock.held).toBe(false);
    expect(h.session.events().find((e) => e.type === 'compaction/end')!.data).toMatchObject({ error: { code: 'cancelled' } });
  });

  it('past the threshold the agent goes on while the request still fits; it waits only at the wait point, then commits and goes on', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: BG });
    openTurn(h);
    let i = await stepToPrepare(h);
    const call = await sum.call(0);
    const m0 = h.engine.measure();
    // Halfway from the threshold to the message budget (window − the request's max_tokens).
    expect(m0.waitAt).toBe(m0.threshold! + Math.floor((m0.contextWindow! - 500 - m0.threshold!) / 2));
    let r = await h.step(i++);
    const pastThreshold: number[] = [];
    while (r.status === 'preparing') {
      const m = h.engine.measure();
      if (m.totalTokens >= m.threshold!) pastThreshold.push(m.totalTokens);
      expect(r.waitedMs).toBe(0);
      h.toolStep(i++, 'ok');
      if (h.engine.measure().totalTokens >= h.engine.measure().waitAt!) break;
      r = await h.engine.afterStep();
      h.writer.endStep();
    }
    // Steps past the threshold, below the wait point, went on without waiting for the model.
    expect(pastThreshold.length).toBeGreaterThan(0);
    expect(Math.max(...pastThreshold)).toBeLessThan(m0.waitAt!);
    expect(h.engine.measure().totalTokens).toBeGreaterThanOrEqual(m0.waitAt!);
    expect(h.engine.measure().totalTokens).toBeLessThan(m0.contextWindow! - 500);
    const waiting = track(h.engine.afterStep());
    await settle();
    expect(waiting.done()).toBe(false); // the only wait
    call.resolve(SUMMARY);
    const waited = await waiting.value;
    h.writer.endStep();
    expect(waited.status).toBe('waited');
    expect(waited.waitedMs).toBeGreaterThan(0);
    expect(waited.compactions.length).toBeGreaterThanOrEqual(1);
    expect(pressure(h).total).toBeLessThan(pressure(h).threshold);
    const types = h.types();
    expect(types.filter((t) => t === 'compaction/start')).toHaveLength(types.filter((t) => t === 'compaction/end').length);
  });

  it('a step that jumps past the wait point and the window waits for the summary, commits it, and compacts on until under the threshold: no request over the window', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: BG });
    openTurn(h);
    const i = await stepToPrepare(h);
    const first = await sum.call(0);
    // One tool result larger than what is left of the window.
    const m = h.engine.measure();
    h.toolStep(i, `${'0123456789 '.repeat(Math.ceil((m.contextWindow! - m.totalTokens) / 2))}`);
    expect(h.engine.measure().totalTokens).toBeGreaterThan(m.contextWindow! - 500);
    const waiting = track(h.engine.afterStep());
    await settle();
    expect(waiting.done()).toBe(false); // it waits for the background summary
    first.resolve(SUMMARY);
    // Committed, still above: the pressure path goes on (a prune, else a summary of its own).
    const more = await Promise.race([sum.call(1).then((c) => c), waiting.value.then(() => undefined)]);
    if (more) more.resolve(SUMMARY);
    const r = await waiting.value;
    h.writer.endStep();
    expect(r.compactions.length + (r.pruned?.count ?? 0)).toBeGreaterThanOrEqual(2);
    expect(h.engine.measure().totalTokens).toBeLessThan(h.engine.measure().threshold!);
    expect(h.session.surface.pendingCalls()).toEqual([]);
  });

  it('with no summary under way, the threshold relieves as before: the step that crosses it compacts in the foreground', async () => {
    const sum = deferredSummarizer();
    // The prepare point at the threshold: the step that crosses it finds nothing running.
    const h = harness({ summarizer: sum, config: { ...BG, prepareRatio: 0.8 } });
    openTurn(h);
    let i = 0;
    for (; i < 40; i++) {
      h.toolStep(i);
      if (pressure(h).total >= pressure(h).threshold) break;
      expect((await h.engine.afterStep()).status).toBe('below');
      h.writer.endStep();
    }
    expect(pressure(h).total).toBeLessThan(h.engine.measure().waitAt!);
    const crossing = track(h.engine.afterStep());
    const call = await sum.call(0);
    await settle();
    expect(crossing.done()).toBe(false); // it waits for its own summary: no background run let it go on
    expect(h.events.find((e) => e.type === 'compaction.started')).not.toMatchObject({ background: true });
    call.resolve(SUMMARY);
    const r = await crossing.value;
    h.writer.endStep();
    expect(r.status).toBe('compacted');
    expect(pressure(h).total).toBeLessThan(pressure(h).threshold);
  });

  it('never commits a summary whose span changed', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: BG });
    openTurn(h);
    await stepToPrepare(h);
    const call = await sum.call(0);
    const span = h.events.find((e) => e.type === 'compaction.started')!;
    expect(span.type).toBe('compaction.started');
    // Another writer replaces a tool result inside the span (the engine's own pruner never would).
    replaceFirstToolResult(h);
    call.resolve(SUMMARY);
    await settle();
    expect(h.session.events().some((e) => e.type === 'compaction/summary')).toBe(false);
    const end = h.session
      .events()
      .filter((e) => e.type === 'compaction/end')
      .at(-1)!;
    expect(end.data).toMatchObject({ error: { code: 'changed' } });
    expect(h.events.find((e) => e.type === 'compaction.failed')).toMatchObject({ background: true });
  });

  it('overflow recovery and /compact wait for the background summary, then run as usual', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: BG });
    openTurn(h);
    await stepToPrepare(h);
    const call = await sum.call(0);
    h.writer.endTurn();
    const manual = track(h.engine.compactNow());
    await settle();
    expect(manual.done()).toBe(false);
    call.resolve(SUMMARY);
    // The background summary commits first, then the manual compaction runs as usual: it asks for
    // its own summary when more than the newest unit is left, else it has nothing to compact (its
    // span, cut for the tail at the threshold, took the rest).
    let manualDone = false;
    void manual.value.finally(() => (manualDone = true));
    void sum.call(1).then((c) => {
      if (!manualDone) c.resolve(SUMMARY);
    });
    const record = await manual.value;
    const base = sum.calls.length;
    expect(h.events.filter((e) => e.type === 'compaction.committed')[0]).toMatchObject({ background: true });
    expect(record === null || record.trigger === 'manual').toBe(true);
    expect(h.session.lock.held).toBe(false);

    // Overflow while a background summary runs: wait, then docs/spec.md#6-overflow-recovery.
    openTurn(h, 'Go on.');
    let i = 100;
    let r = await h.step(i++);
    while (r.status !== 'preparing') r = await h.step(i++);
    const call2 = await sum.call(base);
    const overflow = Object.assign(new Error("This model's maximum context length is 6000 tokens."), { status: 400, code: 'context_length_exceeded' });
    const action = track(h.engine.onRequestError(overflow));
    await settle();
    expect(action.done()).toBe(false);
    call2.resolve(SUMMARY);
    const next = sum.call(base + 1).then((c) => c.resolve(SUMMARY));
    const answer = await action.value;
    expect(['retry', 'fail']).toContain(answer.kind);
    void next;
  });

  it('a cancel while waiting at the wait point cancels the background summary and ends the step cancelled', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: BG });
    openTurn(h);
    let i = await stepToPrepare(h);
    const call = await sum.call(0);
    for (h.toolStep(i++); h.engine.measure().totalTokens < h.engine.measure().waitAt!; h.toolStep(i++)) h.writer.endStep();
    const controller = new AbortController();
    const waiting = track(h.engine.afterStep({ signal: controller.signal }));
    await settle();
    controller.abort(new Error('user pressed Ctrl-C'));
    const r = await waiting.value;
    expect(call.signal.aborted).toBe(true);
    expect(r.status).toBe('cancelled');
    const end = h.session
      .events()
      .filter((e) => e.type === 'compaction/end')
      .at(-1)!;
    expect(end.data).toMatchObject({ error: { code: 'cancelled' } });
    expect(h.session.lock.held).toBe(false);
  });

  it('a cancel while /compact waits for the background summary cancels both', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: BG });
    openTurn(h);
    await stepToPrepare(h);
    const call = await sum.call(0);
    h.writer.endTurn();
    const controller = new AbortController();
    const manual = track(h.engine.compactNow({ signal: controller.signal }).catch((e: unknown) => e));
    await settle();
    expect(manual.done()).toBe(false);
    controller.abort(new Error('user pressed Ctrl-C'));
    const err = await manual.value;
    expect(err).toBeInstanceOf(CompactionError);
    expect((err as CompactionError).code).toBe('cancelled');
    expect(call.signal.aborted).toBe(true);
    expect(sum.calls).toHaveLength(1); // the manual compaction never asked for a summary
    expect(h.session.lock.held).toBe(false);
  });

  it('the breaker counts background failures', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: { ...BG, truncationFallback: false, circuitBreaker: { failureLimit: 1, cooldownMs: 60_000 } } });
    openTurn(h);
    let i = await stepToPrepare(h);
    (await sum.call(0)).reject(Object.assign(new Error('the server had an error'), { status: 500 }));
    await settle();
    expect(h.events.some((e) => e.type === 'breaker.opened')).toBe(true);
    const r = await h.step(i++);
    expect(r.status).toBe('paused');
    const failed = h.events.find((e) => e.type === 'compaction.failed');
    expect(failed).toMatchObject({ background: true });
    expect(failed?.type === 'compaction.failed' && failed.error).toBeInstanceOf(CompactionError);
  });

  it('with background off nothing is prepared below the threshold', async () => {
    const sum = deferredSummarizer();
    const h = harness({ summarizer: sum, config: { ...BG, background: false } });
    openTurn(h);
    for (let i = 0; pressure(h).total < pressure(h).threshold - 300; i++) expect((await h.step(i)).status).toBe('below');
    expect(sum.calls).toHaveLength(0);
    expect(h.session.events().some((e) => e.type === 'compaction/start')).toBe(false);
  });
});
