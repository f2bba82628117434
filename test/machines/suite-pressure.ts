/**
 * Pressure paths on the real engine: `afterStep` over a world built for the path (see
 * `worldFor`), each service call of the pressure chart settled as the path says, the
 * transaction child driven by the sub-scripts of tx-outcomes.ts.
 *
 * Produced by the world: every measure reading (no header yet → unrouted, a header for an
 * unknown model → misconfigured, steps until over/under the threshold, a huge result that
 * pruning cuts, a newest unit bigger than the threshold, summaries that barely shrink),
 * prune/selectRange failures (a request/header for an unknown model appended after the
 * measurement: the budget can no longer be resolved), cancel (the caller's signal, aborted
 * while a call is held, or already aborted when afterStep is called: input `aborted`), a
 * transaction cancelled with no cancel of this chart (the host's own summarizer aborts its
 * request: see tx-outcomes.ts).
 * Forced: `measure` throws (the meter only throws on a bug; the call rejects), and the
 * transaction child's chart error (see tx-outcomes.ts).
 */
import { expect } from 'vitest';
import { COMPACTION_CHECKPOINT_SOURCE } from '../../src/session/events';
import type { RangeSelection } from '../../src/services/selection';
import type { TransitionInfo } from './model';
import type { GeneratedPath, PathStep } from './paths';
import {
  endTurn,
  expectLogOnlyGrew,
  expectPathTaken,
  expectReplays,
  expectValidRequest,
  fillAbove,
  fillBelow,
  markRun,
  newEvents,
  openWorld,
  pressureNow,
  route,
  startTurn,
  summaryOfTokens,
  summaryRequests,
  textOfTokens,
  toolStep,
  type Server,
  type World,
  type WorldOptions,
} from './runner';
import { runTxSubscript, takeRange, txSubscriptName, type RunCtx } from './tx-outcomes';

const STATUS: Record<string, string> = {
  skipped: 'skipped',
  below: 'below',
  relievedByPruning: 'relieved-by-pruning',
  stuck: 'stuck',
  compacted: 'compacted',
  truncated: 'truncated',
  failed: 'failed',
  cancelled: 'cancelled',
};

const PRUNE_FAST = { thresholdChars: 2000, headChars: 800, tailChars: 400, protectRecentTokens: 0, minReclaimTokens: 1 };

interface Recipe {
  name: string;
  options: WorldOptions;
  build(w: World, srv: Server): Promise<void>;
  summaryText?: (range: RangeSelection) => string;
}

function seq(outcomes: string[], ...pattern: string[]): boolean {
  return outcomes.join(' ').includes(pattern.join(' '));
}

/** The world each path needs, read from its outcomes. */
export function worldFor(path: GeneratedPath): Recipe {
  const o = path.steps.map((s) => s.outcome);
  const pruneOff = path.input === 'prune off' ? ({ pruner: false } as const) : {};
  if (path.input === 'fallback') {
    // truncationFallback on: the server answers the summary 500, a truncation of the same span follows.
    return {
      name: 'over the threshold, the fallback on',
      options: { pruner: false, config: { truncationFallback: true } },
      build: async (w) => fillAbove(w, 100),
    };
  }
  if (path.input === 'breaker open') {
    // The breaker opened on one failed summary (failureLimit 1): the next relief asks no model.
    return {
      name: 'over the threshold with the breaker open',
      options: { pruner: false, config: { truncationFallback: true, circuitBreaker: { failureLimit: 1, cooldownMs: 60_000 } } },
      build: async (w) => {
        fillAbove(w, 100);
        w.srv.queue.push({
          kind: 'status',
          status: 500,
          body: { error: { message: 'The server had an error', type: 'server_error', param: null, code: null } },
        });
        w.ctl.setAuto();
        expect((await w.engine.afterStep()).status).toBe('truncated');
        expect(w.notes.some((n) => n.type === 'breaker.opened')).toBe(true);
        w.ctl.hold();
        fillAbove(w, 100);
      },
    };
  }
  if (o[0] === 'measure:below-pays') {
    // A long session of small steps, under the threshold, far enough above what an early
    // compaction would leave (checkpoint + floor tail) that compacting now pays.
    return {
      name: 'a long session under the threshold, where compacting early pays (forgetting priced at zero)',
      options: { config: { economics: true, forgetting: 0 } },
      build: async (w) => {
        for (let i = 0; i < 400; i++) {
          toolStep(w, { open: true, result: `ok ${i}` });
          if (pressureNow(w).total >= 0.75 * pressureNow(w).threshold) return;
        }
        throw new Error('below-pays: never got near the threshold');
      },
    };
  }
  if (o[0] === 'measure:below-prune-pays') {
    // Forgetting priced at zero: a long session of small steps, then an oversized newest result
    // that keeps the request under the threshold; pruning it rewrites nothing after it.
    return {
      name: 'an oversized newest result under the threshold, where pruning early pays (forgetting priced at zero)',
      options: { config: { economics: true, forgetting: 0, prune: PRUNE_FAST } },
      build: async (w) => {
        for (let i = 0; i < 40; i++) toolStep(w, { result: `ok ${i}` });
        toolStep(w, { open: true, result: 'y '.repeat(1100) });
      },
    };
  }
  if (o[0] === 'measure:above-nothing-to-prune') {
    // Over the threshold with nothing a prune could free: the relief is a summary alone.
    return {
      name: 'one indivisible message over the threshold, the cost model on',
      options: { config: { economics: true } },
      build: async (w) => {
        w.writer.startTurn();
        route(w);
        w.writer.user(textOfTokens(pressureNow(w).threshold + 200));
      },
    };
  }
  if (o[0] === 'measure:above-prune-relieves') {
    // Over the threshold because of the newest, huge tool result: pruning it alone brings the request under.
    return {
      name: 'a huge newest tool result over the threshold, the cost model on',
      options: { config: { economics: true, prune: PRUNE_FAST } },
      build: async (w) => {
        for (let i = 0; i < 3; i++) toolStep(w);
        toolStep(w, { open: true, result: Array.from({ length: 2500 }, (_, i) => `line${i}`).join(' ') });
      },
    };
  }
  if (o[0] === 'measure:above-prune-then-summarize') {
    // One old oversized result, then ordinary steps far enough over the threshold that pruning it is not enough.
    return {
      name: 'an old oversized result, then the threshold overshot by more than pruning it frees',
      options: { config: { economics: true, prune: PRUNE_FAST } },
      build: async (w) => {
        toolStep(w, { result: textOfTokens(1500) });
        fillAbove(w, 1_400);
      },
    };
  }
  if (o[0] === 'measure:unrouted') {
    return {
      name: 'nothing routed yet',
      options: pruneOff,
      build: async (w) => {
        w.writer.startTurn();
        w.writer.user('Please fix the build.');
      },
    };
  }
  if (o[0] === 'measure:misconfigured') {
    return {
      name: 'routed to an unknown model',
      options: pruneOff,
      build: async (w) => {
        startTurn(w);
        route(w, 'mystery');
      },
    };
  }
  if (o[0] === 'measure:silent-overflow' && o.includes('selectRange:nothing')) {
    return {
      name: 'the provider reported a prompt above the window, one indivisible message',
      options: pruneOff,
      build: async (w) => {
        // The reply is the one big node: before it only a short question, which cannot pay for a
        // checkpoint (a big message before the reply would be condensed: a cut may move toward the tail).
        w.writer.startTurn();
        route(w);
        w.writer.user('Read it all out, please.');
        w.writer.startStep();
        w.writer.assistant({ text: textOfTokens(1500), usage: { promptTokens: 6100, completionTokens: 5 } });
      },
    };
  }
  if (o[0] === 'measure:silent-overflow') {
    // The provider answered a prompt above the 6000-token window: it cut the request silently.
    return {
      name: 'the provider reported a prompt above the window',
      options: { ...pruneOff, config: { prune: PRUNE_FAST } },
      build: async (w) => {
        for (let i = 0; i < 5; i++) toolStep(w);
        toolStep(w, { open: true, result: Array.from({ length: 2500 }, (_, i) => `line${i}`).join(' '), promptTokens: 6100 });
      },
    };
  }
  if (o[0] === 'measure:below') return { name: 'under the threshold', options: pruneOff, build: async (w) => fillBelow(w) };
  if (seq(o, 'prune:pruned', 'measure:below')) {
    return {
      name: 'one huge result that pruning cuts',
      options: { ...pruneOff, config: { prune: PRUNE_FAST } },
      build: async (w) => {
        toolStep(w, { result: 'x'.repeat(1500) });
        toolStep(w, { open: true, result: Array.from({ length: 2500 }, (_, i) => `line${i}`).join(' ') });
      },
    };
  }
  if (seq(o, 'prune:pruned', 'measure:above', 'selectRange:nothing')) {
    // One unit: a reply whose own text is over the threshold and whose tool result pruning cuts.
    return {
      name: 'one long reply whose tool result pruning cuts, still over the threshold',
      options: { config: { prune: PRUNE_FAST } },
      build: async (w) => {
        startTurn(w);
        w.writer.startStep();
        route(w);
        w.writer.assistant({
          text: textOfTokens(pressureNow(w).threshold),
          toolCalls: [{ id: 'c1', name: 'bash', arguments: JSON.stringify({ command: 'ls' }) }],
        });
        w.writer.toolResult('c1', Array.from({ length: 2500 }, (_, i) => `line${i}`).join(' '), { toolName: 'bash' });
      },
    };
  }
  const firstSelect = o.find((x) => x.startsWith('selectRange:'));
  if (firstSelect === 'selectRange:nothing') {
    return {
      name: 'one indivisible message over the threshold',
      options: pruneOff,
      build: async (w) => {
        w.writer.startTurn();
        route(w);
        w.writer.user(textOfTokens(pressureNow(w).threshold + 200));
      },
    };
  }
  if (seq(o, 'transaction:committed', 'measure:above', 'selectRange:nothing')) {
    return {
      name: 'a newest unit bigger than the threshold',
      options: pruneOff,
      build: async (w) => {
        for (let i = 0; i < 5; i++) toolStep(w);
        toolStep(w, { open: true, result: textOfTokens(pressureNow(w).threshold + 100) });
      },
    };
  }
  if (seq(o, 'transaction:committed', 'measure:above', 'selectRange:range')) {
    return {
      name: 'a small checkpoint at the head, then summaries that barely shrink',
      options: { ...pruneOff, config: { minProgressRatio: 0 } },
      build: async (w) => {
        fillAbove(w);
        w.ctl.setAuto();
        const first = await w.engine.afterStep();
        expect(first.status).toBe('compacted');
        w.ctl.hold();
        fillAbove(w, 150);
      },
      // Less than the span by more than the checkpoint ledger the engine appends (the user's messages).
      summaryText: (range) => summaryOfTokens(range.tokens - 80),
    };
  }
  if (o.includes('prune:pruned')) {
    // Long tool results the prune pass cuts (it frees something: the catalog says `pruned`).
    const long = Array.from({ length: 400 }, (_, i) => `out${i}`).join(' ');
    return {
      name: 'over the threshold with long tool results',
      options: { config: { prune: PRUNE_FAST } },
      build: async (w) => fillAbove(w, 100, { result: long }),
    };
  }
  return { name: 'over the threshold', options: pruneOff, build: async (w) => fillAbove(w, 100) };
}

const SERVICE_OF_STATE: Record<string, 'measure' | 'prune' | 'selectRange'> = {
  measuring: 'measure',
  pruning: 'prune',
  remeasuringAfterPrune: 'measure',
  selecting: 'selectRange',
  remeasuring: 'measure',
};

/** A header for a model the registry does not know: the budget cannot be resolved any more. */
function unroute(w: World): void {
  route(w, 'unknown-after-measuring');
}

async function settlePressureStep(w: World, step: PathStep, next: PathStep | undefined, ctx: RunCtx): Promise<boolean> {
  const running = ctx.running;
  const [service, outcome] = step.outcome.split(':') as [string, string | undefined];
  if (step.outcome === 'cancel') {
    if (step.from === 'compacting' || step.from === 'truncating') {
      // Forwarded to the transaction and remembered: whatever it ends with, nothing new starts.
      await runTxSubscript(w, txSubscriptName(next!.outcome.split(':')[1]!, true, step.from === 'truncating'), ctx);
      return true; // the next step (the transaction's outcome) is done too
    }
    const call = await w.ctl.take(SERVICE_OF_STATE[step.from as string]!, running);
    ctx.abort();
    await call.runReal(); // answered after the chart left the state: dropped
    return false;
  }
  if (service === 'transaction') {
    await runTxSubscript(w, txSubscriptName(outcome!, false, step.from === 'truncating'), ctx);
    return false;
  }
  if (service === 'measure') {
    const call = await w.ctl.take('measure', running);
    // FORCED: the meter throws only on a bug.
    if (outcome === 'throws') return (void call.reject(Object.assign(new Error('scripted meter failure'), { code: 'internal' })), false);
    await call.runReal();
    const r = call.output as { kind: string; reading?: { totalTokens: number; threshold: number } };
    const economics = (r.reading as { economics?: { compaction?: { pays: boolean }; prune?: { pays: boolean }; relief?: { choice: string } } } | undefined)
      ?.economics;
    const relief = { 'above-prune-relieves': 'prune', 'above-nothing-to-prune': 'summarize', 'above-prune-then-summarize': 'prune-then-summarize' }[outcome!];
    if (outcome === 'below-pays') {
      expect(r.reading!.totalTokens).toBeLessThan(r.reading!.threshold);
      expect(economics?.compaction?.pays).toBe(true);
    } else if (outcome === 'below-prune-pays') {
      expect(r.reading!.totalTokens).toBeLessThan(r.reading!.threshold);
      expect(economics?.compaction?.pays).not.toBe(true);
      expect(economics?.prune?.pays).toBe(true);
    } else if (relief !== undefined) {
      expect(r.reading!.totalTokens).toBeGreaterThanOrEqual(r.reading!.threshold);
      expect(economics?.relief?.choice).toBe(relief);
    } else if (outcome === 'silent-overflow') expect((r.reading as { silentOverflow?: unknown }).silentOverflow).toBeDefined();
    else if (outcome === 'above') expect(r.reading!.totalTokens).toBeGreaterThanOrEqual(r.reading!.threshold);
    else if (outcome === 'below') expect(r.reading!.totalTokens).toBeLessThan(r.reading!.threshold);
    else expect(r.kind).toBe(outcome);
    return false;
  }
  if (service === 'prune' || service === 'selectRange') {
    if (outcome === 'throws') {
      const call = await w.ctl.take(service, running);
      unroute(w);
      const r = await call.runReal();
      expect((r.error as { code?: string }).code).toBe('no-context-capacity');
      return false;
    }
    if (service === 'prune') {
      const call = await w.ctl.take('prune', running);
      await call.runReal();
      expect((call.output as { count: number }).count, 'the prune pass cut something').toBeGreaterThan(0);
    } else {
      const call = await takeRange(w, ctx);
      expect(call.output === null).toBe(outcome === 'nothing');
    }
    return false;
  }
  throw new Error(`no runtime production for pressure outcome ${step.outcome}`);
}

export async function runPressurePath(srv: Server, path: GeneratedPath, byKey: Map<string, TransitionInfo>): Promise<void> {
  const recipe = worldFor(path);
  const o = path.steps.map((s) => s.outcome);
  const hostCancels = o.includes('transaction:cancelled') && !o.includes('cancel');
  const w = await openWorld(srv, { ...recipe.options, ...(hostCancels ? { hostSummarizer: true } : {}) });
  await recipe.build(w, srv);
  const messagesBefore = JSON.stringify(w.session.deriveMessages());
  markRun(w);
  const callsBefore = w.ctl.calls.length;

  const controller = new AbortController();
  // The step was reported with a signal the caller had already aborted.
  if (path.input === 'aborted') controller.abort(new Error('aborted before afterStep'));
  const running = w.engine.afterStep({ signal: controller.signal });
  const ctx: RunCtx = {
    abort: () => controller.abort(new Error('user pressed Ctrl-C')),
    running,
    range: undefined,
    summaryFailure: 'http-500',
    ...(recipe.summaryText ? { summaryText: recipe.summaryText } : {}),
  };
  for (let i = 0; i < path.steps.length; i++) {
    const skipNext = await settlePressureStep(w, path.steps[i]!, path.steps[i + 1], ctx);
    if (skipNext) i++;
  }
  w.ctl.setAuto();
  const result = await running;
  if (path.input === 'aborted') {
    // Nothing ran: no service was called, nothing was written or asked of the server.
    expect(w.ctl.calls).toHaveLength(0);
    expect(newEvents(w)).toHaveLength(0);
  }
  endTurn(w);

  expectPathTaken(w, path, byKey);

  // The facade's answer.
  const final = path.finalValue as string;
  expect(result.status, recipe.name).toBe(STATUS[final]);
  if (final === 'failed') {
    const code = o.some((x) => x.endsWith(':throws') || x === 'transaction:chart-error')
      ? 'internal'
      : o.includes('transaction:truncation-failed')
        ? 'changed'
        : o.includes('transaction:failed')
          ? 'summary'
          : 'still-above-threshold';
    expect(result.error?.code).toBe(code);
  } else if (final === 'cancelled') {
    // Cancelled before or between steps: no error; a transaction that was cancelled reports it,
    // one that committed anyway is kept (and reported below) with no error.
    const txCancelled = o.includes('transaction:cancelled');
    expect(result.error?.code).toBe(txCancelled ? 'cancelled' : undefined);
  } else {
    expect(result.error).toBeUndefined();
  }
  if (final === 'relievedByPruning') expect(result.pruned!.count).toBeGreaterThan(0);
  const readings = w.ctl.calls
    .slice(callsBefore)
    .filter((c) => c.service === 'measure' && (c.output as { kind?: string } | undefined)?.kind === 'reading')
    .map((c) => (c.output as { reading: { totalTokens: number } }).reading.totalTokens);
  // The first measurement is reported, also when a cancel came after it.
  if (o[0]?.startsWith('measure:') && readings.length > 0) expect(result.before?.totalTokens).toBe(readings[0]);
  // A prune that threw is announced (compaction went on without it).
  expect(w.notes.filter((n) => n.type === 'prune.failed')).toHaveLength(o.filter((x) => x === 'prune:throws').length);
  if (!o.includes('cancel') && path.input !== 'aborted') {
    // The last reading the chart took is reported too.
    expect(result.before?.totalTokens).toBe(readings[0]);
    expect(result.after?.totalTokens).toBe(readings.at(-1));
    // Every prune that freed something is announced.
    const prunes = w.ctl.calls.slice(callsBefore).filter((c) => c.service === 'prune' && ((c.output as { count?: number } | undefined)?.count ?? 0) > 0);
    expect(w.notes.filter((n) => n.type === 'pruned')).toHaveLength(prunes.length);
  }
  // A host of the chart (createCompactionMachine) gets every transaction that ran in the settled
  // output, the silent overflow it was told of (so the next step does not report it again), and
  // the cost model's decision.
  const settled = w.settled.at(-1) as
    { result?: { output?: { transactions?: unknown[]; silentOverflowSeq?: number; economics?: { decision: string } } } } | undefined;
  const out = settled?.result?.output;
  expect(out?.transactions ?? []).toHaveLength(o.filter((x) => x.startsWith('transaction:') && x !== 'transaction:chart-error').length);
  if (!o.includes('transaction:chart-error')) {
    const silent = (
      w.ctl.calls.slice(callsBefore).find((c) => c.service === 'measure')?.output as { reading?: { silentOverflow?: { seq: number } } } | undefined
    )?.reading?.silentOverflow;
    expect(out?.silentOverflowSeq).toBe(o[0] === 'measure:silent-overflow' ? silent!.seq : undefined);
    const decision = {
      'measure:below-pays': 'compact-early',
      'measure:below-prune-pays': 'prune-early',
      'measure:above-nothing-to-prune': 'summarize',
      'measure:above-prune-relieves': 'prune',
      'measure:above-prune-then-summarize': 'prune-then-summarize',
    }[o[0]!];
    expect(out?.economics?.decision).toBe(decision);
  }
  if (o[0] === 'measure:silent-overflow') {
    // Reported once, with the provider's figures; the run compacted (or pruned) as if above the threshold.
    expect(w.notes.filter((n) => n.type === 'overflow.silent')).toEqual([
      expect.objectContaining({ type: 'overflow.silent', promptTokens: 6100, contextWindow: 6000 }),
    ]);
  }
  if (o[0] === 'measure:misconfigured') {
    expect(w.notes.filter((n) => n.type === 'capacity.missing')).toHaveLength(1);
    expect(result.before).toBeUndefined();
  }

  // The log: one closed bracket per transaction; one whose chart broke is closed by the engine.
  expectLogOnlyGrew(w);
  const added = newEvents(w);
  const txs = o.filter((x) => x.startsWith('transaction:')).length;
  const committed = o.filter((x) => x === 'transaction:committed' || x === 'transaction:truncated').length;
  const chartErrors = o.filter((x) => x === 'transaction:chart-error').length;
  expect(added.filter((e) => e.type === 'compaction/start')).toHaveLength(txs);
  // Every truncation checkpoint is marked so in its compaction/summary (the model-free last resort).
  expect(added.filter((e) => e.type === 'compaction/summary' && e.data.truncation !== undefined)).toHaveLength(
    o.filter((x) => x === 'transaction:truncated').length,
  );
  const ends = added.filter((e) => e.type === 'compaction/end');
  expect(ends).toHaveLength(txs);
  const endErrors = ends.map((e) => (e.type === 'compaction/end' ? e.data.error?.code : undefined)).filter((c) => c !== undefined);
  expect(endErrors.filter((c) => c === 'internal')).toHaveLength(chartErrors);
  if (o.includes('transaction:cancelled')) expect(endErrors).toContain('cancelled');
  if (o.includes('transaction:failed')) expect(endErrors).toContain('summary');
  expect(added.filter((e) => e.type === 'user/message' && e.data.source === COMPACTION_CHECKPOINT_SOURCE)).toHaveLength(committed);
  expect(result.compactions).toHaveLength(committed);
  for (const c of result.compactions) expect(c.checkpointTokens).toBeLessThan(c.spanTokens);
  if (final === 'relievedByPruning') expect(added.map((e) => e.type)).toContain('compaction/prune');
  // Every bracket is closed, a broken transaction chart's too: the lock is released.
  expect(w.session.lock.held).toBe(false);
  if (o.includes('cancel') && o.at(-1)?.startsWith('transaction:')) {
    // Cancelled while compacting: whatever the transaction did, nothing started after it (no remeasure, no retry).
    const services = w.ctl.calls.slice(callsBefore).map((c) => c.service);
    expect(['flush', 'closeWithError']).toContain(services.at(-1));
    expect(services.filter((x) => x === 'selectRange')).toHaveLength(1);
  }
  if (committed === 0 && !added.some((e) => e.type === 'compaction/prune') && !o.includes('transaction:truncation-failed'))
    expect(JSON.stringify(w.session.deriveMessages())).toBe(messagesBefore);

  // The chart's policy, as the services received it (this run only): pruning protects recent
  // work; the first selection keeps the retained tail and small earlier checkpoints, a retry
  // merges from the head.
  const run = w.ctl.calls.slice(callsBefore);
  for (const c of run.filter((x) => x.service === 'prune')) expect(c.input).toEqual({ trigger: 'pressure', protectRecent: true });
  const pruneAsked = o.some((x) => x.startsWith('prune:')) || path.steps.some((x) => x.outcome === 'cancel' && x.from === 'pruning');
  expect(run.filter((x) => x.service === 'prune').length > 0).toBe(pruneAsked);
  if (path.input === 'prune off') expect(added.filter((e) => e.type === 'compaction/prune')).toEqual([]);
  run
    .filter((x) => x.service === 'selectRange')
    // An early compaction (the cost model's) keeps the floor tail.
    .forEach((c, i) =>
      expect(c.input).toEqual({
        purpose: 'pressure',
        attempt: i + 1,
        retain: i === 0 && o[0] === 'measure:below-pays' ? 'floor' : 'budget',
        stackCheckpoints: i === 0,
      }),
    );
  expectValidRequest(w);

  // The server got one summary request per transaction that reached the summarizer (a truncation asks none).
  const truncations = path.steps.filter((s) => s.outcome.startsWith('transaction:') && s.from === 'truncating').length;
  expect(summaryRequests(w)).toHaveLength(txs - truncations);

  if (o[0] === 'measure:silent-overflow') {
    // The same reply's usage is not reported again at the next step.
    await w.engine.afterStep();
    expect(w.notes.filter((n) => n.type === 'overflow.silent')).toHaveLength(1);
  }

  const reopened = await expectReplays(w);
  await reopened.close();
}
