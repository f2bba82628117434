/**
 * Transaction paths on the real engine. Host: pressure compaction (`afterStep`) with
 * pruning off, over a session filled past the threshold; the host's own calls (measure,
 * selectRange) run for real, every transaction call is settled as the path says
 * (see tx-outcomes.ts for how each outcome is produced).
 */
import { expect } from 'vitest';
import { COMPACTION_CHECKPOINT_SOURCE } from '../../src/session/events';
import { Session } from '../../src/session/session';
import type { TransitionInfo } from './model';
import type { GeneratedPath } from './paths';
import {
  expectLogOnlyGrew,
  expectPathTaken,
  expectReplays,
  expectValidRequest,
  fillAbove,
  markRun,
  newEvents,
  openWorld,
  summaryRequests,
  type Server,
} from './runner';
import { DEADLINE_MS, settleTxStep, takeRange, type RunCtx } from './tx-outcomes';

const BRACKET = ['compaction/start', 'compaction/summary', 'user/message', 'compaction/end'];

/** The error code the facade reports, by the outcome that decided the path. */
const DECISIVE: Record<string, { code: string; cause?: string }> = {
  'validateSpan:lock-held': { code: 'busy' },
  'validateSpan:span-invalid': { code: 'changed', cause: 'span-invalid' },
  // Another writer's lock, taken after validation: busy, like a lock seen while validating.
  'openBracket:append-refused': { code: 'busy', cause: 'session-rule' },
  'summarize:fails': { code: 'summary', cause: 'summary-truncated' },
  'summarize:deadline': { code: 'summary', cause: 'summary-timeout' },
  cancel: { code: 'cancelled' },
  'revalidate:surface-changed': { code: 'changed' },
  'revalidate:no-shrink': { code: 'summary', cause: 'summary-no-shrink' },
  'revalidate:too-little-progress': { code: 'no-progress' },
  'revalidate:throws': { code: 'changed', cause: 'internal' },
  'truncate:throws': { code: 'internal', cause: 'internal' },
  'commit:refused': { code: 'commit', cause: 'session-rule' },
  'flush:store-fails': { code: 'persistence', cause: 'store-interleaved' },
};

export async function runTransactionPath(srv: Server, path: GeneratedPath, byKey: Map<string, TransitionInfo>): Promise<void> {
  const outcomes = path.steps.map((s) => s.outcome);
  const truncation = path.input === 'truncation';
  const w = await openWorld(srv, {
    pruner: false,
    config: {
      ...(outcomes.includes('revalidate:too-little-progress') ? { minProgressRatio: 0.9 } : {}),
      ...(outcomes.includes('summarize:deadline') ? { summaryTimeoutMs: DEADLINE_MS } : {}),
      // A truncation transaction: the host's breaker opened on one failed summary, so the next relief asks no model.
      ...(truncation ? { truncationFallback: true, circuitBreaker: { failureLimit: 1, cooldownMs: 60_000 } } : {}),
    },
  });
  fillAbove(w, 100);
  if (truncation) {
    w.srv.queue.push({ kind: 'status', status: 500, body: { error: { message: 'The server had an error', type: 'server_error', param: null, code: null } } });
    w.ctl.setAuto();
    expect((await w.engine.afterStep()).status).toBe('truncated');
    w.ctl.hold();
    fillAbove(w, 100);
  }
  const notesMark = w.notes.length;
  const messagesBefore = JSON.stringify(w.session.deriveMessages());
  markRun(w);

  const controller = new AbortController();
  const running = w.engine.afterStep({ signal: controller.signal });
  const ctx: RunCtx = { abort: () => controller.abort(new Error('user pressed Ctrl-C')), running, range: undefined, summaryFailure: 'length' };
  await (await w.ctl.take('measure', running)).runReal();
  await takeRange(w, ctx);
  for (let i = 0; i < path.steps.length; i++) await settleTxStep(w, path.steps[i]!, path.steps[i + 1], ctx);
  w.ctl.setAuto();
  const result = await running;

  // The real chart took the generated path.
  expectPathTaken(w, path, byKey);

  // The facade's answer.
  const final = path.finalValue as string;
  const decisive = outcomes.find((o) => DECISIVE[o]);
  if (final === 'committed') {
    expect(result.status).toBe(truncation ? 'truncated' : 'compacted');
    expect(result.compactions).toHaveLength(1);
    expect(result.compactions[0]!.tokensAfter).toBeLessThan(result.compactions[0]!.tokensBefore);
  } else {
    const want = DECISIVE[decisive!]!;
    expect(result.status).toBe(want.code === 'cancelled' ? 'cancelled' : 'failed');
    expect(result.error?.code).toBe(want.code);
    if (want.cause) expect(result.error?.causeCode).toBe(want.cause);
  }

  // The log: only grew; the bracket as the path says.
  expectLogOnlyGrew(w);
  const added = newEvents(w);
  const types = added.map((e) => e.type);
  const starts = types.filter((t) => t === 'compaction/start').length;
  const ends = added.filter((e) => e.type === 'compaction/end');
  const arrangedLocks = outcomes.filter((o) => o === 'validateSpan:lock-held' || o === 'openBracket:append-refused').length;
  const checkpoints = added.filter((e) => e.type === 'user/message' && e.data.source === COMPACTION_CHECKPOINT_SOURCE);
  if (final === 'committed' || final === 'persistenceFailed') {
    const at = types.indexOf('compaction/start');
    expect(types.slice(at, at + 4)).toEqual(BRACKET);
    expect(checkpoints).toHaveLength(1);
  } else if (final === 'rejected') {
    // Nothing written by the engine: only the lock the world took.
    expect(starts).toBe(arrangedLocks);
    expect(ends).toHaveLength(0);
    expect(checkpoints).toHaveLength(0);
  } else {
    // A failed transaction: its own start and exactly one compaction/end {error}.
    expect(starts).toBe(1);
    expect(ends).toHaveLength(1);
    const end = ends[0]!;
    expect(end.type === 'compaction/end' && end.data.error?.code).toBe(DECISIVE[decisive!]!.code);
    expect(checkpoints).toHaveLength(0);
    // No summary event: a refused commit is checked before it appends anything, so the
    // transaction's only writes are its compaction/start and its one compaction/end {error}.
    expect(types.includes('compaction/summary')).toBe(false);
    expect(types.filter((t) => t.startsWith('compaction/'))).toEqual(['compaction/start', 'compaction/end']);
    if (outcomes.includes('commit:refused')) {
      // Exactly the bracket around the world's rewrite of the span's last node.
      expect(types).toEqual(['compaction/start', 'tool/result', 'compaction/end']);
      expect(added[1]!.surfaceOp).toEqual({ op: 'replace', start: ctx.range!.end, end: ctx.range!.end });
      expect(end.type === 'compaction/end' && end.data.error?.code).toBe('commit');
    }
    expect(w.session.lock.held).toBe(false);
  }
  // A cancel noted while a step ran to completion is honoured by the next decision.
  const cancelFrom = path.steps.find((s) => s.outcome === 'cancel')?.from;
  if (cancelFrom === 'validating') expect(added).toHaveLength(0);
  if (cancelFrom === 'opening') expect(types).toEqual(['compaction/start', 'compaction/end']);

  // What a listener heard: a start once the bracket opened (not when it is closed at once on a
  // cancel), then exactly one committed or failed; a rejected transaction tells nothing.
  const notes = w.notes.slice(notesMark);
  const heard = (type: string) => notes.filter((n) => n.type === type).length;
  // Every bracket that was opened is announced, even one a cancel closes straight away.
  expect(heard('compaction.started')).toBe(outcomes.includes('openBracket:opened') ? 1 : 0);
  expect(heard('compaction.committed')).toBe(final === 'committed' ? 1 : 0);
  expect(heard('compaction.failed')).toBe(final === 'failed' || final === 'persistenceFailed' ? 1 : 0);
  // The announced start is the bracket's own compaction/start.
  for (const n of notes)
    if (n.type === 'compaction.started') expect(added.filter((e) => e.type === 'compaction/start').map((e) => e.seq)).toContain(n.startSeq);
  const failedNote = notes.find((n) => n.type === 'compaction.failed');
  if (failedNote && failedNote.type === 'compaction.failed' && final === 'failed') expect(failedNote.error.code).toBe(DECISIVE[decisive!]!.code);

  if (final !== 'committed' && final !== 'persistenceFailed' && !outcomes.includes('revalidate:surface-changed')) {
    const rewritten = outcomes.includes('validateSpan:span-invalid') || outcomes.includes('commit:refused');
    if (!rewritten) expect(JSON.stringify(w.session.deriveMessages())).toBe(messagesBefore);
  }
  expectValidRequest(w);

  // What the server received: one summary request per summarize call, each ending with the instruction.
  const summarizeSteps =
    outcomes.filter((o) => o.startsWith('summarize:')).length + (path.steps.some((s) => s.outcome === 'cancel' && s.from === 'summarizing') ? 1 : 0);
  const requests = summaryRequests(w);
  expect(requests).toHaveLength(summarizeSteps);
  for (const r of requests) {
    const body = r.json as { messages: Array<{ role: string; content: unknown }>; stream: boolean };
    expect(body.stream).toBe(true);
    expect(body.messages[0]).toMatchObject({ role: 'system' });
    expect(body.messages.at(-1)!.role).toBe('user');
  }

  // Durable: the store replays the same log, or, when the store broke, keeps what was flushed.
  const storeBroke = outcomes.includes('flush:store-fails') || outcomes.includes('closeWithError:close-fails');
  if (!storeBroke) {
    const reopened = await expectReplays(w);
    expect(reopened.lock.held).toBe(outcomes.includes('validateSpan:lock-held') || outcomes.includes('openBracket:append-refused'));
    await reopened.close();
  } else {
    // The host stops the engine (gracefully) and closes the session. In memory the transaction
    // already ended its bracket, so the stop has nothing to close and writes nothing.
    const length = w.session.length;
    w.engine.stop();
    expect(w.session.length).toBe(length);
    await w.session.close().catch(() => undefined);
    const reopened = await Session.open(w.store, w.id);
    expect(reopened.loadReport.tornTail).toBeDefined();
    // The compaction/start was durable, its end was not: an orphan lock, the surface as before.
    expect(reopened.lock).toMatchObject({ held: true, orphan: true });
    expect(JSON.stringify(reopened.deriveMessages())).toBe(messagesBefore);
    await reopened.close();
  }
}
