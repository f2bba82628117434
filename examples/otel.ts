/**
 * xcompact/otel on the AI SDK example: spans and metrics of every compaction, prune and
 * overflow recovery, printed from the OpenTelemetry SDK at the end.
 *
 *   npx tsx examples/otel.ts
 *
 * In production, register your exporter (OTLP, …) with the SDK instead of the in-memory ones.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
// In your application: from 'xcompact', 'xcompact/otel' and 'xcompact/testing'.
import { Session } from '../src/index';
import { instrument } from '../src/adapters/otel';
import { startOpenAIServer } from '../src/testing/index';
import { generateSandbox, runExample, scriptedReader } from './ai-sdk';

export async function main(log: (line: string) => void = console.log): Promise<void> {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 60_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });

  const dir = await mkdtemp(join(tmpdir(), 'xcompact-otel-'));
  const prompts = ['Where are HTTP retries decided? Read every file first.'];
  const server = await startOpenAIServer({ scenarios: scriptedReader(await generateSandbox(dir, 12), prompts), defaultModel: 'scripted' });
  try {
    await runExample({
      baseURL: server.baseURL,
      model: 'scripted',
      contextWindow: 16_384,
      session: Session.inMemory(),
      sandbox: dir,
      prompts,
      // No telemetry unless asked: this line is the whole integration.
      onCompaction: (c) => instrument(c.engine, { tracer: tracerProvider.getTracer('my-agent'), meter: meterProvider.getMeter('my-agent') }),
    });
  } finally {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  }
  for (const s of spans.getFinishedSpans()) log(`span ${s.name} ${JSON.stringify(s.attributes)}`);
  await reader.forceFlush();
  for (const rm of metricExporter.getMetrics()) {
    for (const sm of rm.scopeMetrics) {
      for (const m of sm.metrics) {
        const total = m.dataPoints.reduce((sum, p) => sum + (typeof p.value === 'number' ? p.value : (p.value as { count: number }).count), 0);
        log(`metric ${m.descriptor.name} ${total}`);
      }
    }
  }
  await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()]);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((err: unknown) => {
    console.error(`otel example: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  });
}
