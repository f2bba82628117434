/**
 * xcompact/otel with the OpenTelemetry SDK's in-memory exporters, on a real AI SDK loop over
 * HTTP (the scripted model of test/helpers/ai-sdk-script.ts): spans for the compactions, the
 * prunes and the overflow recovery with their attributes, the metrics, a failed compaction's
 * error code, and nothing at all when the app did not call instrument().
 */
import { trace } from '@opentelemetry/api';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader, type MetricData } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { generateText, stepCountIs, type ModelMessage } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { instrument } from '../../src/adapters/otel';
import { OVERFLOW_AT, setup, startScript, type Script } from '../helpers/ai-sdk-script';

function telemetry() {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const metrics = async (): Promise<Map<string, MetricData>> => {
    await reader.forceFlush();
    const out = new Map<string, MetricData>();
    for (const rm of metricExporter.getMetrics()) for (const sm of rm.scopeMetrics) for (const m of sm.metrics) out.set(m.descriptor.name, m);
    return out;
  };
  return {
    spans,
    tracer: tracerProvider.getTracer('test'),
    meter: meterProvider.getMeter('test'),
    metrics,
    shutdown: () => Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()]),
  };
}

const sum = (m: MetricData | undefined, match: (attrs: Record<string, unknown>) => boolean = () => true): number =>
  (m?.dataPoints ?? [])
    .filter((p) => match(p.attributes))
    .reduce((s, p) => s + (typeof p.value === 'number' ? p.value : (p.value as { count: number }).count), 0);

async function run(script: Script, compaction: ReturnType<typeof setup>['compaction'], tools: ReturnType<typeof setup>['tools']) {
  const messages: ModelMessage[] = [{ role: 'user', content: 'Read the service log, part by part.' }];
  return generateText({ model: compaction.model, system: 'You are a log analyst.', messages, tools, stopWhen: stepCountIs(40), maxRetries: 0 }).catch(
    (e: unknown) => e,
  );
}

describe('xcompact/otel', () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  it('spans for compactions, prunes and the overflow recovery; counters and histograms', async () => {
    const script = await startScript(OVERFLOW_AT);
    const t = telemetry();
    cleanups.push(() => script.server.close(), t.shutdown);
    // Prune tool results over 2,000 characters, so pressure prunes before it compacts.
    const { compaction, tools } = setup(script, {
      config: { headroomTokens: 2048, maxTokens: 1024, prune: { thresholdChars: 2000, headChars: 400, tailChars: 400 } },
    });
    const stop = instrument(compaction.engine, { tracer: t.tracer, meter: t.meter, attributes: { 'session.id': 'otel-1' } });
    const committed: Array<{ trigger: string; tokensBefore: number; tokensAfter: number }> = [];
    // Each prune's freed tokens (our tokenizer's) and the calibration ratio at that moment.
    const prunedAt: Array<{ freed: number; ratio: number }> = [];
    compaction.engine.on((e) => {
      if (e.type === 'compaction.committed') committed.push(e);
      if (e.type === 'pruned') prunedAt.push({ freed: e.tokensFreed, ratio: compaction.engine.measure().calibration.ratio });
    });
    await run(script, compaction, tools);
    stop();

    const spans = t.spans.getFinishedSpans();
    const named = (n: string): ReadableSpan[] => spans.filter((s) => s.name === n);
    const compactionSpans = named('xcompact.compaction');
    expect(compactionSpans.length).toBe(committed.length);
    expect(committed.length).toBeGreaterThanOrEqual(1);
    for (const [i, s] of compactionSpans.entries()) {
      expect(s.attributes).toMatchObject({
        'session.id': 'otel-1',
        'xcompact.trigger': committed[i]!.trigger,
        'xcompact.tokens.before': committed[i]!.tokensBefore,
        'xcompact.tokens.after': committed[i]!.tokensAfter,
        'xcompact.outcome': 'committed',
      });
      expect(s.attributes['xcompact.summary.cached_tokens']).toBeTypeOf('number');
      expect(s.attributes['xcompact.duration_ms']).toBeTypeOf('number');
    }
    const prunes = named('xcompact.prune');
    expect(prunes.length).toBeGreaterThanOrEqual(1);
    expect(prunes).toHaveLength(prunedAt.length);
    // The local server counts prompt tokens its own way, so the provider's tokens are not ours:
    // a figure in the wrong unit shows.
    expect(prunedAt.some((p) => p.ratio !== 1)).toBe(true);
    for (const [i, p] of prunes.entries()) {
      const { freed, ratio } = prunedAt[i]!;
      // Saved, before and after in one unit (the provider's, as the compaction spans' figures).
      expect(p.attributes['xcompact.tokens.saved']).toBe(Math.round(freed * ratio));
      expect(Number(p.attributes['xcompact.tokens.before']) - Number(p.attributes['xcompact.tokens.after'])).toBe(p.attributes['xcompact.tokens.saved']);
      expect(p.attributes['xcompact.prune.tokenizer_tokens_freed']).toBe(freed);
      expect(p.attributes['xcompact.calibration.ratio']).toBe(ratio);
    }
    const pruned = prunedAt.reduce((s, p) => s + Math.round(p.freed * p.ratio), 0);
    expect(pruned).toBeGreaterThan(0);

    const [recovery] = named('xcompact.overflow_recovery');
    expect(recovery).toBeDefined();
    expect(recovery!.attributes).toMatchObject({
      'xcompact.trigger': 'overflow',
      'xcompact.action': 'retry',
      'error.code': 'context-overflow',
      'http.response.status_code': 400,
    });
    expect(Number(recovery!.attributes['xcompact.tokens.before'])).toBeGreaterThan(Number(recovery!.attributes['xcompact.tokens.after']));

    const m = await t.metrics();
    expect(sum(m.get('xcompact.compactions'), (a) => a['xcompact.outcome'] === 'committed')).toBe(committed.length);
    const saved = committed.reduce((s, c) => s + c.tokensBefore - c.tokensAfter, 0) + pruned;
    expect(sum(m.get('xcompact.tokens_saved'))).toBe(saved);
    expect(sum(m.get('xcompact.overflow_recoveries'), (a) => a['xcompact.action'] === 'retry')).toBe(1);
    expect(sum(m.get('xcompact.wait.duration'), (a) => a['xcompact.call'] === 'afterStep')).toBeGreaterThanOrEqual(10);
    expect(sum(m.get('xcompact.compaction.duration'))).toBe(committed.length);

    // Stopped: later engine work records nothing.
    const before = t.spans.getFinishedSpans().length;
    await compaction.engine.compactNow();
    expect(t.spans.getFinishedSpans().length).toBe(before);
    await compaction.close();
  });

  it('a failed compaction: error status, the compaction error code and its cause', async () => {
    const script = await startScript(undefined, { kind: 'status', status: 500, body: { error: { message: 'summarizer down', type: 'server_error' } } });
    const t = telemetry();
    cleanups.push(() => script.server.close(), t.shutdown);
    const { compaction, tools } = setup(script);
    instrument(compaction.engine, { tracer: t.tracer, meter: t.meter });
    await run(script, compaction, tools);
    const failed = t.spans.getFinishedSpans().filter((s) => s.name === 'xcompact.compaction' && s.attributes['xcompact.outcome'] === 'failed');
    expect(failed.length).toBeGreaterThanOrEqual(1);
    expect(failed[0]!.status.code).toBe(2); // SpanStatusCode.ERROR
    expect(failed[0]!.attributes['error.code']).toBeTypeOf('string');
    expect(failed[0]!.attributes['xcompact.error.cause_code']).toBe('summary-request');
    const m = await t.metrics();
    expect(sum(m.get('xcompact.compactions'), (a) => a['xcompact.outcome'] === 'failed')).toBe(failed.length);
    await compaction.close();
  });

  it('no telemetry unless asked: a registered global provider sees nothing from an engine not instrumented', async () => {
    const script = await startScript(OVERFLOW_AT);
    const t = telemetry();
    const global = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(t.spans)] });
    trace.setGlobalTracerProvider(global);
    cleanups.push(
      () => script.server.close(),
      t.shutdown,
      async () => trace.disable(),
    );
    const { compaction, tools } = setup(script);
    let compactions = 0;
    compaction.engine.on((e) => {
      if (e.type === 'compaction.committed') compactions++;
    });
    await run(script, compaction, tools);
    expect(compactions).toBeGreaterThanOrEqual(1);
    expect(t.spans.getFinishedSpans().filter((s) => s.name.startsWith('xcompact.'))).toEqual([]);
    await compaction.close();
  });
});
