/**
 * Provider faults that stall a summary (docs/reliability.md#summary-timeouts), against the local server over real
 * HTTP: no byte at all, the headers and then nothing, a few deltas and then nothing, and a
 * stream that keeps dripping past the summary's deadline. Each ends with `summary-timeout`
 * within the configured limit, on both summarizers, and through the engine: the bracket is
 * closed with the error, the lock is free, the surface is unchanged and the breaker counts it.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import OpenAI from 'openai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AiSdkSummarizer } from '../../../src/adapters/ai-sdk/index';
import {
  CompactionError,
  createCompactionEngine,
  OpenAISummarizer,
  Session,
  SessionWriter,
  type EngineNotification,
  type Summarizer,
} from '../../../src/index';
import { SummarizerError } from '../../../src/services/summarizing';
import { startOpenAIServer, type LocalOpenAIServer, type Scenario } from '../../../src/testing/index';
import { harness, openTurn, stepUntilPressure, SYSTEM_PROMPT } from '../../helpers/engine';
import { spanRequest } from '../../helpers/summary-request';

// A server per test: a request a test gave up on (or a client's retry of it) never reaches the next test's scripted queue.
let server: LocalOpenAIServer;
beforeEach(async () => {
  server = await startOpenAIServer({ defaultModel: 'small' });
});
afterEach(() => server.close());

const client = () => new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
const summarizers: Array<[string, () => Summarizer]> = [
  ['OpenAISummarizer', () => new OpenAISummarizer({ client: client(), bounding: false, ledger: false })],
  [
    'AiSdkSummarizer',
    () =>
      new AiSdkSummarizer({ model: createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'test', includeUsage: true }).chatModel('small') }),
  ],
];

const STALLS: Array<[string, Scenario]> = [
  ['before the first byte', { kind: 'hang', sendHeaders: false }],
  ['after the headers', { kind: 'hang' }],
  ['mid-stream', { kind: 'hang', afterChunks: 3, content: 'The user asked ' }],
];

function conversation(): Session {
  const s = Session.inMemory();
  const w = new SessionWriter(s);
  w.startTurn();
  w.request({ provider: 'test', model: 'small', systemPrompt: SYSTEM_PROMPT, tools: [], maxTokens: 500 });
  for (let i = 0; i < 4; i++) {
    w.user(`question ${i}: ${'why does the build fail? '.repeat(20)}`);
    w.assistant({ text: `answer ${i}: ${'the linker cannot find libfoo. '.repeat(20)}` });
  }
  w.endTurn();
  return s;
}

async function failure(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => new Error('expected a failure'),
    (e: unknown) => e,
  );
}

describe.each(summarizers)('%s: a stalled provider', (_name, make) => {
  for (const [when, scenario] of STALLS) {
    it(`stalling ${when} ends with summary-timeout after the idle limit, and the request is closed`, async () => {
      const session = conversation();
      const request = { ...spanRequest(session, session.surface.length - 1, 400, { provider: 'test', model: 'small' }), idleTimeoutMs: 300 };
      const first = server.requests.length;
      server.enqueue(scenario);
      const started = Date.now();
      const err = await failure(make().summarize(request, new AbortController().signal));
      const took = Date.now() - started;
      expect(err).toBeInstanceOf(SummarizerError);
      expect((err as SummarizerError).code).toBe('summary-timeout');
      expect((err as Error).message).toContain('300 ms');
      expect(took).toBeGreaterThanOrEqual(290);
      // The stalled request was given up, not left open (a stall never ends: no upper bound on the time is needed).
      const rec = await server.waitForClose(first);
      expect(rec.aborted).toBe(true);
    });
  }

  it('a stream that keeps sending within the idle limit is not cut off', async () => {
    const session = conversation();
    // Gaps far inside the limit: only a process stalled for the whole limit could cut it (a loaded machine is not that).
    const request = { ...spanRequest(session, session.surface.length - 1, 400, { provider: 'test', model: 'small' }), idleTimeoutMs: 10_000 };
    server.enqueue({ kind: 'reply', content: 'The user asked why the build fails; the linker cannot find libfoo.', chunks: 6, chunkDelayMs: 10 });
    const r = await make().summarize(request, new AbortController().signal);
    expect(r.text).toContain('libfoo');
  });

  it("the caller's cancel is still summary-cancelled, not a timeout", async () => {
    const session = conversation();
    const request = { ...spanRequest(session, session.surface.length - 1, 400, { provider: 'test', model: 'small' }), idleTimeoutMs: 5_000 };
    server.enqueue({ kind: 'hang', afterChunks: 1 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('user pressed Ctrl-C')), 200);
    const err = await failure(make().summarize(request, controller.signal));
    expect((err as SummarizerError).code).toBe('summary-cancelled');
  });
});

describe('the engine and a stalled summary', () => {
  const models = { 'test/small': { contextWindow: 6000, maxOutputTokens: 500 } };

  it('compactNow: an idle stall is summary/summary-timeout; the bracket is closed, the lock free, the surface unchanged', async () => {
    const session = conversation();
    const engine = createCompactionEngine({ session, client: client(), models, config: { summaryIdleTimeoutMs: 300, background: false } });
    const before = JSON.stringify(session.deriveMessages());
    const from = session.length;
    server.enqueue({ kind: 'hang', afterChunks: 2 });
    const err = await failure(engine.compactNow());
    expect(err).toBeInstanceOf(CompactionError);
    expect((err as CompactionError).code).toBe('summary');
    expect((err as CompactionError).causeCode).toBe('summary-timeout');
    const written = session.events().slice(from);
    expect(written.map((e) => e.type)).toEqual(['compaction/start', 'compaction/end']);
    expect((written[1]!.data as { error?: { code: string } }).error?.code).toBe('summary');
    expect(session.lock.held).toBe(false);
    expect(JSON.stringify(session.deriveMessages())).toBe(before);
    engine.stop();
  });

  it('compactNow: a stream that drips past summaryTimeoutMs is abandoned at the deadline (the chart), not when it ends', async () => {
    const session = conversation();
    const engine = createCompactionEngine({
      session,
      client: client(),
      models,
      config: { summaryIdleTimeoutMs: 2_000, summaryTimeoutMs: 600, background: false },
    });
    const first = server.requests.length;
    server.enqueue({ kind: 'reply', content: 'a summary that takes far too long to arrive', chunks: 40, chunkDelayMs: 150 });
    const started = Date.now();
    const err = await failure(engine.compactNow());
    const took = Date.now() - started;
    expect((err as CompactionError).code).toBe('summary');
    expect((err as CompactionError).causeCode).toBe('summary-timeout');
    expect((err as Error).message).toContain('summaryTimeoutMs');
    expect(took).toBeGreaterThanOrEqual(590);
    // Abandoned mid-stream (the client went away before the 40 chunks' 6 s were sent), not when it ended.
    expect((await server.waitForClose(first)).aborted).toBe(true);
    expect(session.lock.held).toBe(false);
    engine.stop();
  });

  it('a per-model policy sets the limits of its route', async () => {
    const session = conversation();
    const engine = createCompactionEngine({
      session,
      client: client(),
      models,
      config: { summaryTimeoutMs: 60_000, background: false, modelPolicies: [{ provider: 'test', model: 'small', summaryTimeoutMs: 400 }] },
    });
    const first = server.requests.length;
    server.enqueue({ kind: 'reply', content: 'slow', chunks: 40, chunkDelayMs: 150 });
    const err = await failure(engine.compactNow());
    expect((err as CompactionError).causeCode).toBe('summary-timeout');
    // The route's 400 ms, not the top level's minute: given up while the 6 s stream was still sending.
    expect((await server.waitForClose(first)).aborted).toBe(true);
    engine.stop();
  });

  it('pressure compaction: a stalled summary fails the step with summary-timeout and counts for the breaker', async () => {
    const h = harness({
      summarizer: new OpenAISummarizer({ client: client() }),
      config: {
        headroomTokens: 500,
        maxTokens: 400,
        thresholdRatio: 0.8,
        retainRatio: 0.2,
        economics: false,
        background: false,
        prune: { enabled: false },
        summaryIdleTimeoutMs: 300,
        circuitBreaker: { failureLimit: 1 },
        truncationFallback: false,
      },
    });
    server.setHandler(() => ({ kind: 'hang', afterChunks: 1 }));
    try {
      openTurn(h, 'Please list every directory.');
      const { result } = await stepUntilPressure(h);
      expect(result.status).toBe('failed');
      expect(result.error?.code).toBe('summary');
      expect(result.error?.causeCode).toBe('summary-timeout');
      expect(h.events.some((e: EngineNotification) => e.type === 'breaker.opened')).toBe(true);
      expect(h.session.lock.held).toBe(false);
    } finally {
      server.setHandler(undefined);
      h.engine.stop();
    }
  });

  it('background compaction: a step that reaches the threshold while the summary stalls is released by the deadline, not blocked', async () => {
    const h = harness({
      summarizer: new OpenAISummarizer({ client: client() }),
      config: {
        headroomTokens: 500,
        maxTokens: 400,
        thresholdRatio: 0.8,
        retainRatio: 0.2,
        economics: false,
        background: true,
        prune: { enabled: false },
        summaryTimeoutMs: 500,
        truncationFallback: false,
      },
    });
    // Every summary request hangs after the headers (the idle limit is the default minute).
    server.setHandler(() => ({ kind: 'hang' }));
    try {
      openTurn(h, 'Please list every directory.');
      const { result, index } = await stepUntilPressure(h);
      expect(result.status).toBe('preparing');
      // Keep stepping: the threshold comes while the background summary hangs.
      // The summary hangs for ever: a step that returns at all was released by the deadline.
      let last = result;
      for (let i = index + 1; i < index + 40 && last.status === 'preparing'; i++) last = await h.step(i);
      expect(last.status).toBe('failed');
      expect(last.error?.causeCode).toBe('summary-timeout');
      expect(h.session.lock.held).toBe(false);
    } finally {
      server.setHandler(undefined);
      h.engine.stop();
    }
  });

  it('background compaction: a summary past its deadline is closed with summary-timeout and reported', async () => {
    const h = harness({
      summarizer: new OpenAISummarizer({ client: client() }),
      config: {
        headroomTokens: 500,
        maxTokens: 400,
        thresholdRatio: 0.8,
        retainRatio: 0.2,
        economics: false,
        background: true,
        summaryIdleTimeoutMs: 5_000,
        summaryTimeoutMs: 400,
      },
    });
    server.setHandler(() => ({ kind: 'reply', content: 'slow', chunks: 40, chunkDelayMs: 150 }));
    try {
      openTurn(h, 'Please list every directory.');
      const { result } = await stepUntilPressure(h);
      expect(result.status).toBe('preparing');
      // Until it is reported (the 6 s stream is still sending when the 400 ms deadline ends it).
      while (!h.events.some((e) => e.type === 'compaction.failed')) await new Promise((r) => setTimeout(r, 20));
      const failed = h.events.find((e) => e.type === 'compaction.failed') as Extract<EngineNotification, { type: 'compaction.failed' }> | undefined;
      expect(failed?.error.causeCode).toBe('summary-timeout');
      expect(failed?.background).toBe(true);
      expect(h.session.lock.held).toBe(false);
    } finally {
      server.setHandler(undefined);
      h.engine.stop();
    }
  });
});
