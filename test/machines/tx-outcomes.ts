/**
 * How the real engine is made to give each outcome of the transaction chart's invoked
 * services. Used by the transaction suite step by step, and by the parent charts' suites
 * as sub-scripts for the outcomes of their `transaction` child.
 *
 * Produced by the world (real service, world arranged first where needed):
 *   validateSpan lock-held      an orphan compaction/start appended after range selection
 *   validateSpan span-invalid   the span's last node rewritten in place (as a prune pass does)
 *   openBracket append-refused  another compaction/start appended after validation
 *   summarize fails             the local server answers finish_reason "length" (or 500)
 *   cancel in summarizing       the server hangs; the caller's signal aborts mid-request
 *   cancel in revalidating      the revalidation call is held; the signal aborts
 *   cancel in validating,       the step's call is held, the signal aborts, then the call runs
 *     opening, committing,      for real: these steps run to completion and the chart only
 *     flushing, closing         notes the cancel (validating/opening honour it next)
 *   summarize deadline          the server hangs; the world's clock passes summaryTimeoutMs and
 *                               the chart's `after` leaves summarizing (the request is aborted)
 *   summarize host-cancelled    the host's own summarizer (`hostSummarizer` world) aborts the
 *                               hanging request on its shutdown signal: `summary-cancelled`
 *                               while the engine's signal is live (no cancel event anywhere)
 *   revalidate surface-changed  a user message appended while the summary was pending
 *   revalidate no-shrink        the server's summary is longer than the span
 *   revalidate too-little-prog. minProgressRatio 0.9 and a summary half the span's size
 *   commit refused              the span's last node rewritten between revalidation and commit
 *                               (the commit checks its checkpoint replace first: nothing appended)
 *   flush store-fails           bytes appended to the JSONL file behind the writer's back
 *   closeWithError close-fails  the same, before the close's flush
 * Forced (the world cannot give it):
 *   revalidate throws           revalidation is arithmetic over the surface; nothing makes it
 *                               throw, so the call rejects with a scripted error
 *   transaction chart-error     a bug inside the chart: revalidate resolves `undefined`, which
 *                               makes the transaction's guard throw (the parent's onError path;
 *                               the engine then closes the abandoned bracket with one
 *                               compaction/end {error: internal}, so the lock is released)
 */
import { expect } from 'vitest';
import type { RangeSelection } from '../../src/services/selection';
import { breakStore, rangeOf, rewriteNode, summaryOfTokens, takeLock, type Call, type World } from './runner';

export interface TxStep {
  outcome: string;
  from: unknown;
}

export interface RunCtx {
  /** Aborts the caller's signal of the facade call under test. */
  abort(): void;
  /** The facade call under test (settles when the chart is done). */
  running: Promise<unknown>;
  range: RangeSelection | undefined;
  /** How `summarize:fails` fails: finish reason length, or HTTP 500. */
  summaryFailure: 'length' | 'http-500';
  /** The summary the server writes for a span (default: a short fixed text). */
  summaryText?: (range: RangeSelection) => string;
}

/** summaryTimeoutMs of a world whose path lets the summary's deadline pass. */
export const DEADLINE_MS = 5_000;

const HUGE_SUMMARY = Array.from({ length: 9000 }, (_, i) => `fact${i}`).join(' ');

/** Settles one step of the transaction chart. `next` is the step after it (for arrangements made ahead). */
export async function settleTxStep(w: World, step: TxStep, next: TxStep | undefined, ctx: RunCtx): Promise<void> {
  const take = (s: Parameters<World['ctl']['take']>[0]) => w.ctl.take(s, ctx.running);
  switch (step.outcome) {
    case 'validateSpan:lock-free':
      return void (await (await take('validateSpan')).runReal());
    case 'validateSpan:lock-held': {
      const call = await take('validateSpan');
      takeLock(w);
      await call.runReal();
      return;
    }
    case 'validateSpan:span-invalid': {
      const call = await take('validateSpan');
      rewriteNode(w, ctx.range!.end);
      const r = await call.runReal();
      expect((r.error as { code?: string }).code).toBe('span-invalid');
      return;
    }
    case 'openBracket:opened':
      return void (await (await take('openBracket')).runReal());
    case 'openBracket:append-refused': {
      const call = await take('openBracket');
      takeLock(w);
      const r = await call.runReal();
      expect((r.error as { rule?: string }).rule).toBe('compaction-locked');
      return;
    }
    case 'summarize:summary': {
      const call = await take('summarize');
      if (next?.outcome === 'revalidate:no-shrink') w.srv.queue.push({ kind: 'reply', content: HUGE_SUMMARY });
      else if (next?.outcome === 'revalidate:too-little-progress') {
        w.srv.queue.push({ kind: 'reply', content: summaryOfTokens(Math.floor(ctx.range!.tokens / 2)) });
      } else if (ctx.summaryText) w.srv.queue.push({ kind: 'reply', content: ctx.summaryText(ctx.range!) });
      await call.runReal();
      expect(call.error, 'the summary request').toBeUndefined();
      return;
    }
    case 'summarize:fails': {
      const call = await take('summarize');
      w.srv.queue.push(
        ctx.summaryFailure === 'length'
          ? { kind: 'reply', content: 'The user asked to fix the build and', finishReason: 'length' }
          : { kind: 'status', status: 500, body: { error: { message: 'The server had an error', type: 'server_error', param: null, code: null } } },
      );
      const r = await call.runReal();
      expect((r.error as { code?: string }).code).toBe(ctx.summaryFailure === 'length' ? 'summary-truncated' : 'summary-request');
      return;
    }
    case 'summarize:deadline': {
      // The server hangs and nothing settles the call; the world's clock passes the summary's
      // deadline (summaryTimeoutMs): the chart's `after` leaves summarizing, aborting the request.
      const call = await take('summarize');
      w.srv.queue.push({ kind: 'hang' });
      const index = w.srv.server.requests.length;
      const settled = call.runReal();
      await w.srv.server.waitForRequest(index);
      w.clock.increment(DEADLINE_MS - 1);
      await new Promise((r) => setTimeout(r, 5));
      expect(call.signal?.aborted, 'still summarizing just before the deadline').toBe(false);
      w.clock.increment(1);
      const r = await settled;
      expect((r.error as { code?: string }).code).toBe('summary-cancelled');
      expect(call.signal?.aborted, 'the chart stopped the summary').toBe(true);
      expect((await w.srv.server.waitForClose(index)).aborted, 'the summary HTTP request was aborted').toBe(true);
      return;
    }
    case 'summarize:host-cancelled': {
      const call = await take('summarize');
      w.srv.queue.push({ kind: 'hang' });
      const index = w.srv.server.requests.length;
      const settled = call.runReal();
      await w.srv.server.waitForRequest(index);
      w.shutdownSummaries();
      const r = await settled;
      expect((r.error as { code?: string }).code).toBe('summary-cancelled');
      expect((r.error as { chartCode?: string }).chartCode).toBe('cancelled');
      expect(call.signal?.aborted, 'the engine did not cancel the summary: the host did').toBe(false);
      expect((await w.srv.server.waitForClose(index)).aborted, 'the summary HTTP request was aborted').toBe(true);
      return;
    }
    case 'truncate:checkpoint': {
      const call = await take('truncate');
      await call.runReal();
      expect((call.output as { truncation?: unknown }).truncation, 'a truncation checkpoint').toBeDefined();
      return;
    }
    case 'truncate:throws':
      // FORCED: the truncation only derives the span's ledger from the log; nothing makes it throw.
      return (await take('truncate')).reject(Object.assign(new Error('scripted truncation failure'), { code: 'internal' }));
    case 'cancel':
      return cancelTransaction(w, step, ctx);
    case 'revalidate:good':
    case 'revalidate:no-shrink':
    case 'revalidate:too-little-progress':
      return void (await (await take('revalidate')).runReal());
    case 'revalidate:surface-changed': {
      const call = await take('revalidate');
      // The agent's loop went on while the summary was being written.
      w.writer.user('Also, please keep the tests green.');
      await call.runReal();
      expect((call.output as { stable: boolean }).stable).toBe(false);
      return;
    }
    case 'revalidate:throws':
      // FORCED: nothing in the world makes revalidation throw.
      return (await take('revalidate')).reject(Object.assign(new Error('scripted revalidation failure'), { code: 'internal' }));
    case 'revalidate:malformed':
      // FORCED: a chart bug stand-in; the transaction's 'surface changed' guard reads `.stable` of undefined.
      return (await take('revalidate')).resolve(undefined);
    case 'commit:committed': {
      const call = await take('commit');
      if (next?.outcome === 'flush:store-fails') await breakStore(w);
      await call.runReal();
      return;
    }
    case 'commit:refused': {
      const call = await take('commit');
      rewriteNode(w, ctx.range!.end);
      const length = w.session.length;
      const r = await call.runReal();
      // The checkpoint's replace names a node no longer on the surface: refused before any append.
      expect((r.error as { rule?: string }).rule, String(r.error)).toBe('replace-not-on-surface');
      expect(w.session.length, 'a refused commit appends nothing').toBe(length);
      return;
    }
    case 'flush:durable':
    case 'flush:store-fails':
      return void (await (await take('flush')).runReal());
    case 'closeWithError:closed':
      return void (await (await take('closeWithError')).runReal());
    case 'closeWithError:close-fails': {
      const call = await take('closeWithError');
      await breakStore(w);
      const r = await call.runReal();
      expect((r.error as { code?: string }).code).toBe('store-interleaved');
      return;
    }
    default:
      throw new Error(`no runtime production for transaction outcome ${step.outcome}`);
  }
}

async function cancelTransaction(w: World, step: TxStep, ctx: RunCtx): Promise<void> {
  if (step.from === 'summarizing') {
    const call = await w.ctl.take('summarize', ctx.running);
    w.srv.queue.push({ kind: 'hang' });
    const index = w.srv.server.requests.length;
    const settled = call.runReal();
    await w.srv.server.waitForRequest(index);
    ctx.abort();
    const r = await settled;
    expect((r.error as { code?: string }).code).toBe('summary-cancelled');
    const req = await w.srv.server.waitForClose(index);
    expect(req.aborted, 'the summary HTTP request was aborted').toBe(true);
    return;
  }
  if (step.from === 'revalidating' || step.from === 'truncating') {
    const call = await w.ctl.take(step.from === 'truncating' ? 'truncate' : 'revalidate', ctx.running);
    ctx.abort();
    await call.runReal(); // a late answer to a stopped actor: dropped
    return;
  }
  const held = RUN_TO_COMPLETION[step.from as string];
  if (held) {
    // The step is not interruptible: the chart notes the cancel, the held call answers the next step.
    const call = await w.ctl.take(held, ctx.running);
    ctx.abort();
    w.ctl.putBack(call);
    return;
  }
  throw new Error(`the transaction has no cancel from ${JSON.stringify(step.from)}`);
}

/** States whose step runs to completion whatever a cancel says, and the call each one holds. */
const RUN_TO_COMPLETION: Record<string, 'validateSpan' | 'openBracket' | 'commit' | 'flush' | 'closeWithError'> = {
  validating: 'validateSpan',
  opening: 'openBracket',
  committing: 'commit',
  flushing: 'flush',
  closing: 'closeWithError',
};

/** Sub-scripts for a parent chart's `transaction` child outcome. */
export const TX_SUBSCRIPTS: Record<string, TxStep[]> = {
  committed: [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'summarize:summary', from: 'summarizing' },
    { outcome: 'revalidate:good', from: 'revalidating' },
    { outcome: 'commit:committed', from: 'committing' },
    { outcome: 'flush:durable', from: 'flushing' },
  ],
  failed: [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'summarize:fails', from: 'summarizing' },
    { outcome: 'closeWithError:closed', from: 'closing' },
  ],
  /**
   * The parent is cancelled while the summary is revalidated: only the chart's forwarded cancel
   * stops it there (a summary request in flight would also see the caller's signal).
   */
  cancelled: [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'summarize:summary', from: 'summarizing' },
    { outcome: 'cancel', from: 'revalidating' },
    { outcome: 'closeWithError:closed', from: 'closing' },
  ],
  /** The parent is cancelled while the span is validated: rejected, nothing written. */
  'cancelled while validating': [
    { outcome: 'cancel', from: 'validating' },
    { outcome: 'validateSpan:lock-free', from: 'validating' },
  ],
  /** The parent is cancelled while the bracket opens: the lock is taken, then closed {cancelled}. */
  'cancelled while opening': [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'cancel', from: 'opening' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'closeWithError:closed', from: 'closing' },
  ],
  /** No cancel reaches the charts: the host's summarizer aborts its own request. */
  'cancelled by the host': [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'summarize:host-cancelled', from: 'summarizing' },
    { outcome: 'closeWithError:closed', from: 'closing' },
  ],
  /** The parent is cancelled while the transaction commits: too late, it commits. */
  'committed despite cancel': [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'summarize:summary', from: 'summarizing' },
    { outcome: 'revalidate:good', from: 'revalidating' },
    { outcome: 'cancel', from: 'committing' },
    { outcome: 'commit:committed', from: 'committing' },
    { outcome: 'flush:durable', from: 'flushing' },
  ],
  /** The parent is cancelled while the transaction closes a failure: too late, it fails. */
  'failed despite cancel': [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'summarize:fails', from: 'summarizing' },
    { outcome: 'cancel', from: 'closing' },
    { outcome: 'closeWithError:closed', from: 'closing' },
  ],
  'chart-error': [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'summarize:summary', from: 'summarizing' },
    { outcome: 'revalidate:malformed', from: 'revalidating' },
  ],
  // A truncation transaction (the model-free last resort): no summary is asked for.
  truncated: [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'truncate:checkpoint', from: 'truncating' },
    { outcome: 'revalidate:good', from: 'revalidating' },
    { outcome: 'commit:committed', from: 'committing' },
    { outcome: 'flush:durable', from: 'flushing' },
  ],
  'truncated despite cancel': [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'truncate:checkpoint', from: 'truncating' },
    { outcome: 'revalidate:good', from: 'revalidating' },
    { outcome: 'cancel', from: 'committing' },
    { outcome: 'commit:committed', from: 'committing' },
    { outcome: 'flush:durable', from: 'flushing' },
  ],
  'truncation-failed': [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'truncate:checkpoint', from: 'truncating' },
    { outcome: 'revalidate:surface-changed', from: 'revalidating' },
    { outcome: 'closeWithError:closed', from: 'closing' },
  ],
  'truncation cancelled': [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'cancel', from: 'truncating' },
    { outcome: 'closeWithError:closed', from: 'closing' },
  ],
  'truncation chart-error': [
    { outcome: 'validateSpan:lock-free', from: 'validating' },
    { outcome: 'openBracket:opened', from: 'opening' },
    { outcome: 'truncate:checkpoint', from: 'truncating' },
    { outcome: 'revalidate:malformed', from: 'revalidating' },
  ],
};

/**
 * The sub-script giving a parent chart's `transaction:<outcome>`. After a cancel of the parent
 * (it forwards the cancel), `cancelled` is the abort of the summary in flight and the other
 * outcomes are the ones that are too late to stop; without one, `cancelled` can only come from
 * the host's own summarizer.
 */
export function txSubscriptName(outcome: string, afterCancel: boolean, truncating = false): string {
  if (truncating) {
    if (outcome === 'cancelled') return 'truncation cancelled';
    if (outcome === 'chart-error') return 'truncation chart-error';
  }
  if (afterCancel) return outcome === 'cancelled' ? 'cancelled' : `${outcome} despite cancel`;
  return outcome === 'cancelled' ? 'cancelled by the host' : outcome;
}

export async function runTxSubscript(w: World, name: string, ctx: RunCtx): Promise<void> {
  const steps = TX_SUBSCRIPTS[name];
  if (!steps) throw new Error(`no transaction sub-script ${name}`);
  for (let i = 0; i < steps.length; i++) await settleTxStep(w, steps[i]!, steps[i + 1], ctx);
}

export async function takeRange(w: World, ctx: RunCtx): Promise<Call> {
  const call = await w.ctl.take('selectRange', ctx.running);
  await call.runReal();
  ctx.range = call.output ? rangeOf(call) : undefined;
  return call;
}
