/**
 * Manual compaction paths on the real engine: `compactNow` between turns.
 *
 * Produced by the world: the signal (already aborted, or aborted while a call is held),
 * admission (a turn left open; an orphan compaction/start), selection (one unit only →
 * nothing), and the transaction child's outcomes (tx-outcomes.ts).
 * Forced: `checkAdmission` throws and `selectRange` throws (both only read the session),
 * and the transaction child's chart error.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'vitest';
import { CompactionError, type CompactionRecord } from '../../src/engine/facade';
import { COMPACTION_CHECKPOINT_SOURCE } from '../../src/session/events';
import type { TransitionInfo } from './model';
import type { GeneratedPath, PathStep } from './paths';
import {
  endTurn,
  expectLogOnlyGrew,
  expectPathTaken,
  expectReplays,
  expectValidRequest,
  markRun,
  newEvents,
  openWorld,
  startTurn,
  summaryRequests,
  takeLock,
  toolStep,
  type Server,
  type World,
} from './runner';
import { runTxSubscript, takeRange, txSubscriptName, type RunCtx } from './tx-outcomes';

async function build(w: World, path: GeneratedPath): Promise<void> {
  const o = path.steps.map((s) => s.outcome);
  startTurn(w);
  if (!o.includes('selectRange:nothing')) for (let i = 0; i < 4; i++) toolStep(w);
  if (o.includes('checkAdmission:turn-open')) return;
  endTurn(w);
  if (o.includes('checkAdmission:lock-held')) takeLock(w);
}

async function settleManualStep(w: World, step: PathStep, next: PathStep | undefined, ctx: RunCtx): Promise<boolean> {
  const [service, outcome] = step.outcome.split(':') as [string, string | undefined];
  if (step.outcome === 'cancel') {
    if (step.from === 'compacting') {
      await runTxSubscript(w, txSubscriptName(next!.outcome.split(':')[1]!, true), ctx);
      return true;
    }
    const call = await w.ctl.take(step.from === 'admitting' ? 'checkAdmission' : 'selectRange', ctx.running);
    ctx.abort();
    await call.runReal(); // answered after the chart left the state: dropped
    return false;
  }
  if (service === 'transaction') {
    await runTxSubscript(w, txSubscriptName(outcome!, false), ctx);
    return false;
  }
  if (outcome === 'throws') {
    // FORCED: admission and selection only read the session.
    const call = await w.ctl.take(service as 'checkAdmission', ctx.running);
    call.reject(new Error(`scripted ${service} failure`));
    return false;
  }
  if (service === 'selectRange') {
    const call = await takeRange(w, ctx);
    expect(call.output === null).toBe(outcome === 'nothing');
    return false;
  }
  const call = await w.ctl.take('checkAdmission', ctx.running);
  await call.runReal();
  const a = call.output as { openTurn: number | null; lockHeld: boolean };
  expect({ turnOpen: a.openTurn !== null, lockHeld: a.lockHeld }).toEqual({ turnOpen: outcome === 'turn-open', lockHeld: outcome === 'lock-held' });
  return false;
}

function expectedError(path: GeneratedPath): string | undefined {
  const o = path.steps.map((s) => s.outcome);
  switch (path.finalValue) {
    case 'cancelled':
      return 'cancelled';
    case 'busy':
      return 'busy';
    case 'failed':
      return o.includes('transaction:failed') ? 'summary' : o.includes('transaction:cancelled') ? 'cancelled' : 'internal';
    default:
      return undefined;
  }
}

export async function runManualPath(srv: Server, path: GeneratedPath, byKey: Map<string, TransitionInfo>): Promise<void> {
  const w = await openWorld(srv);
  await build(w, path);
  const messagesBefore = JSON.stringify(w.session.deriveMessages());
  markRun(w);

  const controller = new AbortController();
  if (path.input === 'signal aborted') controller.abort(new Error('stop right there'));
  const running: Promise<CompactionRecord | null | CompactionError> = w.engine
    .compactNow({ signal: controller.signal, focus: 'the failing build' })
    .catch((err: unknown) => err as CompactionError);
  const ctx: RunCtx = { abort: () => controller.abort(new Error('user pressed Ctrl-C')), running, range: undefined, summaryFailure: 'http-500' };
  for (let i = 0; i < path.steps.length; i++) if (await settleManualStep(w, path.steps[i]!, path.steps[i + 1], ctx)) i++;
  w.ctl.setAuto();
  const result = await running;

  expectPathTaken(w, path, byKey);

  const o = path.steps.map((s) => s.outcome);
  // A createCompactionMachine host gets the transaction that ran in the settled output, failed or not.
  const settledOut = (w.settled.at(-1) as { result?: { output?: { transaction?: unknown } } } | undefined)?.result?.output;
  expect(settledOut?.transaction !== undefined).toBe(o.some((x) => x.startsWith('transaction:') && x !== 'transaction:chart-error'));
  const code = expectedError(path);
  const added = newEvents(w);
  if (code) {
    expect(result).toBeInstanceOf(CompactionError);
    expect((result as CompactionError).code).toBe(code);
    if (path.input === 'signal aborted') expect((result as CompactionError).message).toBe('stop right there');
  } else if (path.finalValue === 'nothing') {
    expect(result).toBeNull();
    expect(added).toHaveLength(0);
  } else {
    const record = result as CompactionRecord;
    expect(record.trigger).toBe('manual');
    expect(record.tokensAfter).toBeLessThan(record.tokensBefore);
    // Only the newest unit stays after the checkpoint.
    expect(w.session.deriveMessages().map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    const start = added.find((e) => e.type === 'compaction/start')!;
    expect(start.type === 'compaction/start' && start.data).toEqual({ turn: null, trigger: 'manual' });
    // Durable before compactNow resolved: the file already ends with compaction/end.
    const lines = readFileSync(w.file, 'utf8').trim().split('\n');
    expect(JSON.parse(lines.at(-1)!).type).toBe('compaction/end');
    // The focus reached the summarizer's instruction.
    expect(summaryRequests(w)[0]!.raw).toContain('the failing build');
  }

  expectLogOnlyGrew(w);
  const txs = o.filter((x) => x.startsWith('transaction:')).length;
  const committed = o.filter((x) => x === 'transaction:committed').length;
  const chartErrors = o.filter((x) => x === 'transaction:chart-error').length;
  expect(added.filter((e) => e.type === 'compaction/start')).toHaveLength(txs);
  // Every bracket closed; one whose transaction chart broke is closed by the engine {internal}.
  const ends = added.filter((e) => e.type === 'compaction/end');
  expect(ends).toHaveLength(txs);
  expect(ends.filter((e) => e.type === 'compaction/end' && e.data.error?.code === 'internal')).toHaveLength(chartErrors);
  expect(added.filter((e) => e.type === 'user/message' && e.data.source === COMPACTION_CHECKPOINT_SOURCE)).toHaveLength(committed);
  if (committed === 0) expect(JSON.stringify(w.session.deriveMessages())).toBe(messagesBefore);
  // The chart's policy, as selection received it: only the newest unit stays, checkpoints merge from the head.
  for (const c of w.ctl.calls.filter((x) => x.service === 'selectRange')) {
    expect(c.input).toEqual({ purpose: 'manual', attempt: 1, retain: 'newest-unit', stackCheckpoints: false });
  }
  // Only the lock the world took stays held.
  expect(w.session.lock.held).toBe(o.includes('checkAdmission:lock-held'));
  expectValidRequest(w);
  expect(summaryRequests(w)).toHaveLength(txs);

  const reopened = await expectReplays(w);
  await reopened.close();
}
