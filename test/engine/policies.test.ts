/**
 * Per-model policies take effect for their route (docs/configuration.md): every field a `modelPolicies`
 * entry may set — auto, compactionRetries, maxOverflowRetries and the budget fields — is
 * applied to the routed model, not the top level, through the public engine on the local
 * server (`test/small`: a 6000-token window).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cleanupWorlds, fillAbove, openWorld, route, startServer, summaryOfTokens, summaryRequests, toolStep, type Server } from '../machines/runner';

let srv: Server;
beforeAll(async () => {
  srv = await startServer();
});
afterAll(() => srv.close());
afterEach(cleanupWorlds);

const SMALL = { provider: 'test', model: 'small' } as const;

describe('modelPolicies: each field takes effect for its route', () => {
  it('maxOverflowRetries: 0 makes an overflow answer fail (disabled), while the top level allows retries', async () => {
    const w = await openWorld(srv, { config: { maxOverflowRetries: 3, modelPolicies: [{ ...SMALL, maxOverflowRetries: 0 }] } });
    w.ctl.setAuto();
    toolStep(w);
    toolStep(w, { open: true });
    const action = await w.engine.onRequestError(srv.overflowError);
    expect(action).toMatchObject({ kind: 'fail', reason: 'disabled' });
    expect(w.session.events().filter((e) => e.type === 'compaction/start')).toEqual([]);
    // Another route keeps the top level's retries.
    toolStep(w, { open: true, model: 'big' });
    expect(await w.engine.onRequestError(srv.overflowError)).toMatchObject({ kind: 'retry' });
  });

  it('auto: false stops pressure compaction (and overflow recovery) for that route only', async () => {
    const w = await openWorld(srv, { pruner: false, config: { modelPolicies: [{ ...SMALL, auto: false }] } });
    w.ctl.setAuto();
    fillAbove(w, 100);
    const r = await w.engine.afterStep();
    expect(r.status).toBe('auto-off');
    expect(summaryRequests(w)).toHaveLength(0);
    expect(await w.engine.onRequestError(srv.overflowError)).toMatchObject({ kind: 'fail', reason: 'disabled' });
  });

  it('auto: true for a route compacts even when the top level is off', async () => {
    const w = await openWorld(srv, { pruner: false, config: { auto: false, modelPolicies: [{ ...SMALL, auto: true }] } });
    w.ctl.setAuto();
    fillAbove(w, 100);
    expect((await w.engine.afterStep()).status).toBe('compacted');
    route(w, 'big');
    expect((await w.engine.afterStep()).status).toBe('auto-off');
  });

  it('compactionRetries: 0 makes one attempt when the top level allows three', async () => {
    const w = await openWorld(srv, {
      pruner: false,
      config: { compactionRetries: 2, minProgressRatio: 0, modelPolicies: [{ ...SMALL, compactionRetries: 0 }] },
    });
    w.ctl.setAuto();
    fillAbove(w, 400);
    // Each summary barely shrinks its span: pressure stays above the threshold after an attempt.
    w.ctl.overrides = {};
    const spans: number[] = [];
    w.ctl.overrides.summarize = async (call) => {
      const input = call.input as { range: { tokens: number } };
      spans.push(input.range.tokens);
      call.resolve({ text: summaryOfTokens(input.range.tokens - 15), requests: 1 });
    };
    const before = w.ctl.calls.length;
    const r = await w.engine.afterStep();
    expect(r.status).toBe('failed');
    expect(r.error?.code).toBe('still-above-threshold');
    expect(r.error?.message).toContain('after 1 attempt(s)');
    expect(spans).toHaveLength(1);
    expect(r.compactions).toHaveLength(1);
    // No second selection: the route's policy allows one attempt.
    expect(w.ctl.calls.slice(before).filter((c) => c.service === 'selectRange')).toHaveLength(1);
  });

  it('the budget fields (thresholdRatio, headroomTokens, retainTokens, maxTokens) apply to the route', async () => {
    const w = await openWorld(srv, {
      config: { modelPolicies: [{ ...SMALL, thresholdRatio: 0.5, headroomTokens: 100, retainTokens: 300, maxTokens: 123 }] },
    });
    w.ctl.setAuto();
    toolStep(w);
    const small = w.engine.measure();
    // W = 6000, O = 500 (the model's output), B = 100: P = 5400; threshold = min(3000, 5400).
    expect(small.threshold).toBe(3000);
    route(w, 'big');
    expect(w.engine.measure().threshold).not.toBe(3000);
    route(w, 'small');
    fillAbove(w, 100);
    const r = await w.engine.afterStep();
    expect(r.compactions.length).toBeGreaterThan(0);
    // The summary request asked for the route's cap.
    const body = summaryRequests(w).at(-1)!.json as { max_tokens?: number; max_completion_tokens?: number };
    // The route's maxTokens caps the checkpoint; the ledger (here the user's message) takes its share off the model's part.
    expect(body.max_tokens ?? body.max_completion_tokens).toBeLessThanOrEqual(123);
    expect(body.max_tokens ?? body.max_completion_tokens).toBeGreaterThan(123 / 2);
  });
});
