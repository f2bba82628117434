/**
 * Root engine paths on the real engine: sequences of facade calls (afterStep,
 * onRequestError, compactNow, an aborted signal, the cool-down on the SimulatedClock) and
 * the outcome of each job they start.
 *
 * A job is held at its first service call until the path reaches its outcome, so requests
 * made meanwhile meet a busy engine and a cancel meets a running job. Each outcome is
 * produced by preparing the world before the call that starts the job:
 *   pressure compacted / failed   steps until over the threshold; the server writes the
 *                                 summary, or answers 500
 *   pressure unknown-model        a request/header for a model the registry does not know
 *   afterStep below               a request/header for the 200k-window model: answered by the
 *                                 root chart's quick check, no job started
 *   overflow retry / failed       the provider's real overflow error; the server writes the
 *                                 summary, or answers 500 (nothing to prune: no progress)
 *   overflow not-overflow         the provider's real non-overflow 400
 *   manual committed / failed     the turn ended; the server writes the summary, or answers 500
 *   cancelled                     the caller's signal aborts while the job is held
 * Forced: a job's chart error. A bug inside a chart cannot be produced by the world; the
 * first service call resolves `undefined`, which makes the job's first guard throw.
 */
import { expect } from 'vitest';
import { CompactionError, type AfterStepResult, type CompactionRecord, type RequestErrorAction } from '../../src/engine/facade';
import type { SettledResult } from '../../src/machines/compaction';
import type { TransitionInfo } from './model';
import type { GeneratedPath } from './paths';
import {
  endTurn,
  expectLogOnlyGrew,
  expectPathTaken,
  expectReplays,
  expectValidRequest,
  fillAbove,
  markRun,
  openWorld,
  pressureNow,
  route,
  toolStep,
  type Server,
  type World,
} from './runner';

type Kind = 'pressure' | 'overflow' | 'manual' | 'fit';
type Answer = AfterStepResult | RequestErrorAction | CompactionRecord | null | CompactionError | SettledResult;

interface Job {
  kind: Kind;
  outcome: string;
  controller: AbortController;
  running: Promise<Answer>;
}

const FIRST_CALL: Record<Kind, 'measure' | 'classify' | 'checkAdmission' | 'measureWindow'> = {
  pressure: 'measure',
  overflow: 'classify',
  manual: 'checkAdmission',
  fit: 'measureWindow',
};
/** The root chart's state a job runs in. */
const JOB_STATE: Record<Kind, string> = { pressure: 'pressure', overflow: 'overflow', manual: 'manual', fit: 'fitting' };
/**
 * `beforeRequest` stands for the facade's second half: `engine.beforeRequest()` runs the pressure
 * job (afterStep) and then this request, sent here on its own (its paths are the fit chart's own).
 */
const FACADE_KIND: Record<string, Kind> = {
  afterStep: 'pressure',
  'afterStep below': 'pressure',
  onRequestError: 'overflow',
  compactNow: 'manual',
  beforeRequest: 'fit',
};
const SERVER_500 = {
  kind: 'status' as const,
  status: 500,
  body: { error: { message: 'The server had an error', type: 'server_error', param: null, code: null } },
};

/** Prepares the world so the job about to start ends with `outcome`. */
function prepare(w: World, srv: Server, kind: Kind, outcome: string, warned: { n: number }): unknown {
  if (kind === 'pressure') {
    if (outcome === 'unknown-model') route(w, `mystery-${++warned.n}`);
    else {
      // Above the threshold, else the quick check answers the step without a job.
      const p = pressureNow(w);
      if (w.session.openTurn === null || p.total < p.threshold + 100) fillAbove(w, 100);
      else route(w);
    }
    // A truncation after a failed summary; a model-free one (the breaker open) asks no summary at all.
    if (outcome === 'failed' || outcome === 'truncated') srv.queue.push(SERVER_500);
    return undefined;
  }
  if (kind === 'fit') {
    // Within the window: the fit chart measures and answers (its other paths are its own suite's).
    route(w);
    return undefined;
  }
  if (kind === 'overflow') {
    toolStep(w);
    toolStep(w, { open: true });
    if (outcome === 'failed' || outcome === 'retry-truncated') srv.queue.push(SERVER_500);
    return outcome === 'not-overflow' ? srv.otherError : srv.overflowError;
  }
  if (w.session.openTurn === null) toolStep(w);
  toolStep(w);
  endTurn(w);
  if (outcome === 'failed') srv.queue.push(SERVER_500);
  return undefined;
}

let readyIds = 0;
/** The `request.ready` request the facade's beforeRequest sends after its pressure job: the root chart's answer. */
function requestReady(w: World): Promise<SettledResult> {
  const id = `ready${++readyIds}`;
  return new Promise((resolve) => {
    const sub = w.engine.actor.on('request.settled', (e) => {
      if (e.id !== id) return;
      sub.unsubscribe();
      resolve(e.result);
    });
    w.engine.actor.send({ type: 'request.ready', id });
  });
}

function call(w: World, kind: Kind, error: unknown, signal: AbortSignal): Promise<Answer> {
  if (kind === 'fit') return requestReady(w);
  if (kind === 'pressure') return w.engine.afterStep({ signal });
  if (kind === 'overflow') return w.engine.onRequestError(error, { signal });
  return w.engine.compactNow({ signal }).catch((err: unknown) => err as CompactionError);
}

function expectJobAnswer(job: Job, answer: Answer): void {
  const { kind, outcome } = job;
  if (kind === 'pressure') {
    const r = answer as AfterStepResult;
    const status = {
      compacted: 'compacted',
      failed: 'failed',
      truncated: 'truncated',
      'truncated-model-free': 'truncated',
      'unknown-model': 'skipped',
      cancelled: 'cancelled',
      'chart-error': 'failed',
    }[outcome];
    expect(r.status).toBe(status);
    if (status === 'truncated') {
      // The relief is one truncation checkpoint; the failed summary before it (if any) is no error of the step.
      expect(r.compactions.map((c) => c.truncation?.reason)).toEqual([outcome === 'truncated' ? 'summary-failed' : 'breaker-open']);
      expect(r.error).toBeUndefined();
    }
    if (outcome === 'failed') expect(r.error?.causeCode).toBe('summary-request');
    if (outcome === 'chart-error') expect(r.error?.code).toBe('internal');
    if (outcome === 'compacted') expect(r.compactions).toHaveLength(1);
  } else if (kind === 'overflow') {
    const r = answer as RequestErrorAction;
    if (outcome.startsWith('retry')) expect(r.kind).toBe('retry');
    else {
      const reason = { failed: 'summary-failed', 'not-overflow': 'not-overflow', cancelled: 'cancelled', 'chart-error': 'internal' }[outcome];
      expect(r).toMatchObject({ kind: 'fail', reason });
    }
  } else if (kind === 'fit') {
    const r = answer as SettledResult;
    if (outcome === 'chart-error') expect(r.kind).toBe('error');
    else expect(r).toMatchObject({ kind: 'fit', output: { status: 'fits' } });
  } else if (outcome === 'committed') {
    expect((answer as CompactionRecord).trigger).toBe('manual');
  } else {
    expect(answer).toBeInstanceOf(CompactionError);
    const code = { failed: 'summary', cancelled: 'cancelled', 'chart-error': 'internal' }[outcome];
    expect((answer as CompactionError).code).toBe(code);
  }
}

export async function runEnginePath(srv: Server, path: GeneratedPath, byKey: Map<string, TransitionInfo>): Promise<void> {
  // The routed model's own policy (per-model fields, docs/spec.md#14-many-workers-one-session-the-postgresql-store) differs from the global one: the
  // engine must look it up for every job (auto off, and the overflow retries it grants).
  const policy = { provider: 'test', model: 'small', maxOverflowRetries: 1, ...(path.input === 'auto off' ? { auto: false } : {}) };
  const w = await openWorld(srv, {
    config: {
      circuitBreaker: { failureLimit: 2, cooldownMs: 1000 },
      maxOverflowRetries: 0,
      modelPolicies: [policy],
      ...(path.input === 'fallback' ? { truncationFallback: true } : {}),
    },
    quickCheck: true,
  });
  toolStep(w);
  markRun(w);
  const warned = { n: 0 };
  let job: Job | undefined;
  let breakerNotes = 0;

  for (let i = 0; i < path.steps.length; i++) {
    const step = path.steps[i]!;
    const facadeKind = FACADE_KIND[step.outcome];
    if (facadeKind) {
      const startsJob = step.fired.some((k) => byKey.get(k)!.targets.some((t) => t === `work.${JOB_STATE[facadeKind]}`));
      if (startsJob) {
        const done = path.steps.slice(i + 1).find((s) => s.outcome.startsWith(`${facadeKind}:`))!;
        const outcome = done.outcome.split(':')[1]!;
        const error = prepare(w, srv, facadeKind, outcome, warned);
        const controller = new AbortController();
        w.ctl.hold();
        job = { kind: facadeKind, outcome, controller, running: call(w, facadeKind, error, controller.signal) };
        // Held at its first call until the path reaches the job's outcome.
        const first = await w.ctl.take(FIRST_CALL[facadeKind], job.running);
        w.ctl.putBack(first);
        continue;
      }
      // Answered at once: below the threshold (the quick check), auto off, paused, or busy.
      const busy = job !== undefined;
      if (step.outcome === 'afterStep below' && !busy) route(w, 'big');
      const answer = await call(w, facadeKind, srv.overflowError, new AbortController().signal);
      if (facadeKind === 'pressure') {
        const fired = (guard: string) => step.fired.some((k) => byKey.get(k)!.guard === guard);
        const status = busy ? 'busy' : fired('breaker is open & the fallback is off') ? 'paused' : fired('automatic compaction is off') ? 'auto-off' : 'below';
        if (status === 'below') expect((answer as AfterStepResult).before?.totalTokens).toBeLessThan((answer as AfterStepResult).before!.threshold);
        expect((answer as AfterStepResult).status).toBe(status);
      } else if (facadeKind === 'overflow') {
        expect(answer).toMatchObject({ kind: 'fail', reason: 'busy' });
      } else if (facadeKind === 'fit') {
        expect(answer).toMatchObject({ kind: 'busy' });
      } else {
        expect((answer as CompactionError).code).toBe('busy');
      }
      continue;
    }
    if (step.outcome === 'cancel') {
      job!.controller.abort(new Error('user pressed Ctrl-C'));
      continue;
    }
    if (step.outcome === 'notify') continue; // the real charts announce on their own
    if (step.outcome === 'stop') {
      // A graceful stop: the held job is stopped, a call in flight rejects, the chart ends.
      w.engine.stop();
      if (job) {
        await expect(job.running).rejects.toMatchObject({ code: 'engine-stopped' });
        job = undefined;
      }
      expect(w.engine.actor.getSnapshot().status).toBe('done');
      continue;
    }
    if (step.outcome === 'cool-down elapses') {
      w.clock.increment(1000);
      expect(w.notes.filter((n) => n.type === 'breaker.closed').at(-1)).toMatchObject({ why: 'cooldown' });
      continue;
    }
    // The running job's outcome.
    const j = job!;
    const malformed = j.outcome === 'chart-error' ? { [FIRST_CALL[j.kind]]: (c: { resolve(v: unknown): void }) => c.resolve(undefined) } : {};
    w.ctl.setAuto(malformed);
    const answer = await j.running;
    expectJobAnswer(j, answer);
    job = undefined;
    w.ctl.hold();
    // The breaker's announcements follow the failures and successes.
    const opened = w.notes.filter((n) => n.type === 'breaker.opened').length;
    if (opened > breakerNotes) expect((w.engine.actor.getSnapshot().value as { breaker: string }).breaker).toBe('open');
    breakerNotes = opened;
  }
  w.ctl.setAuto();

  // The root chart took the generated path, and ends where the path ends.
  expectPathTaken(w, path, byKey);
  expect(w.engine.actor.getSnapshot().value).toEqual(path.finalValue);
  // The chart's record, as a createCompactionMachine host reads it from the snapshot: the counts
  // the generated path predicts, and no job held once it is over.
  const real = w.engine.actor.getSnapshot().context;
  const want = path.finalContext as typeof real;
  expect({ failures: real.consecutiveFailures, retries: real.overflowRetries, job: real.current === undefined, pending: real.pending === undefined }).toEqual({
    failures: want.consecutiveFailures,
    retries: want.overflowRetries,
    job: want.current === undefined,
    pending: want.pending === undefined,
  });
  // A success that closes the open breaker is announced, once per closing.
  const closedBySuccess = path.fired.filter((k) => k === 'engine.breaker.open breaker.success#0').length;
  expect(w.notes.filter((n) => n.type === 'breaker.closed' && (n as { why?: string }).why === 'success')).toHaveLength(closedBySuccess);
  // A job's charts announce through the engine chart: a listener hears each real commit.
  if (path.steps.some((s) => ['pressure:compacted', 'overflow:retry', 'manual:committed'].includes(s.outcome))) {
    expect(w.notes.some((n) => n.type === 'compaction.committed')).toBe(true);
  }
  if ((path.finalValue as { breaker: string }).breaker === 'open') expect(w.notes.some((n) => n.type === 'breaker.opened')).toBe(true);
  if (path.steps.some((s) => s.outcome === 'pressure:unknown-model')) {
    expect(w.notes.filter((n) => n.type === 'capacity.missing')).toHaveLength(path.steps.filter((s) => s.outcome === 'pressure:unknown-model').length);
  }

  expectLogOnlyGrew(w);
  expect(w.session.lock.held).toBe(false);
  const starts = w.session.events().filter((e) => e.type === 'compaction/start').length;
  expect(w.session.events().filter((e) => e.type === 'compaction/end')).toHaveLength(starts);
  expectValidRequest(w);
  const reopened = await expectReplays(w);
  await reopened.close();
}
