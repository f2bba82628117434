/**
 * Gate paths (docs/spec.md#13-background-compaction) on the real engine, background mode on: the job is the engine's own
 * (afterStep for pressure, onRequestError with the provider's real overflow error, compactNow
 * between turns) and the background chart answering the gate is the real one.
 *
 *   measure reading / unrouted  a routed session, or one no request was routed in yet
 *   background proceed          nothing running: a session under the prepare point (a step), or
 *                               any session (overflow, manual)
 *   background preparing        a step at the prepare point: a run starts
 *   background waiting          a run started before the job (a step at the prepare point whose
 *                               selection is held), the session then grown over the threshold
 *   background settled          the run goes on for real to its end
 *   cancel                      the caller's signal aborts while the gate measures, waits, or
 *                               its job holds its first call
 *   <job> done                  the job runs for real to its end
 * Forced: `measure:throws` (the meter throws only on a bug), as in the pressure chart.
 */
import { expect } from 'vitest';
import type { AfterStepResult, CompactionRecord, RequestErrorAction } from '../../src/engine/facade';
import { GATE_INPUTS } from './catalogs-background';
import type { TransitionInfo } from './model';
import type { GeneratedPath } from './paths';
import {
  endTurn,
  expectLogOnlyGrew,
  expectPathTaken,
  expectReplays,
  expectValidRequest,
  markRun,
  openWorld,
  route,
  startTurn,
  toolStep,
  within,
  type Server,
  type World,
} from './runner';

type Kind = 'pressure' | 'overflow' | 'manual';
const FIRST_CALL: Record<Kind, 'measure' | 'classify' | 'checkAdmission'> = { pressure: 'measure', overflow: 'classify', manual: 'checkAdmission' };
/** The background run's calls, in the order it makes them. */
const RUN_CALLS = ['selectRange', 'validateSpan', 'openBracket', 'summarize', 'revalidate', 'commit', 'flush'] as const;

async function reading(w: World): Promise<{ total: number; threshold: number; prepareAt: number }> {
  const r = (await w.defaults.measure({ phase: 'initial' })) as { kind: string; reading?: { totalTokens: number; threshold: number; prepareAt?: number } };
  if (r.kind !== 'reading') throw new Error(`no reading: ${r.kind}`);
  return { total: r.reading!.totalTokens, threshold: r.reading!.threshold, prepareAt: r.reading!.prepareAt ?? Infinity };
}

/** Tool steps until pressure reaches `level` ('prepare': the prepare point; 'threshold'). */
async function growTo(w: World, level: 'prepare' | 'threshold'): Promise<void> {
  for (let n = 0; n < 100; n++) {
    const r = await reading(w);
    if (r.total >= (level === 'prepare' ? r.prepareAt : r.threshold)) {
      if (level === 'prepare') expect(r.total, 'the prepare point is under the threshold').toBeLessThan(r.threshold);
      return;
    }
    toolStep(w, { open: true });
  }
  throw new Error(`the session never reached the ${level}`);
}

const gateValue = (w: World) =>
  (w.engine.actor.getSnapshot().children as Record<string, { getSnapshot(): { value: unknown } } | undefined>).job?.getSnapshot().value;
/** The call a background state waits on. */
const CALL_OF_STATE: Record<string, (typeof RUN_CALLS)[number] | 'closeWithError'> = {
  selecting: 'selectRange',
  validating: 'validateSpan',
  opening: 'openBracket',
  summarizing: 'summarize',
  ready: 'revalidate',
  committing: 'commit',
  flushing: 'flush',
  closing: 'closeWithError',
  cancelled: 'closeWithError',
};

/** The run a step started goes on until its bracket is open (when that step is answered). */
async function openRun(w: World): Promise<void> {
  for (const service of ['selectRange', 'validateSpan', 'openBracket'] as const) await (await w.ctl.takeOf(service)).runReal();
}

const bgValue = (w: World) =>
  (w.engine.actor.getSnapshot().children as Record<string, { getSnapshot(): { value: unknown } } | undefined>).background?.getSnapshot().value;
async function until(ok: () => boolean, what: string): Promise<void> {
  for (let t = 0; t < 500 && !ok(); t++) await new Promise((r) => setTimeout(r, 2));
  expect(ok(), what).toBe(true);
}

export async function runGateEnginePath(srv: Server, path: GeneratedPath, byKey: Map<string, TransitionInfo>): Promise<void> {
  const input = GATE_INPUTS.find((i) => i.label === path.input)!.input;
  const kind = input.kind;
  // The overflow gate's input for an error that is no overflow: the engine classifies a 500 so.
  const requestError = input.kind === 'overflow' && input.job.notOverflow === true;
  const o = path.steps.map((s) => s.outcome);
  // Commit-once-ready: the world's first run commits unasked, and its outcome waits for the next job's first answer.
  const w = await openWorld(srv, { config: { background: true, backgroundCommit: 'ready' } });

  // The world before the job: a background run that committed and was not reported yet (the
  // first answer to a job hands it over), and a run still under way when the gate must wait.
  if (o.includes('measure:unrouted')) {
    w.writer.startTurn();
    w.writer.user('Please fix the build.');
  } else {
    startTurn(w);
    await growTo(w, 'prepare');
    const step = w.engine.afterStep();
    await (await w.ctl.takeOf('measure')).runReal();
    // The step is answered once the run's bracket is open.
    w.ctl.setAuto();
    expect((await within(step, 'the step that starts the first run')).status).toBe('preparing');
    await until(() => bgValue(w) === 'idle' && !w.session.lock.held, 'the first run committed');
    w.ctl.hold();
    expect(w.notes.filter((n) => n.type === 'compaction.committed')).toHaveLength(1);
    // Overflow recovery and /compact then have a span to compact (under the prepare point).
    if (kind !== 'pressure') for (let i = 0; i < 4; i++) toolStep(w, { open: true });
  }
  if (o.includes('background:waiting')) {
    await growTo(w, 'prepare');
    const second = w.engine.afterStep();
    await (await w.ctl.takeOf('measure')).runReal();
    await openRun(w);
    const answer = await within(second, 'the step that starts the run');
    expect(answer.status).toBe('preparing');
    expect(answer.compactions, 'the first run, handed over to the step after it').toHaveLength(1);
    await w.ctl.takeOf('summarize').then((c) => w.ctl.putBack(c)); // the run holds its summary
    if (kind === 'pressure') await growTo(w, 'threshold');
  } else if (o.includes('background:preparing')) await growTo(w, 'prepare');
  if (kind === 'manual') endTurn(w);
  markRun(w);
  const settledBefore = w.settled.length;

  const controller = new AbortController();
  if (input.job.aborted) controller.abort(new Error('the caller gave up before the call'));
  const signal = controller.signal;
  const running: Promise<unknown> =
    kind === 'pressure'
      ? w.engine.afterStep({ signal })
      : kind === 'overflow'
        ? w.engine.onRequestError(requestError ? Object.assign(new Error('Internal server error'), { status: 500 }) : srv.overflowError, { signal })
        : w.engine.compactNow({ signal }).catch((e: unknown) => e);
  running.catch(() => undefined);
  let measured = false;
  const takeMeasure = async () => {
    measured = true;
    return w.ctl.takeOf('measure');
  };

  for (const step of path.steps) {
    const from = String(step.from);
    switch (step.outcome) {
      case 'measure:reading':
      case 'measure:unrouted': {
        const call = await takeMeasure();
        await call.runReal();
        expect((call.output as { kind: string }).kind).toBe(step.outcome.split(':')[1]);
        break;
      }
      case 'measure:throws':
        // FORCED: the meter throws only on a bug.
        (await takeMeasure()).reject(Object.assign(new Error('scripted meter failure'), { code: 'internal' }));
        break;
      case 'cancel':
        if (from === 'measuring') {
          const call = await takeMeasure();
          controller.abort(new Error('user pressed Ctrl-C'));
          w.ctl.putBack(call);
        } else if (from === 'waiting') {
          await until(() => gateValue(w) === 'waiting', 'the gate waits');
          controller.abort(new Error('user pressed Ctrl-C'));
        } else {
          // The job holds its first call when the caller gives up: the gate forwards the cancel.
          const call = await w.ctl.takeOf(FIRST_CALL[kind]);
          controller.abort(new Error('user pressed Ctrl-C'));
          w.ctl.putBack(call);
        }
        break;
      case 'background:preparing':
        // The run this step starts opens its bracket; then the step is answered.
        await openRun(w);
        await until(() => gateValue(w) !== 'consulting' && gateValue(w) !== 'measuring', `the gate was answered ${step.outcome}`);
        break;
      case 'background:proceed':
      case 'background:waiting':
        // The real background chart answers; the gate has moved on when it did.
        await until(() => gateValue(w) !== 'consulting' && gateValue(w) !== 'measuring', `the gate was answered ${step.outcome}`);
        break;
      case 'background:settled': {
        // The run the job waits for goes on for real to its end.
        for (let n = 0; n < RUN_CALLS.length; n++) {
          const before = JSON.stringify(bgValue(w));
          if (before === '"idle"') break;
          const state = typeof bgValue(w) === 'string' ? (bgValue(w) as string) : Object.keys(bgValue(w) as object)[0]!;
          await (await w.ctl.takeOf(CALL_OF_STATE[state]!)).runReal();
          await until(() => JSON.stringify(bgValue(w)) !== before, `the background run left ${before}`);
        }
        await until(() => bgValue(w) === 'idle', 'the background run ended');
        break;
      }
      default:
        if (!/^(pressure|overflow|manual):done$/.test(step.outcome)) throw new Error(`no runtime production for gate outcome ${step.outcome}`);
        w.ctl.setAuto();
        await within(running, 'the job');
    }
  }
  w.ctl.setAuto();
  const result = await within(running, 'the job');

  expectPathTaken(w, path, byKey);

  // What the caller was answered (docs/spec.md#13-background-compaction).
  const cancelled = o.includes('cancel') || input.job.aborted;
  const waited = o.includes('background:waiting');
  if (kind === 'pressure') {
    const r = result as AfterStepResult;
    if (o.includes('background:preparing')) expect(r.status).toBe('preparing');
    else if (cancelled) expect(r.status).toBe('cancelled');
    else if (o.includes('measure:unrouted')) expect(r.status).toBe('skipped');
    // No reading for the gate: the pressure chart measures again, for real, under the threshold.
    else if (o.includes('measure:throws')) expect(r.status).toBe('below');
    else if (waited) expect(r.status).toBe('waited');
    expect(r.waitedMs > 0 || !waited).toBe(true);
  } else if (kind === 'overflow') {
    const r = result as RequestErrorAction;
    // A request error is declined as no overflow even when cancelled meanwhile: nothing was done either way.
    if (requestError) expect(r).toMatchObject({ kind: 'fail', reason: 'not-overflow' });
    else if (cancelled) expect(r).toMatchObject({ kind: 'fail', reason: 'cancelled' });
    else expect(r.kind).toBe('retry');
  } else if (cancelled) expect((result as { code?: string }).code).toBe('cancelled');
  else expect((result as CompactionRecord | null)?.checkpointSeq).toBeGreaterThan(0);

  // What the job reports of the background (docs/spec.md#13-background-compaction): waited, preparing, and the runs that
  // ended since the last answer — the first run for a job that did not wait, the awaited one else.
  const answers = w.settled.slice(settledBefore) as Array<{
    result: { output?: { background?: { waited: boolean; preparing: boolean; outcomes: Array<{ status: string; waited: boolean }> } } };
  }>;
  expect(answers).toHaveLength(1);
  const report = answers[0]!.result.output?.background;
  const cancelledFirst = input.job.aborted || path.steps.some((s) => s.outcome === 'cancel' && s.from === 'measuring');
  const consultedAtAll = (kind !== 'pressure' || o.includes('measure:reading')) && !cancelledFirst && !requestError;
  expect(report?.waited).toBe(waited);
  expect(report?.preparing).toBe(o.includes('background:preparing'));
  const cancelWaiting = path.steps.some((s) => s.outcome === 'cancel' && s.from === 'waiting');
  const runs = !consultedAtAll ? [] : waited ? [{ status: cancelWaiting ? 'cancelled' : 'committed', waited: true }] : [{ status: 'committed', waited: false }];
  expect(report?.outcomes.map((x) => ({ status: x.status, waited: x.waited }))).toEqual(runs);

  // The background chart heard this job once (a step with its reading, or an await) unless there
  // was no reading to judge, and was cancelled only by a cancel while the job waited.
  const bgTaken = w.recorded
    .slice(w.mark)
    .filter((r) => r.machine === 'background')
    .flatMap((r) => r.transitions);
  const consulted = bgTaken.filter((t) => t.event === 'step' || t.event === 'await').length;
  expect(consulted).toBe(consultedAtAll ? 1 : 0);
  expect(bgTaken.filter((t) => t.event === 'cancel').length).toBe(path.steps.filter((s) => s.outcome === 'cancel' && s.from === 'waiting').length);
  expect(measured, 'a pressure gate measures unless its caller gave up first').toBe(kind === 'pressure' && !input.job.aborted);

  expectLogOnlyGrew(w);
  expectValidRequest(w);
  await until(() => bgValue(w) === 'idle' || bgValue(w) === undefined, 'the background run ended');
  if (!o.includes('background:preparing')) expect(w.session.lock.held).toBe(false);
  else {
    // The run the step started goes on for real to its end.
    await until(() => !w.session.lock.held && bgValue(w) === 'idle', 'the background run committed');
  }
  await (await expectReplays(w)).close();
}
