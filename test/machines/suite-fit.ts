/**
 * Fit paths on the real engine: `engine.beforeRequest()` after a step, its pressure job run for
 * real, then the fit chart's readings and cuts each settled as the path says (suite of
 * machines/fit.ts).
 *
 * Produced by the world: a request routed to a model whose window is unknown (unjudged); a small
 * step (within); a step whose five tool results outgrow the 4,000-token window of `test/tiny`,
 * all of them in the retained tail pruning protects (over, then a cut that frees enough: within); a user message that alone outgrows it, no tool result on the
 * surface (over, a cut that frees nothing); pruning off (`pruner: false`: over, nothing cut);
 * the caller's signal aborted while a reading or a cut is held (cancel).
 * Forced (FORCED_OUTCOMES.fit): a reading or a cut that throws; a reading still over after a cut
 * that freed something; a route gone between two readings; and whatever follows a forced reading
 * (the chart then acts on figures the world does not have).
 */
import { expect } from 'vitest';
import type { FitOutput } from '../../src/machines/fit';
import type { PruneSummary } from '../../src/machines/types';
import { BudgetError } from '../../src/services/config';
import type { WindowResult } from '../../src/services/pressure';
import { FIT_OFFERS } from './catalogs';
import type { Call } from './controller';
import type { TransitionInfo } from './model';
import type { GeneratedPath } from './paths';
import { expectLogOnlyGrew, expectPathTaken, expectReplays, expectValidRequest, markRun, openWorld, route, startTurn, type Server, type World } from './runner';

const FORCED = new Set(['measure:throws', 'measure:over-after-cut', 'measure:unjudged-after-cut', 'cut:throws']);

/** About 1,000 o200k tokens of code. */
const bigResult = (i: number) => Array.from({ length: 60 }, (_, k) => `export const v${i}_${k} = compute(${k * 37}, "file${i}:${k}"); // line ${k}`).join('\n');

/** Arranges the world so the first reading (and a real cut) give what the path asks for. */
function build(w: World, outcomes: string[]): void {
  if (outcomes[0] === 'measure:unjudged') {
    // Routed to a model with no known window (the engine runs with requireCapacity: false): not judged.
    startTurn(w, 'Hello.');
    w.writer.startStep();
    route(w, 'mystery');
    return;
  }
  startTurn(w, 'Read the files.');
  const firstCut = outcomes.find((o) => o.startsWith('cut:'));
  if (outcomes[0] === 'measure:within' || outcomes[0] === 'measure:throws') {
    w.writer.startStep();
    route(w, 'tiny');
    return;
  }
  if (firstCut === 'cut:nothing') {
    // Over the window with no tool result to cut: the newest user message alone.
    w.writer.endTurn();
    startTurn(w, bigResult(0).repeat(5));
    w.writer.startStep();
    route(w, 'tiny');
    return;
  }
  // One step that read five files, over the window: the newest results, which pruning protects.
  w.writer.startStep();
  route(w, 'tiny');
  const calls = Array.from({ length: 5 }, (_, i) => ({ id: `read${i}`, name: 'read_file', arguments: JSON.stringify({ path: `f${i}.ts` }) }));
  w.writer.assistant({ toolCalls: calls });
  calls.forEach((c, i) => w.writer.toolResult(c.id, bigResult(i), { toolName: 'read_file' }));
  w.writer.endStep();
  w.writer.startStep();
  route(w, 'tiny');
}

function produced(call: Call, out: { output?: unknown; error?: unknown }): string {
  if (out.error !== undefined) return `${call.service === 'measureWindow' ? 'measure' : 'cut'}:throws`;
  if (call.service === 'cut') return (out.output as { count: number }).count > 0 ? 'cut:cut' : 'cut:nothing';
  const r = out.output as { kind: string; reading?: { totalTokens: number; messageBudget: number } };
  if (r.kind === 'unjudged') return 'measure:unjudged';
  return r.reading!.totalTokens <= r.reading!.messageBudget ? 'measure:within' : 'measure:over';
}

const offerOf = (outcome: string) => {
  const [service, name] = outcome.split(':') as [string, string];
  return FIT_OFFERS[service]!.find((o) => o.outcome === name)!;
};

export async function runFitPath(srv: Server, path: GeneratedPath, byKey: Map<string, TransitionInfo>): Promise<void> {
  const outcomes = path.steps.map((s) => s.outcome);
  // Pruning protects every result (the step's results all in the retained tail, as in a small
  // window): the pressure job cannot relieve the request, only the fit chart's cut can.
  const w = await openWorld(srv, {
    quickCheck: false,
    config: { prune: { protectRecentTokens: 100_000 } },
    ...(path.input === 'cut off' ? { pruner: false as const } : {}),
  });
  build(
    w,
    outcomes.filter((o) => o !== 'cancel'),
  );
  markRun(w);
  // The pressure job runs for real; the fit chart's calls wait for the path.
  const held: Call[] = [];
  const waiting: Array<() => void> = [];
  const hold = (c: Call) => {
    held.push(c);
    for (const r of waiting.splice(0)) r();
  };
  w.ctl.setAuto({ measureWindow: hold, cut: hold });
  const next = async (): Promise<Call> => {
    for (let i = 0; i < 200 && held.length === 0; i++) await new Promise<void>((r) => (waiting.push(r), setTimeout(r, 50)));
    const c = held.shift();
    if (!c) throw new Error('expected a call of the fit chart; none came');
    return c;
  };
  // The chart's own answer, as a host reads it from the engine (the facade keeps only its verdict).
  let settledFit: FitOutput | undefined;
  const sub = w.engine.actor.on('request.settled', (e) => {
    if (e.result.kind === 'fit') settledFit = e.result.output;
  });
  const controller = new AbortController();
  const answer = w.engine.beforeRequest({ signal: controller.signal }).then(
    (r) => ({ result: r }),
    (error: unknown) => ({ error }),
  );

  let pending: Call | undefined;
  // After a forced reading the chart and the world disagree: what follows is forced too.
  let forcedBefore = false;
  // What each reading and cut gave the chart, in order.
  const readings: Array<WindowResult> = [];
  const cuts: PruneSummary[] = [];
  let failed = false;
  const note = (service: string, out: { output?: unknown; error?: unknown }) => {
    if (out.error !== undefined) failed = true;
    else if (service === 'measureWindow') readings.push(out.output as WindowResult);
    else cuts.push(out.output as PruneSummary);
  };
  for (const step of path.steps) {
    if (step.outcome === 'cancel') {
      pending = await next();
      controller.abort(new Error('user pressed Ctrl-C'));
      continue;
    }
    const call = pending ?? (await next());
    pending = undefined;
    expect(call.service).toBe(step.outcome.startsWith('measure:') ? 'measureWindow' : 'cut');
    if (FORCED.has(step.outcome) || forcedBefore) {
      forcedBefore = true;
      let offer: { output?: unknown; error?: unknown } = offerOf(step.outcome);
      // Each forced reading a little lower than the one before: the chart must keep the newest.
      if (step.outcome === 'measure:over-after-cut') {
        const r = (offer.output as { reading: { totalTokens: number } }).reading;
        offer = { output: { kind: 'reading', reading: { ...r, totalTokens: r.totalTokens - 10 * readings.length } } };
      }
      if ('error' in offer) call.reject(offer.error);
      else call.resolve(offer.output);
      note(call.service, offer);
      continue;
    }
    const out = await call.runReal();
    note(call.service, out);
    expect(produced(call, out), `the world gives ${step.outcome}`).toBe(step.outcome);
  }
  // A call the chart no longer waits for (after a cancel): answered, and dropped.
  if (pending) await pending.runReal();
  const settled = await answer;

  sub.unsubscribe();
  const status = (path.finalContext as { status: string }).status;
  // The chart's record: the first and the last reading it judged, the cuts summed, an error kept.
  const byReading = readings.map((r) => (r.kind === 'reading' ? r.reading : undefined));
  const freed = cuts.filter((c) => c.count > 0);
  if (status !== 'cancelled') {
    expect(settledFit).toMatchObject({ status });
    expect(settledFit!.before).toEqual(byReading[0]);
    // A reading not judged (the route gone) changes nothing the chart knew.
    expect(settledFit!.after).toEqual(byReading.filter((r) => r !== undefined).at(-1));
    expect(settledFit!.cut).toEqual(
      freed.length === 0 ? undefined : { count: freed.reduce((n, c) => n + c.count, 0), tokensFreed: freed.reduce((n, c) => n + c.tokensFreed, 0) },
    );
    expect(settledFit!.error !== undefined).toBe(failed);
  }
  // Each cut that freed something is announced, with how far over the reading it was sized on was.
  const announced = w.notes.filter((n) => n.type === 'fit.cut');
  expect(announced.map((n) => (n as { count: number }).count)).toEqual(freed.map((c) => c.count));
  announced.forEach((n, i) => {
    const r = byReading[i]!;
    expect((n as { over: number }).over).toBe(r.totalTokens - r.messageBudget);
  });
  if (status === 'over') {
    expect('error' in settled && settled.error).toBeInstanceOf(BudgetError);
    expect((settled as { error: BudgetError }).error.code).toBe('request-over-window');
  } else {
    expect(settled).toHaveProperty('result');
  }
  const prunes = w.session.events().filter((e) => e.type === 'compaction/prune').length;
  if (outcomes.includes('cut:cut') && !forcedBefore) expect(prunes).toBeGreaterThan(0);
  if (status === 'fits' && outcomes.includes('cut:cut')) {
    const m = w.engine.measure();
    expect(m.totalTokens).toBeLessThanOrEqual(m.contextWindow! - 500);
  }
  w.ctl.setAuto();
  expectPathTaken(w, path, byKey);
  expectLogOnlyGrew(w);
  expectValidRequest(w);
  const reopened = await expectReplays(w);
  await reopened.close();
}
