/**
 * Background chart paths (docs/spec.md#13-background-compaction) on the real engine, background mode on: every step of the
 * path is the engine's own, the world arranged so it happens.
 *
 *   step:prepare-point       tool steps until pressure is at the prepare point (under the
 *                            threshold), then afterStep: its gate measures for real
 *   step:below-prepare-point a request for the 200k-window model: far below the prepare point
 *   step:threshold           tool steps until over the wait point while a run is under way, else
 *                            over the threshold (or, in a world of one
 *                            indivisible message, a request for a smaller-window model)
 *   step:above-threshold     small tool steps until past the threshold, short of the wait point
 *   await                    onRequestError with the provider's real overflow error
 *   cancel                   the signal of the job waiting for the run aborts (the gate cancels
 *                            the run); a summary in flight is aborted over HTTP
 *   selectRange nothing      a world of one indivisible message at the prepare point
 *   selectRange throws       a request for a model the registry does not know, before selection
 *   transaction services     as tx-outcomes.ts (revalidate span-changed: a node inside the span
 *                            rewritten while its summary was prepared; appends would be fine)
 * Forced: `cancel:unasked` (a cancel with nothing running: no real engine sends one) and
 * `revalidate:throws` (as for the transaction).
 *
 * A job released by a run's end (or answered `proceed`) runs for real to its end before the
 * path goes on. The checks: the real chart took the path; what afterStep answered, what the
 * engine announced, what the breaker counted and what the log holds, as docs/spec.md#13-background-compaction says.
 */
import { expect } from 'vitest';
import type { AfterStepResult } from '../../src/engine/facade';
import { Session } from '../../src/session/session';
import type { TransitionInfo } from './model';
import type { GeneratedPath, PathStep } from './paths';
import { expectedBackground } from './background-oracle';
import {
  expectLogOnlyGrew,
  expectPathTaken,
  expectReplays,
  expectValidRequest,
  markRun,
  newEvents,
  openWorld,
  rewriteNode,
  route,
  startTurn,
  textOfTokens,
  toolStep,
  within,
  type Call,
  type Server,
  type World,
} from './runner';
import { DEADLINE_MS, settleTxStep, type RunCtx } from './tx-outcomes';

interface Facade {
  kind: 'step' | 'await';
  /** The step that started a run: answered only once its bracket opened, or the run ended. */
  starter?: boolean;
  /** What the background chart answered (by the path). */
  reply: string;
  promise: Promise<unknown>;
  controller: AbortController;
  done: boolean;
  result?: unknown;
  error?: unknown;
}

const never = new Promise<never>(() => undefined);
const tick = () => new Promise<void>((r) => setTimeout(r, 0));

async function reading(w: World): Promise<{ total: number; threshold: number; prepareAt: number; waitAt: number; pays: boolean }> {
  const r = (await w.defaults.measure({ phase: 'initial' })) as {
    kind: string;
    reading?: { totalTokens: number; threshold: number; prepareAt?: number; waitAt?: number; economics?: { compaction?: { pays: boolean } } };
  };
  if (r.kind !== 'reading') return { total: 0, threshold: Infinity, prepareAt: Infinity, waitAt: Infinity, pays: false };
  const x = r.reading!;
  return {
    total: x.totalTokens,
    threshold: x.threshold,
    prepareAt: x.prepareAt ?? Infinity,
    waitAt: x.waitAt ?? x.threshold,
    pays: x.economics?.compaction?.pays === true,
  };
}

const atStart = (outcome: string) => outcome === 'step:prepare-point' || outcome === 'step:compacting-pays' || outcome === 'step:prepare-point-one-slot';

const stateOf = (value: unknown): string => (typeof value === 'string' ? value : Object.keys(value as object)[0]!);

/** Lets jobs the background chart released (or let run) finish for real. */
async function drain(w: World, jobs: Facade[]): Promise<void> {
  if (jobs.every((f) => f.done)) return;
  w.ctl.setAuto();
  await within(Promise.all(jobs.map((f) => f.promise)), 'the released jobs');
  w.ctl.hold();
}

/** Until the job's gate waits for the run (the answer `waiting` has reached it). */
async function gateWaiting(w: World): Promise<void> {
  const gate = () => (w.engine.actor.getSnapshot().children as Record<string, { getSnapshot(): { value: unknown } } | undefined>).job?.getSnapshot().value;
  for (let t = 0; t < 400 && gate() !== 'waiting'; t++) await new Promise((r) => setTimeout(r, 2));
  expect(gate(), 'the job waits for the background run').toBe('waiting');
}

export async function runBackgroundEnginePath(srv: Server, path: GeneratedPath, byKey: Map<string, TransitionInfo>): Promise<void> {
  const o = path.steps.map((s) => s.outcome);
  const indivisible = o.includes('selectRange:nothing');
  const economic = o.includes('step:compacting-pays');
  const w = await openWorld(srv, {
    config: {
      background: true,
      ...(economic ? { economics: true, forgetting: 0 } : {}),
      ...(o.includes('revalidate:too-little-progress') ? { minProgressRatio: 0.9 } : {}),
      ...(o.includes('summarize:deadline') ? { summaryTimeoutMs: DEADLINE_MS } : {}),
    },
  });
  // A world of one indivisible message (nothing to select) or of ordinary steps.
  if (indivisible) {
    w.writer.startTurn();
    route(w);
    const r = await reading(w);
    w.writer.user(textOfTokens(Math.ceil((r.prepareAt + r.threshold) / 2) - r.total));
  } else {
    startTurn(w);
    toolStep(w, { open: true });
  }
  const startCount = w.session.length;
  markRun(w);

  const facades: Facade[] = [];
  const want = expectedBackground(path);
  let replyAt = 0;
  const ctx: RunCtx = { abort: () => undefined, running: never, range: undefined, summaryFailure: 'length' };
  const track = (kind: Facade['kind'], start: (signal: AbortSignal) => Promise<unknown>): Facade => {
    const controller = new AbortController();
    const f: Facade = { kind, reply: want.replies[replyAt++]!, controller, done: false, promise: undefined as never };
    f.promise = start(controller.signal).then(
      (r) => void Object.assign(f, { done: true, result: r }),
      (e) => void Object.assign(f, { done: true, error: e }),
    );
    facades.push(f);
    return f;
  };
  const waiting = () => facades.filter((f) => f.reply === 'background.waiting');

  // The span a run selects: the one the threshold would compact, or, when the cost model started
  // the run early, one that keeps only the floor tail (as the pressure chart's early compaction).
  let early = false;
  // Per run: the turn open when its step came, and whether the cost model started it.
  const started: Array<{ turn: number | null; early: boolean }> = [];
  const expectSelection = (input: unknown) =>
    expect(input, 'the selection the run asks for').toEqual({ purpose: 'pressure', attempt: 1, retain: early ? 'floor' : 'ahead', stackCheckpoints: true });
  for (let i = 0; i < path.steps.length; i++) {
    const step = path.steps[i]!;
    if (step.outcome.startsWith('step:') && stateOf(step.from) === 'idle') {
      early = step.outcome === 'step:compacting-pays';
      if (early || step.outcome === 'step:prepare-point' || step.outcome === 'step:prepare-point-one-slot') started.push({ turn: w.session.openTurn, early });
    }
    const from = stateOf(step.from);
    switch (step.outcome) {
      case 'step:prepare-point':
      case 'step:prepare-point-one-slot':
      case 'step:threshold':
      case 'step:above-threshold':
      case 'step:compacting-pays':
      case 'step:below-prepare-point': {
        const oneSlot = step.outcome === 'step:prepare-point-one-slot';
        if (step.outcome === 'step:below-prepare-point') route(w, 'big');
        else if (from === 'awaitingSlot') {
          // A tool step would record a reply (agent.working): a smaller-window request reaches the threshold instead.
          route(w, 'tiny');
          const r = await reading(w);
          expect(r.total).toBeGreaterThanOrEqual(r.waitAt);
        } else if (step.outcome === 'step:above-threshold') {
          // Small steps until past the threshold, short of the wait point (the request still fits).
          for (let n = 0; n < 400; n++) {
            const r = await reading(w);
            if (r.total >= r.threshold) break;
            toolStep(w, { open: true, result: `ok ${n}` });
          }
          const r = await reading(w);
          expect(r.total, 'past the threshold').toBeGreaterThanOrEqual(r.threshold);
          expect(r.total, 'short of the wait point').toBeLessThan(r.waitAt);
        } else if (step.outcome === 'step:compacting-pays') {
          // A long session of small steps under the prepare point, far enough above what an early
          // compaction leaves that the cost model says compacting now pays.
          for (let n = 0; n < 400; n++) {
            const r = await reading(w);
            if (r.total >= 0.75 * r.threshold || r.total >= r.prepareAt) break;
            toolStep(w, { open: true, result: `ok ${n}` });
          }
          const r = await reading(w);
          expect(r.pays, 'compacting now pays').toBe(true);
          expect(r.total, 'under the prepare point').toBeLessThan(r.prepareAt);
        } else {
          const atPrepare = step.outcome === 'step:prepare-point' || oneSlot;
          // A step that must wait: with a summary under way, at the wait point; else at the threshold.
          const running = from !== 'idle' && from !== 'held';
          const limit = (r: { threshold: number; waitAt: number }) => (running ? r.waitAt : r.threshold);
          if (oneSlot) route(w, 'slot1');
          for (let n = 0; n < 100; n++) {
            const r = await reading(w);
            if (atPrepare ? r.total >= r.prepareAt : r.total >= limit(r)) break;
            if (indivisible) route(w, 'tiny');
            else toolStep(w, { open: true, ...(oneSlot ? { model: 'slot1' } : {}) });
          }
          const r = await reading(w);
          if (atPrepare) expect(r.total, 'at the prepare point, under the threshold').toBeLessThan(r.threshold);
          else expect(r.total).toBeGreaterThanOrEqual(limit(r));
        }
        const f = track('step', (signal) => w.engine.afterStep({ signal }));
        f.starter = from === 'idle' && atStart(step.outcome);
        // The gate measures for real; other calls in the queue are the background run's.
        await (await w.ctl.takeOf('measure')).runReal();
        // A starting step is answered when its run's bracket opens, or its run ends (below).
        if (f.starter) break;
        if (f.reply === 'background.proceed') await drain(w, [f]);
        else if (f.reply !== 'background.waiting') await within(f.promise, `afterStep answered ${f.reply}`);
        else await gateWaiting(w);
        break;
      }
      case 'await': {
        const f = track('await', (signal) => w.engine.onRequestError(srv.overflowError, { signal }));
        if (f.reply === 'background.proceed') await drain(w, [f]);
        else await gateWaiting(w);
        break;
      }
      case 'cancel': {
        const job = waiting()
          .filter((f) => !f.done)
          .at(-1);
        if (!job) throw new Error('a cancel with no job waiting: the catalog offers it only then');
        if (from === 'summarizing') {
          // The summary request is in flight when the caller gives up: it is aborted over HTTP.
          const call = await w.ctl.take('summarize');
          w.srv.queue.push({ kind: 'hang' });
          const index = w.srv.server.requests.length;
          const settled = call.runReal();
          await w.srv.server.waitForRequest(index);
          job.controller.abort(new Error('user pressed Ctrl-C'));
          const r = await settled;
          expect((r.error as { code?: string }).code).toBe('summary-cancelled');
          expect((await w.srv.server.waitForClose(index)).aborted, 'the summary HTTP request was aborted').toBe(true);
        } else if (from === 'ready') {
          const call = await w.ctl.take('revalidate');
          job.controller.abort(new Error('user pressed Ctrl-C'));
          await tick();
          await call.runReal(); // a late answer to a stopped actor: dropped
        } else {
          // The run notes it; the call it waits on answers the next step.
          job.controller.abort(new Error('user pressed Ctrl-C'));
        }
        break;
      }
      case 'agent.working': {
        // The agent's reply is recorded: the engine tells the chart the slot is free.
        route(w, 'slot1');
        w.writer.assistant({ text: 'the tool ran; reading on' });
        break;
      }
      case 'cancel:unasked': {
        // FORCED: nothing running and no job waiting; no real engine sends this.
        const bg = (w.engine.actor.getSnapshot().children as Record<string, { send(e: unknown): void } | undefined>).background!;
        bg.send({ type: 'cancel' });
        break;
      }
      case 'selectRange:range':
      case 'selectRange:nothing': {
        const call = await w.ctl.take('selectRange');
        expectSelection(call.input);
        await call.runReal();
        expect(call.error, 'selection').toBeUndefined();
        expect(call.output === null).toBe(step.outcome === 'selectRange:nothing');
        ctx.range = (call.output as RunCtx['range']) ?? undefined;
        break;
      }
      case 'selectRange:throws': {
        const call = await w.ctl.take('selectRange');
        expectSelection(call.input);
        route(w, 'mystery');
        const r = await call.runReal();
        expect((r.error as { code?: string }).code).toBe('no-context-capacity');
        break;
      }
      case 'revalidate:span-changed': {
        const call = await w.ctl.take('revalidate');
        // Another writer rewrote a node inside the span while its summary was prepared.
        rewriteNode(w, ctx.range!.end);
        await call.runReal();
        expect((call.output as { stable: boolean }).stable).toBe(false);
        break;
      }
      default:
        await settleTxStep(w, step, path.steps[i + 1], ctx);
    }
    // The bracket opened: the step that started the run is answered and goes on.
    if (step.outcome === 'openBracket:opened') {
      const starter = facades.find((f) => f.starter && !f.done);
      if (starter && starter.reply === 'background.preparing') await within(starter.promise, 'afterStep answered preparing once the bracket opened');
    }
    // A run the path ends here: once the real one has ended, the jobs it released run to their end.
    const next = i + 1 < path.steps.length ? path.steps[i + 1]!.from : path.finalValue;
    if (next === 'idle' && from !== 'idle') {
      const bgValue = () =>
        (w.engine.actor.getSnapshot().children as Record<string, { getSnapshot(): { value: unknown } } | undefined>).background?.getSnapshot().value;
      for (let t = 0; t < 400 && bgValue() !== 'idle'; t++) await new Promise((r) => setTimeout(r, 5));
      const released = waiting();
      for (const f of released) f.reply = 'released';
      // A starting step whose run ended before its bracket opened: its job runs as usual.
      const starters = facades.filter((f) => f.starter && !f.done && f.reply === 'background.proceed');
      await drain(w, [...released, ...starters]);
    }
  }
  w.ctl.setAuto();
  await within(Promise.all(facades.map((f) => f.promise)), 'every call of the path');

  // The real chart took the generated path.
  if (process.env.DEBUG_BG)
    console.log(
      w.recorded
        .slice(w.mark)
        .map((r) => `${r.machine}/${r.actor}: ${r.transitions.map((t) => t.name).join(' | ')}`)
        .join('\n'),
    );
  expectPathTaken(w, path, byKey);

  // What each caller was answered (docs/spec.md#13-background-compaction).
  const waitedRuns = want.runs.filter((r) => r.waiters > 0);
  const heldCommitsOnly = waitedRuns.length > 0 && waitedRuns.every((r) => r.held && r.status === 'committed');
  for (const f of facades) {
    expect(f.error, `${f.kind}: no error`).toBeUndefined();
    if (f.kind !== 'step') continue;
    const r = f.result as AfterStepResult;
    if (f.reply === 'background.preparing') expect(['preparing', 'committed']).toContain(r.status);
    else if (f.reply === 'released') {
      expect(['waited', 'committed', 'cancelled', 'failed', 'compacted', 'stuck']).toContain(r.status);
      if (f.controller.signal.aborted) expect(r.status).toBe('cancelled');
      // Released by the commit of a held summary: it waited for three appends, not for a model.
      else if (heldCommitsOnly) expect(r.status, 'a step released by a held commit').toBe('committed');
    } else if (f.starter) {
      // Its run ended before its bracket opened; its own job ran (a route of unknown capacity is skipped).
      expect(['below', 'compacted', 'skipped'], `${f.reply}: ${r.status}`).toContain(r.status);
    } else expect(['below', 'compacted'], `${f.reply}: ${r.status}`).toContain(r.status);
  }

  // Every run that ended was handed over once, in order, with its error: to a later job's answer,
  // or still kept for the next one.
  type Outcome = { status: string; waited: boolean; held: boolean; error?: { code: string; cause?: string } };
  const handed = w.settled.flatMap((e) => (e as { result: { output?: { background?: { outcomes: Outcome[] } } } }).result.output?.background?.outcomes ?? []);
  const bgActor = (w.engine.actor.getSnapshot().children as Record<string, { getSnapshot(): { context: { unreported: Outcome[] } } }>).background!;
  const runs = [...handed, ...bgActor.getSnapshot().context.unreported].map((x) => ({
    status: x.status,
    waited: x.waited,
    held: x.held,
    code: x.error?.code,
    cause: x.error?.cause,
  }));
  expect(runs, 'the runs, as the host learns of them').toEqual(
    want.runs.map((r) => ({ status: r.status, waited: r.waiters > 0, held: r.held, code: r.code, cause: r.cause })),
  );

  // Announced: every opened bracket's start, then its commit or failure, all marked background.
  const bgNotes = w.notes.filter((n) => (n as { background?: boolean }).background === true).map((n) => n.type);
  expect(bgNotes).toEqual(
    want.runs.flatMap((r) => (r.opened ? ['compaction.started', r.status === 'committed' ? 'compaction.committed' : 'compaction.failed'] : [])),
  );
  // The breaker: a failed run counts unless busy; a commit resets (failure limit 3: never opens here).
  const failures = want.runs.reduce((n, r) => (r.status === 'committed' ? 0 : r.status === 'failed' && !r.busy ? n + 1 : n), 0);
  if (!o.some((x) => x === 'await' || x === 'step:threshold' || x === 'step:above-threshold'))
    expect(w.engine.actor.getSnapshot().context.consecutiveFailures).toBe(failures);

  // The log: background brackets marked as such, each in the turn its run started in; each run
  // that opened one closed it once. The announced start says when the cost model started it.
  expectLogOnlyGrew(w);
  const added = newEvents(w);
  const bgStarts = added.filter((e) => e.type === 'compaction/start' && (e.data as { background?: boolean }).background === true);
  const opened = want.runs.map((r, i) => ({ ...started[i]!, opened: r.opened })).filter((r) => r.opened);
  expect(bgStarts.map((e) => (e.data as { turn: number | null }).turn)).toEqual(opened.map((r) => r.turn));
  const startNotes = w.notes.filter((n) => n.type === 'compaction.started' && (n as { background?: boolean }).background === true);
  expect(startNotes.map((n) => (n as { economics?: { decision: string } }).economics?.decision)).toEqual(
    opened.map((r) => (r.early ? 'compact-early' : undefined)),
  );
  const storeBroke = o.includes('flush:store-fails') || o.includes('closeWithError:close-fails');
  expect(w.session.length).toBeGreaterThanOrEqual(startCount);
  expectValidRequest(w);
  if (!storeBroke) {
    expect(w.session.lock.held).toBe(o.includes('validateSpan:lock-held') || o.includes('openBracket:append-refused'));
    await (await expectReplays(w)).close();
  } else {
    w.engine.stop();
    await w.session.close().catch(() => undefined);
    const reopened = await Session.open(w.store, w.id);
    expect(reopened.loadReport.tornTail).toBeDefined();
    expect(reopened.lock).toMatchObject({ held: true, orphan: true });
    await reopened.close();
  }
}

export type { Call };
