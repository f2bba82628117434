/**
 * The engine's service modules, each on its own over a real in-memory session, meter and
 * config (no chart, no engine): what each returns, what it writes, and the errors it maps to
 * chart codes.
 */
import { describe, expect, it } from 'vitest';
import { Session, SessionWriter } from '../../src/session/index';
import { BracketWriter } from '../../src/services/transaction';
import { parseConfig, type CompactionConfigInput } from '../../src/services/config';
import type { ServiceDeps } from '../../src/services/core';
import { checkAdmission, createEngineServices, probeLock, summarizeSpan } from '../../src/engine/actors';
import { measureFigures, measurePressure } from '../../src/services/pressure';
import { TokenMeter } from '../../src/services/metering';
import { pruneSurface } from '../../src/services/pruning';
import { routeBudget, routePolicy, summaryTarget } from '../../src/services/core';
import { selectSpan } from '../../src/services/selection';
import { revalidateSpan, spanIntact, validateSpan } from '../../src/services/transaction';
import { SummarizerError, type Summarizer } from '../../src/services/summarizing';
import { buildSummaryRequest } from '../../src/services/transaction';
import { ExtractiveSummarizer } from '../../src/services/summarizing';
import { getTokenizer } from '../../src/services/metering';

const MODELS = { 'test/small': { contextWindow: 6000, maxOutputTokens: 500 }, 'test/big': { contextWindow: 200_000, maxOutputTokens: 500 } };

function world(config: CompactionConfigInput = {}, clock = { t: 1000 }) {
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  const parsed = parseConfig({ headroomTokens: 500, maxTokens: 400, thresholdRatio: 0.8, retainRatio: 0.2, models: MODELS, ...config });
  const meter = new TokenMeter(session, { tokenizerFor: () => getTokenizer('o200k_base') });
  const deps: ServiceDeps = { session, meter, config: parsed, now: () => clock.t, tokenizerName: () => 'o200k_base' };
  let n = 0;
  const step = (opts: { result?: string; model?: string; promptTokens?: number } = {}) => {
    if (session.openTurn === null) {
      w.startTurn();
      w.request({ provider: 'test', model: opts.model ?? 'small', systemPrompt: 'You are a coder.', maxTokens: 300 });
      w.user('Fix the build.');
    }
    w.startStep();
    w.request({ provider: 'test', model: opts.model ?? 'small', maxTokens: 300 });
    n++;
    w.assistant({
      text: `step ${n}`,
      toolCalls: [{ id: `c${n}`, name: 'bash', arguments: '{"command":"ls"}' }],
      ...(opts.promptTokens ? { usage: { promptTokens: opts.promptTokens, completionTokens: 5 } } : {}),
    });
    w.toolResult(`c${n}`, opts.result ?? `file${n}.ts\n`.repeat(60), { toolName: 'bash' });
    w.endStep();
  };
  return { session, w, deps, step, clock };
}

describe('route', () => {
  it('before any request: unrouted budget, the top-level policy', () => {
    const { deps } = world({ compactionRetries: 2 });
    expect(() => routeBudget(deps)).toThrow(expect.objectContaining({ code: 'unrouted' }));
    expect(routePolicy(deps)).toEqual({ auto: true, maxAttempts: 3, maxOverflowRetries: 1 });
    expect(() => summaryTarget(deps)).toThrow(expect.objectContaining({ code: 'summary' }));
  });

  it("a routed model's policy entry wins over the top level", () => {
    const { deps, step } = world({ modelPolicies: [{ provider: 'test', model: 'small', auto: false, compactionRetries: 0, maxOverflowRetries: 0 }] });
    step();
    expect(routePolicy(deps)).toEqual({ auto: false, maxAttempts: 1, maxOverflowRetries: 0 });
    expect(routeBudget(deps).window).toBe(6000);
    expect(summaryTarget(deps)).toEqual({ provider: 'test', model: 'small' });
    step({ model: 'big' });
    expect(routePolicy(deps)).toEqual({ auto: true, maxAttempts: 2, maxOverflowRetries: 1 });
  });
});

describe('measure', () => {
  it('unrouted, misconfigured and a reading against the threshold', () => {
    const { deps, step } = world();
    expect(measurePressure(deps)).toEqual({ kind: 'unrouted' });
    step({ model: 'nobody-knows' });
    expect(measurePressure(deps)).toMatchObject({ kind: 'misconfigured', provider: 'test', model: 'nobody-knows' });
    step();
    const r = measurePressure(deps);
    expect(r.kind).toBe('reading');
    if (r.kind === 'reading') {
      expect(r.reading).toMatchObject({ provider: 'test', model: 'small', contextWindow: 6000 });
      expect(r.reading.totalTokens).toBe(deps.meter.measure().totalTokens);
      expect(r.reading.silentOverflow).toBeUndefined();
    }
  });

  it('reports usage above the window as a silent overflow, with its seq', () => {
    const { deps, step, session } = world();
    step({ promptTokens: 6100 });
    const r = measurePressure(deps);
    expect(r.kind === 'reading' && r.reading.silentOverflow).toEqual({ seq: session.latestUsage!.seq, promptTokens: 6100 });
  });

  it('measureFigures serialises to plain data and keeps the live prices', () => {
    const { deps, step } = world();
    step();
    const m = measureFigures(deps);
    expect(Object.keys(JSON.parse(JSON.stringify(m)))).not.toContain('prices');
    expect(m.prices.length).toBe(deps.session.surface.length);
    expect(m.threshold).toBeGreaterThan(0);
  });

  it('measureFigures leaves the figures undefined only for no route or no budget; any other throw propagates', () => {
    const { deps, step } = world();
    expect(measureFigures(deps).threshold).toBeUndefined(); // unrouted: no request/header yet
    step();
    const noBudget = { ...deps, config: { ...deps.config, models: {} } };
    expect(measureFigures(noBudget).contextWindow).toBeUndefined(); // BudgetError: no window known
    const bug = new TypeError('a bug in the route lookup');
    const broken = {
      ...deps,
      config: Object.defineProperty({ ...deps.config }, 'models', {
        get() {
          throw bug;
        },
      }),
    };
    expect(() => measureFigures(broken)).toThrow(bug);
  });
});

describe('pruneSurface', () => {
  it('cuts oversized results; protecting the retained tail leaves the newest alone', () => {
    // Everything is recent: protected, a pressure pass prunes nothing; an overflow pass prunes both.
    const { deps, step, session } = world({ prune: { thresholdChars: 2000, headChars: 300, tailChars: 100, protectRecentTokens: 100_000 } });
    step({ result: 'x'.repeat(5000) });
    step({ result: 'y'.repeat(5000) });
    const generation = session.surface.replaceGeneration;
    expect(pruneSurface(deps, { trigger: 'pressure', protectRecent: true })).toEqual({ count: 0, tokensFreed: 0, generation });
    const all = pruneSurface(deps, { trigger: 'overflow', protectRecent: false });
    expect(all.count).toBe(2);
    expect(all.tokensFreed).toBeGreaterThan(0);
    expect(all.generation).toBe(session.surface.replaceGeneration);
    expect(all.generation).toBeGreaterThan(generation);
  });
});

describe('selectSpan, validateSpan, revalidateSpan', () => {
  it('selects a balanced span before the retained tail; the span checks hold until the surface changes', () => {
    const { deps, step, session } = world();
    for (let i = 0; i < 6; i++) step();
    const budget = selectSpan(deps, { purpose: 'pressure', attempt: 1, retain: 'budget', stackCheckpoints: true })!;
    const newest = selectSpan(deps, { purpose: 'manual', attempt: 1, retain: 'newest-unit', stackCheckpoints: false })!;
    expect(budget).not.toBeNull();
    expect(newest.shadowed.length).toBeGreaterThanOrEqual(budget.shadowed.length);
    expect(spanIntact(session, budget)).toBe(true);
    const check = validateSpan(session, { range: budget });
    expect(check).toEqual({ lockHeld: false, snapshot: { generation: session.surface.replaceGeneration, surfaceLength: session.surface.length } });
    const verdict = revalidateSpan(deps, { range: budget, mode: 'automatic', snapshot: check.snapshot, summary: { text: 'short summary', requests: 1 } });
    expect(verdict).toMatchObject({ stable: true, spanTokens: budget.tokens, requiredTokens: Math.ceil(0.1 * budget.tokens) });
    expect(verdict.checkpointTokens).toBeLessThan(budget.tokens);
    // The surface grows: an automatic compaction's snapshot no longer holds, a manual one's span does.
    step();
    expect(revalidateSpan(deps, { range: budget, mode: 'automatic', snapshot: check.snapshot, summary: { text: 's', requests: 1 } }).stable).toBe(false);
    expect(revalidateSpan(deps, { range: budget, mode: 'manual', snapshot: check.snapshot, summary: { text: 's', requests: 1 } })).toMatchObject({
      stable: true,
      requiredTokens: 0,
    });
  });

  it('a span that is no longer on the surface is span-invalid (chart code changed)', () => {
    const { step, session, deps } = world();
    for (let i = 0; i < 4; i++) step();
    const range = selectSpan(deps, { purpose: 'manual', attempt: 1, retain: 'newest-unit', stackCheckpoints: false })!;
    expect(() => validateSpan(session, { range: { ...range, start: range.start + 1000 } })).toThrow(
      expect.objectContaining({ code: 'span-invalid', chartCode: 'changed' }),
    );
  });
});

describe('buildSummaryRequest and summarizeSpan', () => {
  it("asks the routed model for the span, within the route's output cap", async () => {
    const { deps, step } = world();
    for (let i = 0; i < 4; i++) step();
    const range = selectSpan(deps, { purpose: 'manual', attempt: 1, retain: 'newest-unit', stackCheckpoints: false })!;
    const req = buildSummaryRequest(deps, range, 'the build');
    expect(req.target).toEqual({ provider: 'test', model: 'small' });
    expect(req.messages).toHaveLength(range.endPos - range.startPos + 1);
    expect(req.maxTokens).toBe(400);
    expect(req.focus).toBe('the build');
    expect(req.contextWindow).toBe(6000);
    const out = await summarizeSpan(deps, new ExtractiveSummarizer(), { range, focus: undefined, trigger: 'manual' }, new AbortController().signal);
    expect(out.text.length).toBeGreaterThan(0);
    expect(out.requests).toBeGreaterThanOrEqual(0);
  });

  it('a summarizer error carries its chart code (cancelled for a cancelled summary)', async () => {
    const { deps, step } = world();
    for (let i = 0; i < 4; i++) step();
    const range = selectSpan(deps, { purpose: 'manual', attempt: 1, retain: 'newest-unit', stackCheckpoints: false })!;
    const failing = (code: string): Summarizer => ({ name: 'failing', summarize: async () => Promise.reject(new SummarizerError(code as never, 'scripted')) });
    const input = { range, focus: undefined, trigger: 'manual' as const };
    await expect(summarizeSpan(deps, failing('summary-request'), input, new AbortController().signal)).rejects.toMatchObject({ chartCode: 'summary' });
    await expect(summarizeSpan(deps, failing('summary-cancelled'), input, new AbortController().signal)).rejects.toMatchObject({ chartCode: 'cancelled' });
  });
});

describe('BracketWriter', () => {
  it('open, commit (three appends), a record with the clock and pressure figures', async () => {
    const { deps, step, session, clock } = world();
    for (let i = 0; i < 4; i++) step();
    const brackets = new BracketWriter(deps);
    const range = selectSpan(deps, { purpose: 'pressure', attempt: 1, retain: 'newest-unit', stackCheckpoints: false })!;
    const opened = brackets.open({ trigger: 'pressure', turn: session.openTurn });
    expect(session.lock.held).toBe(true);
    expect(opened).toMatchObject({ startedAt: 1000, tokensBefore: deps.meter.measure().totalTokens });
    clock.t = 1250;
    const before = session.length;
    const commit = brackets.commit({ range, startSeq: opened.startSeq, summary: { text: 'the summary', requests: 1 }, turn: session.openTurn, opened });
    expect(
      session
        .events()
        .slice(before)
        .map((e) => e.type),
    ).toEqual(['compaction/summary', 'user/message', 'compaction/end']);
    expect(commit).toMatchObject({ startSeq: opened.startSeq, shadowedCount: range.shadowed.length, durationMs: 250, tokensBefore: opened.tokensBefore });
    expect(commit.tokensAfter).toBe(deps.meter.measure().totalTokens);
    expect(commit.tokensAfter).toBeLessThan(commit.tokensBefore);
    expect(session.lock.held).toBe(false);
    await brackets.flush();
    brackets.dispose();
  });

  it("a lock another writer took is busy; closeAbandoned closes only this writer's own bracket", () => {
    const { deps, step, session } = world();
    step();
    const brackets = new BracketWriter(deps);
    session.append({ type: 'compaction/start', data: { turn: session.openTurn, trigger: 'manual' } }); // another writer
    expect(() => brackets.open({ trigger: 'pressure', turn: session.openTurn })).toThrow(expect.objectContaining({ chartCode: 'busy' }));
    expect(brackets.closeAbandoned({ code: 'cancelled', message: 'stopped' })).toBe(false);
    expect(session.lock.held).toBe(true);
    session.append({ type: 'compaction/end', data: { turn: session.openTurn, error: { code: 'cancelled', message: 'the other writer stopped' } } });
    brackets.open({ trigger: 'pressure', turn: session.openTurn });
    expect(brackets.closeAbandoned({ code: 'cancelled', message: 'stopped' })).toBe(true);
    const end = session.events().at(-1)!;
    expect(end.type === 'compaction/end' && end.data.error).toEqual({ code: 'cancelled', message: 'stopped' });
    brackets.dispose();
  });
});

describe('probes and the assembled services', () => {
  it('probeLock and checkAdmission read the session; createEngineServices remembers the last summary error', async () => {
    const { deps, step, session } = world();
    step();
    expect(probeLock(deps)).toEqual({ held: false, generation: session.surface.replaceGeneration });
    expect(checkAdmission(deps)).toEqual({ openTurn: session.openTurn, lockHeld: false });
    const boom = new SummarizerError('summary-request', 'scripted');
    const built = createEngineServices(deps, { name: 'boom', summarize: async () => Promise.reject(boom) });
    for (let i = 0; i < 3; i++) step();
    const range = built.services.selectRange({ purpose: 'manual', attempt: 1, retain: 'newest-unit', stackCheckpoints: false })!;
    await expect(built.services.summarize({ range, focus: undefined, trigger: 'manual' }, new AbortController().signal)).rejects.toBe(boom);
    expect(built.lastSummaryError()).toBe(boom);
    built.services.openBracket({ trigger: 'manual', turn: session.openTurn, range });
    expect(built.lastSummaryError()).toBeUndefined();
    expect(built.services.classify({ error: new Error('boom') }).kind).toBe('other');
    built.brackets.dispose();
  });
});
