/**
 * The charts as docs/spec.md#4-pressure-compaction, §5, §6 and §9 describe them, observed from outside: the session
 * log (which events, in which order), the derived messages and the facade's results.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimulatedClock } from 'xstate';
import { afterEach, describe, expect, it } from 'vitest';
import { CompactionError } from '../../src/engine/facade';
import { BudgetError } from '../../src/services/config';
import { COMPACTION_CHECKPOINT_SOURCE } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { JsonlStore } from '../../src/session/stores/jsonl';
import { openAIMessageProblems } from '../helpers/openai-validator';
import {
  deferredSummarizer,
  failingSummarizer,
  harness as engineHarness,
  openTurn,
  recordingSummarizer,
  sizedSummarizer,
  SMALL_CONFIG,
  stepUntilPressure,
} from '../helpers/engine';
import type { EngineNotification } from '../../src/engine/facade';

// Background compaction off: these are the foreground charts' rules (compaction inside
// afterStep at the threshold); test/background*.test.ts has the background chart's. The
// model-free fallback off too: a failed summary fails its compaction here, as docs/spec.md#4-pressure-compaction–§10 say;
// test/engine/fallback.test.ts has the truncation that stands in for it by default.
const harness = (options: Parameters<typeof engineHarness>[0], session?: Parameters<typeof engineHarness>[1]) =>
  engineHarness({ ...options, config: { truncationFallback: false, ...(options.config ?? SMALL_CONFIG), background: false } }, session);

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'xcompact-engine-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const BRACKET = ['compaction/start', 'compaction/summary', 'user/message', 'compaction/end'];

describe('pressure compaction (docs/spec.md#4-pressure-compaction)', () => {
  it('does nothing before any request is routed, and nothing below the threshold', async () => {
    const s = recordingSummarizer();
    const h = harness({ summarizer: s });
    expect((await h.engine.afterStep()).status).toBe('skipped');
    openTurn(h);
    const before = h.session.length;
    const r = await h.step(0);
    expect(r.status).toBe('below');
    expect(r.before!.totalTokens).toBeLessThan(r.before!.threshold);
    expect(h.types(before)).not.toContain('compaction/start');
    expect(s.calls).toHaveLength(0);
  });

  it('at the threshold, condenses the head into one checkpoint and keeps the retained tail verbatim', async () => {
    const s = recordingSummarizer();
    const h = harness({ summarizer: s });
    openTurn(h);
    const { result, index } = await stepUntilPressure(h);
    expect(result.status).toBe('compacted');
    expect(result.before!.totalTokens).toBeGreaterThanOrEqual(result.before!.threshold);
    expect(result.after!.totalTokens).toBeLessThan(result.after!.threshold);
    expect(result.compactions).toHaveLength(1);

    // The bracket, in order, and nothing else between its events.
    const log = h.session.events();
    const start = log.findIndex((e) => e.type === 'compaction/start');
    expect(log.slice(start, start + 4).map((e) => e.type)).toEqual(BRACKET);
    const checkpoint = log[start + 2]!;
    expect(checkpoint.type === 'user/message' && checkpoint.data.source).toBe(COMPACTION_CHECKPOINT_SOURCE);
    expect(checkpoint.surfaceOp).toMatchObject({ op: 'replace' });

    // Surface: system prompt, the checkpoint, then the newest steps untouched.
    const messages = h.session.deriveMessages();
    expect(messages[0]).toEqual({ role: 'system', content: expect.stringContaining('coding agent') });
    expect(messages[1]!.role).toBe('user');
    expect(String(messages[1]!.content)).toContain('<compacted-summary>');
    const last = messages[messages.length - 1]!;
    expect(last).toMatchObject({ role: 'tool', tool_call_id: `c${index}` });
    expect(openAIMessageProblems(messages)).toEqual([]);

    // The summarizer saw the system prompt and the span, never the retained tail.
    const req = s.calls[0]!;
    expect(req.system).toEqual(messages[0]);
    expect(req.messages.some((m) => m.role === 'tool' && m.tool_call_id === `c${index}`)).toBe(false);
    expect(h.events.map((e) => e.type)).toEqual(expect.arrayContaining(['compaction.started', 'compaction.committed']));
  });

  it('prunes oversized tool output first and skips the summarizer when that is enough', async () => {
    const s = recordingSummarizer();
    const h = harness({
      summarizer: s,
      config: {
        headroomTokens: 500,
        maxTokens: 400,
        prune: { thresholdChars: 2000, headChars: 800, tailChars: 400, protectRecentTokens: 0, minReclaimTokens: 1 },
      },
    });
    openTurn(h);
    await h.step(0, 'x'.repeat(1500));
    // One huge result (plenty of distinct words so it costs real tokens) pushes pressure over.
    const huge = Array.from({ length: 2500 }, (_, i) => `line${i}`).join(' ');
    const seqBefore = h.session.length;
    const r = await h.step(1, huge);
    expect(r.status).toBe('relieved-by-pruning');
    expect(r.pruned!.count).toBe(1);
    expect(s.calls).toHaveLength(0);
    expect(h.types(seqBefore)).toContain('compaction/prune');
    expect(h.types(seqBefore)).not.toContain('compaction/start');
    const tool = h.session.deriveMessages().find((m) => m.role === 'tool' && m.tool_call_id === 'c1');
    expect(String(tool!.content)).toMatch(/characters pruned by xcompact/);
  });

  it('retries from the head up to compactionRetries, then fails with the still-above-threshold error', async () => {
    // First a healthy compaction leaves a checkpoint at the head; then summaries stop shrinking
    // anything much. Attempt 1 stacks a second checkpoint; attempt 2 merges both from the head.
    // Small enough (≤ retain/2) that the next pass keeps it in place and stacks a second one.
    let share = 0.1;
    const events: EngineNotification[] = [];
    const s = sizedSummarizer(events, () => share);
    // The threshold's retry rule: the cost model off, or it would compact before pressure qualifies.
    const h = harness({ summarizer: s, config: { headroomTokens: 500, maxTokens: 400, compactionRetries: 1, minProgressRatio: 0, economics: false } });
    h.engine.on((e) => events.push(e));
    openTurn(h);
    const first = await stepUntilPressure(h);
    expect(first.result.status).toBe('compacted');
    share = 0.995;
    const { result } = await stepUntilPressure(h, first.index + 1);
    expect(result.status).toBe('failed');
    expect(result.error).toBeInstanceOf(CompactionError);
    expect(result.error!.code).toBe('still-above-threshold');
    expect(result.error!.message).toMatch(/still above threshold after 2 attempt\(s\) \(\d+ ≥ \d+\)/);
    expect(s.calls).toBe(3);
    // Attempt 2 replaced a span starting right after the system prompt (the head merge).
    const starts = events.filter((e) => e.type === 'compaction.started');
    const lastCommit = h.session
      .events()
      .filter((e) => e.type === 'compaction/summary')
      .at(-1)!;
    expect(starts).toHaveLength(3);
    expect(lastCommit.type === 'compaction/summary' && h.session.surface.positionOf(h.session.surface.seqAt(1))).toBe(1);
    expect(h.session.deriveMessages().filter((m) => m.role === 'user' && String(m.content).includes('<compacted-summary>'))).toHaveLength(1);
  });

  it('a failing summarizer closes the bracket with exactly one compaction/end {error}', async () => {
    const h = harness({ summarizer: failingSummarizer('summary-truncated') });
    openTurn(h);
    const { result } = await stepUntilPressure(h);
    expect(result.status).toBe('failed');
    expect(result.error!.code).toBe('summary');
    expect(result.error!.causeCode).toBe('summary-truncated');
    const log = h.session.events();
    const starts = log.filter((e) => e.type === 'compaction/start');
    const ends = log.filter((e) => e.type === 'compaction/end');
    expect(starts).toHaveLength(1);
    expect(ends).toHaveLength(1);
    expect(ends[0]!.type === 'compaction/end' && ends[0]!.data.error).toMatchObject({ code: 'summary' });
    expect(log.some((e) => e.type === 'compaction/summary')).toBe(false);
    expect(h.session.lock.held).toBe(false);
  });

  it('a summary that does not shrink its span is refused', async () => {
    const huge = Array.from({ length: 6000 }, (_, i) => `w${i}`).join(' ');
    const h = harness({ summarizer: recordingSummarizer(huge) });
    openTurn(h);
    const { result } = await stepUntilPressure(h);
    expect(result.status).toBe('failed');
    expect(result.error!.causeCode).toBe('summary-no-shrink');
    expect(h.session.events().some((e) => e.type === 'user/message' && e.data.source === COMPACTION_CHECKPOINT_SOURCE)).toBe(false);
  });

  it('the minimum-progress guard refuses a commit that frees too little of the span', async () => {
    const events: EngineNotification[] = [];
    const s = sizedSummarizer(events, () => 0.8);
    const h = harness({ summarizer: s, config: { headroomTokens: 500, maxTokens: 400, minProgressRatio: 0.5 } });
    h.engine.on((e) => events.push(e));
    openTurn(h);
    const { result } = await stepUntilPressure(h);
    expect(result.status).toBe('failed');
    expect(result.error!.code).toBe('no-progress');
    expect(result.error!.message).toMatch(/less than the required \d+/);
    expect(h.session.events().some((e) => e.type === 'compaction/summary')).toBe(false);
  });

  it('a model with no known window: the first step rejects with a BudgetError naming the models entry, later ones skip', async () => {
    const h = harness({ summarizer: recordingSummarizer(), models: {} });
    h.writer.startTurn();
    h.writer.request({ provider: 'nowhere', model: 'mystery', systemPrompt: 'x', tools: [] });
    h.writer.user('hi');
    const length = h.session.length;
    const err = await h.engine.afterStep().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BudgetError);
    expect((err as BudgetError).code).toBe('no-context-capacity');
    expect((err as Error).message).toContain('models: { "nowhere/mystery": { contextWindow: <tokens> } }');
    expect((err as Error).message).toContain('requireCapacity: false');
    expect(h.session.length).toBe(length);
    // Told once: the next step is skipped, as with requireCapacity: false.
    expect((await h.engine.afterStep()).status).toBe('skipped');
    expect(h.events.filter((e) => e.type === 'capacity.missing')).toHaveLength(1);
  });

  it('requireCapacity: false: warns once per model when its capacity is unknown, and skips', async () => {
    const h = harness({ summarizer: recordingSummarizer(), models: {}, requireCapacity: false });
    h.writer.startTurn();
    h.writer.request({ provider: 'nowhere', model: 'mystery', systemPrompt: 'x', tools: [] });
    h.writer.user('hi');
    const a = await h.engine.afterStep();
    const b = await h.engine.afterStep();
    expect(a.status).toBe('skipped');
    expect(b.status).toBe('skipped');
    const warnings = h.events.filter((e) => e.type === 'capacity.missing');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ provider: 'nowhere', model: 'mystery' });
  });

  it('auto: false leaves pressure alone', async () => {
    const s = recordingSummarizer();
    const h = harness({ summarizer: s, config: { headroomTokens: 500, maxTokens: 400, auto: false } });
    openTurn(h);
    for (let i = 0; i < 25; i++) expect((await h.step(i)).status).toBe('auto-off');
    expect(s.calls).toHaveLength(0);
  });
});

describe('cancellation and late summaries (docs/spec.md#5-the-transaction Better)', () => {
  it('cancel while summarizing: the signal aborts, the bracket closes as cancelled, a late summary is never committed', async () => {
    const s = deferredSummarizer();
    const h = harness({ summarizer: s });
    openTurn(h);
    let i = 0;
    // Step until the summarizer is called.
    let pending: ReturnType<typeof h.engine.afterStep> | undefined;
    const controller = new AbortController();
    for (; i < 60; i++) {
      h.toolStep(i);
      pending = h.engine.afterStep({ signal: controller.signal });
      const raced = await Promise.race([pending.then(() => 'done' as const), s.call(0).then(() => 'called' as const)]);
      if (raced === 'called') break;
      h.writer.endStep();
    }
    const call = await s.call(0);
    controller.abort(new Error('user pressed Ctrl-C'));
    const r = await pending!;
    expect(call.signal.aborted).toBe(true);
    expect(r.status).toBe('cancelled');
    // The summarizer ignores its signal and answers late: nothing may change.
    const before = JSON.stringify(h.session.events());
    call.resolve({ text: 'late summary', requests: 1 });
    await new Promise((res) => setTimeout(res, 20));
    expect(JSON.stringify(h.session.events())).toBe(before);
    const end = h.session
      .events()
      .filter((e) => e.type === 'compaction/end')
      .at(-1)!;
    expect(end.type === 'compaction/end' && end.data.error?.code).toBe('cancelled');
    expect(h.session.events().some((e) => e.type === 'compaction/summary')).toBe(false);
    expect(h.session.lock.held).toBe(false);
  });
});

describe('manual compaction (docs/spec.md#9-manual-compaction-compact)', () => {
  it('is busy while a turn is open, and writes nothing', async () => {
    const h = harness({ summarizer: recordingSummarizer() });
    openTurn(h);
    await h.step(0);
    const n = h.session.length;
    await expect(h.engine.compactNow()).rejects.toMatchObject({ code: 'busy' });
    expect(h.session.length).toBe(n);
  });

  it('a pre-aborted signal fails at once with its reason and writes nothing', async () => {
    const s = recordingSummarizer();
    const h = harness({ summarizer: s });
    openTurn(h);
    await h.step(0);
    h.writer.endTurn();
    const n = h.session.length;
    const c = new AbortController();
    c.abort(new Error('stop right there'));
    await expect(h.engine.compactNow({ signal: c.signal })).rejects.toMatchObject({ code: 'cancelled', message: 'stop right there' });
    expect(h.session.length).toBe(n);
    expect(s.calls).toHaveLength(0);
  });

  it('nothing to compact resolves null and writes nothing', async () => {
    const h = harness({ summarizer: recordingSummarizer() });
    openTurn(h);
    h.writer.endTurn();
    const n = h.session.length;
    expect(await h.engine.compactNow()).toBeNull();
    expect(h.session.length).toBe(n);
  });

  it('keeps only the newest unit, brackets with turn null, passes the focus, and is durable when it resolves', async () => {
    const dir = tempDir();
    const store = new JsonlStore(dir);
    const session = await Session.open(store, 'manual');
    const s = recordingSummarizer();
    const h = harness({ summarizer: s }, session);
    openTurn(h);
    for (let i = 0; i < 4; i++) await h.step(i);
    h.writer.endTurn();
    const record = await h.engine.compactNow({ focus: 'the failing build' });
    expect(record).not.toBeNull();
    expect(s.calls[0]!.focus).toBe('the failing build');
    const start = h.session.events().find((e) => e.type === 'compaction/start')!;
    expect(start.type === 'compaction/start' && start.data).toEqual({ turn: null, trigger: 'manual' });
    // Only the newest unit (last assistant + its result) stays after the checkpoint.
    expect(h.session.deriveMessages().map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    // Durable before resolving: the file already holds compaction/end.
    const lines = readFileSync(store.pathOf('manual'), 'utf8').trim().split('\n');
    expect(JSON.parse(lines.at(-1)!).type).toBe('compaction/end');
    await session.close();
  });
});

describe('overflow recovery (docs/spec.md#6-overflow-recovery)', () => {
  const overflowError = Object.assign(new Error("This model's maximum context length is 6000 tokens. However, your messages resulted in 7000 tokens."), {
    status: 400,
    code: 'context_length_exceeded',
  });

  it('an unrelated error is returned untouched and nothing is written', async () => {
    const h = harness({ summarizer: recordingSummarizer() });
    openTurn(h);
    await h.step(0);
    const n = h.session.length;
    const err = Object.assign(new Error('Invalid tool_calls'), { status: 400 });
    const a = await h.engine.onRequestError(err);
    expect(a).toMatchObject({ kind: 'fail', error: err, reason: 'not-overflow' });
    expect(h.session.length).toBe(n);
  });

  it('compacts the maximal balanced head and answers retry; the rebuilt request holds the checkpoint, not the old history', async () => {
    const s = recordingSummarizer();
    const h = harness({ summarizer: s });
    openTurn(h);
    for (let i = 0; i < 5; i++) await h.step(i);
    const a = await h.engine.onRequestError(overflowError);
    expect(a.kind).toBe('retry');
    const messages = h.session.deriveMessages();
    expect(messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(String(messages[1]!.content)).toContain('<compacted-summary>');
    expect(JSON.stringify(messages)).not.toContain('"c0"');
    expect(openAIMessageProblems(messages)).toEqual([]);
  });

  it('is capped by maxOverflowRetries, and the count resets after a successful assistant message', async () => {
    const h = harness({ summarizer: recordingSummarizer() });
    openTurn(h);
    for (let i = 0; i < 5; i++) await h.step(i);
    expect((await h.engine.onRequestError(overflowError)).kind).toBe('retry');
    await h.step(10);
    await h.step(11);
    // No success in between for this retry: the first retry was granted before steps 10/11? They were successes.
    expect((await h.engine.onRequestError(overflowError)).kind).toBe('retry');
    const n = h.session.length;
    const third = await h.engine.onRequestError(overflowError);
    expect(third).toMatchObject({ kind: 'fail', reason: 'retries-exhausted', error: overflowError });
    expect(h.session.length).toBe(n);
  });

  it('checks the lock before pruning: a held lock declines without writing anything', async () => {
    const h = harness({ summarizer: recordingSummarizer() });
    openTurn(h);
    await h.step(0, 'y '.repeat(9000));
    h.session.append({ type: 'compaction/start', data: { turn: 0, trigger: 'manual' } });
    const n = h.session.length;
    const a = await h.engine.onRequestError(overflowError);
    expect(a).toMatchObject({ kind: 'fail', reason: 'busy' });
    expect(h.session.length).toBe(n);
  });

  it('a cancelled recovery keeps the original error even when pruning advanced the surface', async () => {
    const s = deferredSummarizer();
    // A large window keeps pressure compaction out of the way: only overflow recovery runs.
    const h = harness({ summarizer: s, models: { 'test/small': { contextWindow: 200_000, maxOutputTokens: 500 } } });
    openTurn(h);
    for (let i = 0; i < 3; i++) await h.step(i, `${'z'.repeat(9000)}`);
    const c = new AbortController();
    const pending = h.engine.onRequestError(overflowError, { signal: c.signal });
    await s.call(0);
    expect(h.session.surface.replaceGeneration).toBeGreaterThan(0); // pruning already advanced it
    c.abort();
    const a = await pending;
    expect(a).toMatchObject({ kind: 'fail', reason: 'cancelled', error: overflowError });
    expect(h.session.events().filter((e) => e.type === 'compaction/prune').length).toBeGreaterThan(0);
  });

  it('maxOverflowRetries 0 turns recovery off', async () => {
    const h = harness({ summarizer: recordingSummarizer(), config: { headroomTokens: 500, maxTokens: 400, maxOverflowRetries: 0 } });
    openTurn(h);
    await h.step(0);
    expect(await h.engine.onRequestError(overflowError)).toMatchObject({ kind: 'fail', reason: 'disabled' });
  });
});

describe('circuit breaker', () => {
  it('pauses automatic compaction after failureLimit consecutive failures, until a manual success', async () => {
    let fail = true;
    const good = recordingSummarizer();
    const summarizer = {
      name: 'switch',
      async summarize(req: Parameters<typeof good.summarize>[0], signal: AbortSignal) {
        if (fail) return failingSummarizer('summary-empty').summarize(req, signal);
        return good.summarize(req, signal);
      },
    };
    const h = harness({ summarizer, config: { headroomTokens: 500, maxTokens: 400, circuitBreaker: { failureLimit: 3, cooldownMs: 60_000 } } });
    openTurn(h);
    const { index } = await stepUntilPressure(h);
    expect((await h.step(index + 1)).status).toBe('failed');
    expect((await h.step(index + 2)).status).toBe('failed');
    expect(h.events.filter((e) => e.type === 'breaker.opened')).toHaveLength(1);
    const paused = await h.step(index + 3);
    expect(paused.status).toBe('paused');
    fail = false;
    h.writer.endTurn();
    expect(await h.engine.compactNow()).not.toBeNull();
    expect(h.events.some((e) => e.type === 'breaker.closed' && e.why === 'success')).toBe(true);
    openTurn(h, 'continue');
    const r = await h.step(index + 4);
    expect(r.status).not.toBe('paused');
  });

  it('closes again after the cool-down', async () => {
    const clock = new SimulatedClock();
    const h = harness({
      summarizer: failingSummarizer('summary-empty'),
      clock,
      config: { headroomTokens: 500, maxTokens: 400, circuitBreaker: { failureLimit: 1, cooldownMs: 1000 } },
    });
    openTurn(h);
    const { index } = await stepUntilPressure(h);
    expect((await h.step(index + 1)).status).toBe('paused');
    clock.increment(999);
    expect((await h.step(index + 2)).status).toBe('paused');
    clock.increment(1);
    expect(h.events.some((e) => e.type === 'breaker.closed' && e.why === 'cooldown')).toBe(true);
    expect((await h.step(index + 3)).status).toBe('failed');
  });
});

describe('crash and recovery', () => {
  it('a process that dies mid-summary leaves a valid log; reopen sees the orphan lock, recover() clears it, the next compaction succeeds', async () => {
    const dir = tempDir();
    const store = new JsonlStore(dir);
    const session = await Session.open(store, 'crash');
    const s = deferredSummarizer();
    const h = harness({ summarizer: s }, session);
    openTurn(h);
    let i = 0;
    for (; i < 60; i++) {
      h.toolStep(i);
      const p = h.engine.afterStep();
      const raced = await Promise.race([p.then(() => 'done' as const), s.call(0).then(() => 'called' as const)]);
      if (raced === 'called') break;
      h.writer.endStep();
    }
    const messagesBefore = JSON.stringify(session.deriveMessages());
    await session.flush();
    // The process "dies": the actor is stopped where it is, and the file is released.
    h.engine.actor.stop(); // a dead process: no cleanup code runs
    expect((await s.call(0)).signal.aborted).toBe(true);
    await session.close();

    const reopened = await Session.open(store, 'crash');
    expect(JSON.stringify(reopened.deriveMessages())).toBe(messagesBefore);
    expect(reopened.lock).toMatchObject({ held: true, orphan: true });
    expect(reopened.needsRecovery).toBe(true);
    const h2 = harness({ summarizer: recordingSummarizer() }, reopened);
    await expect(h2.engine.compactNow()).rejects.toMatchObject({ code: 'busy' });
    const report = reopened.recover();
    expect(report.clearedLock).toBeGreaterThan(0);
    expect(report.closedTurn).toBe(true);
    expect(reopened.lock.held).toBe(false);
    const record = await h2.engine.compactNow();
    expect(record).not.toBeNull();
    expect(openAIMessageProblems(reopened.deriveMessages())).toEqual([]);
    await reopened.close();
  });
});

describe('a chart that fails (a bug, not a service failure)', () => {
  it('a throwing guard inside the transaction chart fails that compaction; the engine keeps working', async () => {
    let broken = true;
    const h = harness({
      summarizer: recordingSummarizer(),
      services: (d) => ({ validateSpan: (input) => (broken ? (undefined as never) : d.validateSpan(input)) }),
    });
    openTurn(h);
    const { result, index } = await stepUntilPressure(h);
    expect(result.status).toBe('failed');
    expect(result.error!.code).toBe('internal');
    broken = false;
    const next = await h.step(index + 1);
    expect(next.status).toBe('compacted');
  });

  it('a throwing guard inside the pressure chart settles the call with an internal error; the engine keeps working', async () => {
    let broken = true;
    const h = harness({
      summarizer: recordingSummarizer(),
      services: (d) => ({ measure: (input) => (broken ? (undefined as never) : d.measure(input)) }),
    });
    openTurn(h);
    const r = await h.step(0);
    expect(r.status).toBe('failed');
    expect(r.error!.code).toBe('internal');
    expect(h.engine.actor.getSnapshot().status).toBe('active');
    broken = false;
    expect((await h.step(1)).status).toBe('below');
  });
});

describe('errors a caller can act on', () => {
  it('a failed summary hands over the summarizer error as the CompactionError cause', async () => {
    const h = harness({ summarizer: failingSummarizer('summary-empty') });
    openTurn(h);
    const { result } = await stepUntilPressure(h);
    expect(result.error).toBeInstanceOf(CompactionError);
    expect(result.error!.cause).toMatchObject({ code: 'summary-empty', message: 'scripted summary-empty' });
  });
});

describe('engine.stop()', () => {
  it('is graceful: the running compaction is cancelled, its bracket closed, the session stays usable', async () => {
    const s = deferredSummarizer();
    const h = harness({ summarizer: s });
    openTurn(h);
    for (let i = 0; i < 4; i++) await h.step(i);
    h.writer.endTurn();
    const pending = h.engine.compactNow();
    const call = await s.call(0);
    h.engine.stop();
    await expect(pending).rejects.toMatchObject({ code: 'engine-stopped' });
    expect(call.signal.aborted).toBe(true);
    expect(h.session.lock.held).toBe(false);
    const end = h.session.events().at(-1)!;
    expect(end.type === 'compaction/end' && end.data.error?.code).toBe('cancelled');
    // A new engine on the same session compacts at once.
    const h2 = harness({ summarizer: recordingSummarizer() }, h.session);
    expect(await h2.engine.compactNow()).not.toBeNull();
  });
});

describe('review fixes', () => {
  it('a span that includes the system prompt is refused before the bracket: nothing written, no summary asked for', async () => {
    const s = recordingSummarizer();
    const h = harness({
      summarizer: s,
      services: (d) => ({
        selectRange: (input) => {
          const r = d.selectRange(input);
          if (!r) return r;
          const system = h.session.surface.seqAt(0);
          return { ...r, start: system, startPos: 0, shadowed: [system, ...r.shadowed] };
        },
      }),
    });
    openTurn(h);
    for (let i = 0; i < 4; i++) await h.step(i);
    h.writer.endTurn();
    const n = h.session.length;
    await expect(h.engine.compactNow()).rejects.toMatchObject({ code: 'changed' });
    expect(h.session.length).toBe(n);
    expect(s.calls).toHaveLength(0);
  });

  it('a checkpoint the session would refuse is caught before compaction/summary is written', async () => {
    const h = harness({
      summarizer: recordingSummarizer(),
      // The span turns invalid after revalidation (a host override): the commit must write nothing but the close.
      services: (d) => ({
        revalidate: (input) => ({ ...d.revalidate(input), stable: true }),
        commit: (input) => d.commit({ ...input, range: { ...input.range, end: input.range.start + 10_000 } }),
      }),
    });
    openTurn(h);
    for (let i = 0; i < 4; i++) await h.step(i);
    h.writer.endTurn();
    const from = h.session.length;
    await expect(h.engine.compactNow()).rejects.toMatchObject({ code: 'commit' });
    expect(h.types(from)).toEqual(['compaction/start', 'compaction/end']);
  });

  it('overflow recovery leaves tool output alone when pruning is off', async () => {
    const h = harness({ summarizer: recordingSummarizer(), pruner: false, models: { 'test/small': { contextWindow: 200_000, maxOutputTokens: 500 } } });
    openTurn(h);
    for (let i = 0; i < 3; i++) await h.step(i, 'z'.repeat(9000));
    const err = Object.assign(new Error("This model's maximum context length is 6000 tokens."), { status: 400, code: 'context_length_exceeded' });
    expect((await h.engine.onRequestError(err)).kind).toBe('retry');
    expect(h.types()).not.toContain('compaction/prune');
  });

  it('the pressure figure keeps the provider anchor across a compaction (a replace moves it by its delta)', async () => {
    const h = harness({ summarizer: recordingSummarizer() });
    openTurn(h);
    const w = h.writer;
    // The provider counts 30% more than our tokenizer: the anchor carries that through the compaction.
    let i = 0;
    for (; i < 60; i++) {
      w.startStep();
      w.request({ provider: 'test', model: 'small', tools: [], maxTokens: 500 });
      const estimate = h.engine.measure().estimatedTokens;
      w.assistant({
        text: `s${i}`,
        toolCalls: [{ id: `c${i}`, name: 'bash', arguments: '{}' }],
        usage: { promptTokens: Math.round(estimate * 1.3), completionTokens: 5 },
      });
      w.toolResult(`c${i}`, `file${i}.ts\n`.repeat(60));
      const r = await h.engine.afterStep();
      w.endStep();
      if (r.status === 'compacted') {
        const m = h.engine.measure();
        expect(m.anchor).toBeDefined();
        expect(m.totalTokens).toBeGreaterThan(m.estimatedTokens); // the provider's larger scale is kept
        expect(r.compactions[0]!.tokensAfter).toBe(m.totalTokens);
        return;
      }
    }
    throw new Error('never compacted');
  });

  it('tells the host once when the provider reports a prompt larger than the window (silent truncation)', async () => {
    const h = harness({ summarizer: recordingSummarizer() });
    openTurn(h);
    h.writer.startStep();
    h.writer.request({ provider: 'test', model: 'small', tools: [], maxTokens: 500 });
    h.writer.assistant({ text: 'ok', usage: { promptTokens: 7000, completionTokens: 5 } });
    await h.engine.afterStep();
    await h.engine.afterStep();
    const silent = h.events.filter((e) => e.type === 'overflow.silent');
    expect(silent).toEqual([expect.objectContaining({ promptTokens: 7000, contextWindow: 6000 })]);
  });

  it('a held lock (busy) is not a compaction failure: the breaker does not count it', async () => {
    const h = harness({
      summarizer: recordingSummarizer(),
      config: { headroomTokens: 500, maxTokens: 400, circuitBreaker: { failureLimit: 1, cooldownMs: 60_000 } },
    });
    openTurn(h);
    h.session.append({ type: 'compaction/start', data: { turn: 0, trigger: 'manual' } });
    const { result, index } = await stepUntilPressure(h);
    expect(result.error?.code).toBe('busy');
    expect((await h.step(index + 1)).status).not.toBe('paused');
    expect(h.events.some((e) => e.type === 'breaker.opened')).toBe(false);
  });

  it('models given to the engine merge with config.models field by field', () => {
    const h = harness({
      summarizer: recordingSummarizer(),
      config: { models: { 'test/small': { contextWindow: 6000, tokenizer: 'cl100k_base' } } },
      models: { 'test/small': { maxOutputTokens: 300 } },
    });
    expect(h.engine.config.models['test/small']).toEqual({ contextWindow: 6000, tokenizer: 'cl100k_base', maxOutputTokens: 300 });
  });
});

describe('bad configuration', () => {
  it('throws a ConfigError at creation, naming field and value, and leaves the session untouched', async () => {
    const { ConfigError } = await import('../../src/services/config');
    const { createCompactionEngine } = await import('../../src/engine/facade');
    const session = Session.inMemory();
    session.append({ type: 'session/end-seed', data: {} });
    const before = JSON.stringify(session.events());
    const attempt = (opts: object) => () => createCompactionEngine({ session, ...opts });
    expect(attempt({ config: { thresholdRatio: 2 } })).toThrow(ConfigError);
    expect(attempt({ config: { thresholdRatio: 2 } })).toThrow(/config\.thresholdRatio = 2/);
    expect(attempt({ config: { retainRatio: 0.9 } })).toThrow(/retainRatio/);
    expect(attempt({ models: { 'x/y': { contextWindow: -5 } } })).toThrow(/config\.models/);
    expect(attempt({ config: { notAField: 1 } })).toThrow(/notAField/);
    expect(JSON.stringify(session.events())).toBe(before);
  });
});
