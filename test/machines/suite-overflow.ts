/**
 * Overflow-recovery paths on the real engine: `onRequestError` with the SDK errors the local
 * server really produced (an OpenAI context_length_exceeded 400, a non-overflow 400).
 *
 * Produced by the world: every classification (the error passed in; recovery off by
 * config; pruning off by config, `prune.enabled: false`; retries used up by an earlier granted retry with no assistant message since; a
 * revoked Proxy as the thrown value makes classification itself throw), the lock (an orphan
 * compaction/start), pruning (an oversized tool result, or none), a prune that fails (the
 * host closed the session: the prune's append is refused), selection (one unit only →
 * nothing), the generation check (it advanced exactly when something was pruned or
 * committed), cancel (the caller's signal, aborted while a call is held: the call then
 * answers, and the decision after it honours the cancel).
 * Forced: `probeLock` throws and `selectRange` throws (both only read the session; nothing
 * makes them throw), and the transaction child's chart error (see tx-outcomes.ts).
 */
import { expect } from 'vitest';
import { COMPACTION_CHECKPOINT_SOURCE } from '../../src/session/events';
import type { TransitionInfo } from './model';
import type { GeneratedPath, PathStep } from './paths';
import {
  expectLogOnlyGrew,
  expectPathTaken,
  expectReplays,
  expectValidRequest,
  markRun,
  newEvents,
  openWorld,
  route,
  startTurn,
  summaryRequests,
  takeLock,
  toolStep,
  type Server,
  type World,
  type WorldOptions,
} from './runner';
import { runTxSubscript, takeRange, txSubscriptName, type RunCtx } from './tx-outcomes';

const OVERSIZED = Array.from({ length: 1500 }, (_, i) => `row ${i}: ok`).join('\n');

interface Recipe {
  options: WorldOptions;
  build(w: World): Promise<void>;
  error: unknown;
}

function revokedError(): unknown {
  const { proxy, revoke } = Proxy.revocable(new Error('context overflow'), {});
  revoke();
  return proxy;
}

function worldFor(srv: Server, path: GeneratedPath): Recipe {
  const o = path.steps.map((s) => s.outcome);
  // Pruning off by configuration (`prune.enabled: false`): the engine passes it to the chart.
  const options: WorldOptions =
    path.input === 'auto off'
      ? { config: { auto: false } }
      : path.input === 'prune off'
        ? { config: { prune: { enabled: false } } }
        : path.input === 'fallback'
          ? { config: { prune: { enabled: false }, truncationFallback: true } }
          : path.input === 'breaker open'
            ? { config: { prune: { enabled: false }, truncationFallback: true, circuitBreaker: { failureLimit: 1, cooldownMs: 60_000 } } }
            : {};
  const prunable = o.includes('prune:pruned') || o.includes('prune:throws');
  const error = o.includes('classify:other') ? srv.otherError : o.includes('classify:throws') ? revokedError() : srv.overflowError;
  if (o.includes('selectRange:nothing')) {
    // One unit after the system prompt: the newest unit always stays, so nothing is selectable.
    return {
      options,
      error,
      build: async (w) => {
        w.writer.startTurn();
        route(w);
        toolStep(w, { open: true, result: OVERSIZED });
      },
    };
  }
  return {
    options,
    error,
    build: async (w) => {
      startTurn(w);
      toolStep(w, prunable ? { result: OVERSIZED } : {});
      toolStep(w);
      toolStep(w, { open: true });
      if (path.input === 'retries used up') {
        // An earlier overflow got its retry; no assistant message has succeeded since.
        w.ctl.setAuto();
        expect((await w.engine.onRequestError(srv.overflowError)).kind).toBe('retry');
        w.ctl.hold();
      }
      if (path.input === 'breaker open') {
        // The breaker opened on one failed summary (failureLimit 1): the next recovery asks no model.
        srv.queue.push({ kind: 'status', status: 500, body: { error: { message: 'The server had an error', type: 'server_error', param: null, code: null } } });
        w.ctl.setAuto();
        expect((await w.engine.onRequestError(srv.overflowError)).kind).toBe('retry');
        expect(w.notes.some((n) => n.type === 'breaker.opened')).toBe(true);
        w.ctl.hold();
        toolStep(w);
        toolStep(w, { open: true });
      }
      if (o.includes('probeLock:held')) takeLock(w);
    },
  };
}

const SERVICE_OF_STATE: Record<string, 'classify' | 'probeLock' | 'prune' | 'selectRange'> = {
  classifying: 'classify',
  probingLock: 'probeLock',
  pruning: 'prune',
  selecting: 'selectRange',
  deciding: 'probeLock',
};

async function settleOverflowStep(w: World, step: PathStep, next: PathStep | undefined, ctx: RunCtx): Promise<boolean> {
  const running = ctx.running;
  const [service, outcome] = step.outcome.split(':') as [string, string | undefined];
  if (step.outcome === 'cancel') {
    if (step.from === 'compacting' || step.from === 'truncating') {
      await runTxSubscript(w, txSubscriptName(next!.outcome.split(':')[1]!, true, step.from === 'truncating'), ctx);
      return true;
    }
    // Cancel marks the context here: the held call answers the next step, whose decision honours it.
    const call = await w.ctl.take(SERVICE_OF_STATE[step.from as string]!, running);
    ctx.abort();
    w.ctl.putBack(call);
    return false;
  }
  if (service === 'transaction') {
    await runTxSubscript(w, txSubscriptName(outcome!, false, step.from === 'truncating'), ctx);
    return false;
  }
  const call = await w.ctl.take(service as 'classify', running);
  if (outcome === 'throws' && (service === 'probeLock' || service === 'selectRange')) {
    // FORCED: both only read the session.
    call.reject(Object.assign(new Error(`scripted ${service} failure`), { code: 'internal' }));
    return false;
  }
  if (service === 'prune' && outcome === 'throws') {
    // The host shut the session down while recovery ran.
    await w.session.close();
  }
  const r = await call.runReal();
  switch (step.outcome) {
    case 'classify:overflow':
      expect((r.output as { kind: string }).kind).toBe('context-overflow');
      break;
    case 'classify:other':
      expect((r.output as { kind: string }).kind).not.toBe('context-overflow');
      break;
    case 'classify:throws':
      expect(r.error).toBeInstanceOf(TypeError);
      break;
    case 'prune:pruned':
      expect((r.output as { count: number }).count).toBeGreaterThan(0);
      break;
    case 'prune:nothing-to-prune':
      expect((r.output as { count: number }).count).toBe(0);
      break;
    case 'prune:throws':
      expect((r.error as { code?: string }).code).toBe('store-closed');
      break;
    case 'selectRange:range':
    case 'selectRange:nothing':
      ctx.range = (r.output as typeof ctx.range | null) ?? undefined;
      expect(r.output === null).toBe(outcome === 'nothing');
      break;
    case 'probeLock:held':
      expect((r.output as { held: boolean }).held).toBe(true);
      break;
    default:
      break;
  }
  return false;
}

function expectedReason(path: GeneratedPath): string | undefined {
  const o = path.steps.map((s) => s.outcome);
  if (path.finalValue === 'retry') return undefined;
  if (o.includes('cancel') || path.input === 'signal aborted') return 'cancelled';
  if (o.includes('classify:other')) return 'not-overflow';
  if (path.input === 'auto off') return 'disabled';
  if (path.input === 'retries used up') return 'retries-exhausted';
  if (o.includes('probeLock:held')) return 'busy';
  if (o.includes('classify:throws') || o.includes('probeLock:throws')) return 'internal';
  // The summary request failed: its own reason, the CompactionError with the cause alongside.
  if (o.includes('transaction:failed')) return 'summary-failed';
  // Nothing could be compacted and nothing was pruned: the newest unit alone is too big.
  if (o.includes('selectRange:nothing')) return 'stuck';
  return 'no-progress';
}

export async function runOverflowPath(srv: Server, path: GeneratedPath, byKey: Map<string, TransitionInfo>): Promise<void> {
  const recipe = worldFor(srv, path);
  const hostCancels = path.steps.some((s) => s.outcome === 'transaction:cancelled') && !path.steps.some((s) => s.outcome === 'cancel');
  const w = await openWorld(srv, { ...recipe.options, ...(hostCancels ? { hostSummarizer: true } : {}) });
  await recipe.build(w);
  const tokensBefore = w.engine.measure().totalTokens;
  markRun(w);
  const callsBefore = w.ctl.calls.length;

  const controller = new AbortController();
  if (path.input === 'signal aborted') controller.abort(new Error('already aborted'));
  const running = w.engine.onRequestError(recipe.error, { signal: controller.signal });
  const ctx: RunCtx = { abort: () => controller.abort(new Error('user pressed Ctrl-C')), running, range: undefined, summaryFailure: 'http-500' };
  for (let i = 0; i < path.steps.length; i++) {
    if (path.steps[i]!.outcome === 'selectRange:range') {
      await takeRange(w, ctx);
      continue;
    }
    if (await settleOverflowStep(w, path.steps[i]!, path.steps[i + 1], ctx)) i++;
  }
  w.ctl.setAuto();
  const action = await running;

  expectPathTaken(w, path, byKey);

  const o = path.steps.map((s) => s.outcome);
  const reason = expectedReason(path);
  if (reason === undefined) {
    expect(action.kind).toBe('retry');
    // Retry means the rebuilt request is smaller than the one the provider refused.
    expect(w.engine.measure().totalTokens).toBeLessThan(tokensBefore);
  } else {
    expect(action).toMatchObject({ kind: 'fail', reason });
    expect(action.kind === 'fail' && action.error).toBe(recipe.error);
  }

  expectLogOnlyGrew(w);
  const added = newEvents(w);
  const txs = o.filter((x) => x.startsWith('transaction:')).length;
  const committed = o.filter((x) => x === 'transaction:committed' || x === 'transaction:truncated').length;
  expect(added.filter((e) => e.type === 'compaction/summary' && e.data.truncation !== undefined)).toHaveLength(
    o.filter((x) => x === 'transaction:truncated').length,
  );
  const chartErrors = o.filter((x) => x === 'transaction:chart-error').length;
  expect(added.filter((e) => e.type === 'compaction/prune').length > 0).toBe(o.includes('prune:pruned'));
  expect(added.filter((e) => e.type === 'compaction/start')).toHaveLength(txs);
  // Every bracket closed; one whose transaction chart broke is closed by the engine {internal}.
  const ends = added.filter((e) => e.type === 'compaction/end');
  expect(ends).toHaveLength(txs);
  expect(ends.filter((e) => e.type === 'compaction/end' && e.data.error?.code === 'internal')).toHaveLength(chartErrors);
  expect(added.filter((e) => e.type === 'user/message' && e.data.source === COMPACTION_CHECKPOINT_SOURCE)).toHaveLength(committed);
  // Only the lock the world took stays held.
  expect(w.session.lock.held).toBe(o.includes('probeLock:held'));
  const cancelAt = path.steps.findIndex((s) => s.outcome === 'cancel');
  if (cancelAt >= 0 && path.steps[cancelAt]!.from !== 'compacting' && path.steps[cancelAt]!.from !== 'truncating') {
    // Cancelled before the transaction: the step under way finished, nothing started after it.
    const next = path.steps[cancelAt + 1]!.outcome.split(':')[0]!;
    const services = w.ctl.calls.map((c) => c.service);
    expect(services.slice(services.lastIndexOf(next as never) + 1).filter((x) => x !== 'probeLock')).toEqual([]);
    expect(txs).toBe(0);
  }
  if (!o.includes('prune:pruned') && txs === 0) expect(added).toHaveLength(0);

  // The chart's policy, as the services received it: prune everything oversized (the newest
  // result included), keep only the newest unit, merge earlier checkpoints from the head.
  for (const c of w.ctl.calls.filter((x) => x.service === 'prune')) expect(c.input).toEqual({ trigger: 'overflow', protectRecent: false });
  for (const c of w.ctl.calls.filter((x) => x.service === 'selectRange')) {
    expect(c.input).toEqual({ purpose: 'overflow', attempt: 1, retain: 'newest-unit', stackCheckpoints: false });
  }
  if (path.input === 'prune off') {
    // Pruning off: recovery never prunes, whatever the tool output; no compaction/prune is written.
    expect(w.ctl.calls.filter((x) => x.service === 'prune')).toEqual([]);
    expect(added.filter((e) => e.type === 'compaction/prune')).toEqual([]);
    expect(w.notes.filter((n) => n.type === 'pruned')).toEqual([]);
    if (o.includes('selectRange:nothing')) {
      // The oversized newest result that recovery with pruning on cuts (the `recovery on` path
      // through pruning, same world) reaches the request verbatim.
      const tool = w.session.deriveMessages().at(-1)!;
      expect(tool).toMatchObject({ role: 'tool', content: OVERSIZED });
    }
  }
  // What the host hears: the classifier's verdict, a failed compaction's error, every prune that
  // freed something, a recovery that could compact nothing; a createCompactionMachine host also
  // gets the prune and the transaction in the settled output.
  const classified = w.ctl.calls.slice(callsBefore).find((c) => c.service === 'classify' && c.output !== undefined);
  if (classified) expect(action.classification).toEqual(classified.output);
  if (o.includes('transaction:failed') && reason !== undefined) expect(action.kind === 'fail' && action.compactionError?.code).toBe('summary');
  expect(w.notes.filter((n) => n.type === 'compaction.skipped')).toHaveLength(reason === 'stuck' ? 1 : 0);
  const pruneCall = w.ctl.calls.slice(callsBefore).find((c) => c.service === 'prune' && c.output !== undefined);
  // (A cancel here lets the step under way answer: the chart takes the prune's result either way.)
  expect(w.notes.filter((n) => n.type === 'pruned')).toHaveLength(((pruneCall?.output as { count?: number } | undefined)?.count ?? 0) > 0 ? 1 : 0);
  // A prune that threw is announced (recovery went on to compact without it).
  expect(w.notes.filter((n) => n.type === 'prune.failed')).toHaveLength(o.filter((x) => x === 'prune:throws').length);
  const settledOut = (w.settled.at(-1) as { result?: { output?: { prune?: unknown; transaction?: unknown } } } | undefined)?.result?.output;
  if (pruneCall) expect(settledOut?.prune).toEqual(pruneCall.output);
  expect(settledOut?.transaction !== undefined).toBe(txs - chartErrors > 0);
  expectValidRequest(w);
  // One summary request per transaction that reached the summarizer (a truncation asks none).
  expect(summaryRequests(w)).toHaveLength(txs - path.steps.filter((s) => s.outcome.startsWith('transaction:') && s.from === 'truncating').length);

  const reopened = await expectReplays(w);
  await reopened.close();
}
