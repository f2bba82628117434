/**
 * `xcompact/otel`: OpenTelemetry spans and metrics for one compaction engine, through
 * `@opentelemetry/api` only (the app brings its SDK and exporters). Nothing is recorded
 * unless the app calls {@link instrument}; it listens to `engine.on` notifications and times
 * the three calls an agent loop waits on.
 *
 * Spans: `xcompact.compaction` (started → committed/failed), `xcompact.prune`,
 * `xcompact.overflow_recovery` (a request error the engine classified as a context overflow).
 * Metrics: `xcompact.compactions`, `xcompact.prunes`, `xcompact.overflow_recoveries`,
 * `xcompact.tokens_saved` (counters), `xcompact.compaction.duration`, `xcompact.wait.duration`
 * (histograms, ms).
 */
import { metrics, SpanStatusCode, trace, type Attributes, type Meter, type Span, type Tracer } from '@opentelemetry/api';
import type { CompactionEngine, EngineNotification } from '../engine/facade';

export interface InstrumentOptions {
  /** Default: `trace.getTracer('xcompact')` (the app's registered provider). */
  tracer?: Tracer;
  /** Default: `metrics.getMeter('xcompact')`. */
  meter?: Meter;
  /** Added to every span and data point (e.g. `{ 'session.id': id }`). */
  attributes?: Attributes;
  now?: () => number;
}

export const ATTR = {
  trigger: 'xcompact.trigger',
  tokensBefore: 'xcompact.tokens.before',
  tokensAfter: 'xcompact.tokens.after',
  tokensSaved: 'xcompact.tokens.saved',
  spanTokens: 'xcompact.span.tokens',
  nodes: 'xcompact.span.nodes',
  checkpointTokens: 'xcompact.checkpoint.tokens',
  durationMs: 'xcompact.duration_ms',
  cachedTokens: 'xcompact.summary.cached_tokens',
  summaryPromptTokens: 'xcompact.summary.prompt_tokens',
  summaryRequests: 'xcompact.summary.requests',
  summaryModel: 'xcompact.summary.model',
  prunedCount: 'xcompact.prune.count',
  /** A prune's freed tokens as xcompact's tokenizer priced them (before calibration). */
  tokenizerTokensFreed: 'xcompact.prune.tokenizer_tokens_freed',
  /** Provider tokens per tokenizer token for the route (what converts the figure above). */
  calibrationRatio: 'xcompact.calibration.ratio',
  outcome: 'xcompact.outcome',
  action: 'xcompact.action',
  reason: 'xcompact.reason',
  call: 'xcompact.call',
  errorCode: 'error.code',
  causeCode: 'xcompact.error.cause_code',
  status: 'http.response.status_code',
  overflowMatch: 'xcompact.overflow.match',
} as const;

type Waited = 'afterStep' | 'onRequestError' | 'compactNow';

/** Starts recording; returns a function that stops it (listeners removed, calls unwrapped). */
export function instrument(engine: CompactionEngine, options: InstrumentOptions = {}): () => void {
  const tracer = options.tracer ?? trace.getTracer('xcompact');
  const meter = options.meter ?? metrics.getMeter('xcompact');
  const base = options.attributes ?? {};
  const now = options.now ?? Date.now;
  const with_ = (a: Attributes): Attributes => ({ ...base, ...a });

  const compactions = meter.createCounter('xcompact.compactions', { description: 'Compactions by trigger and outcome (committed, failed, skipped)' });
  const prunes = meter.createCounter('xcompact.prunes', { description: 'Tool results pruned (model-free), by trigger' });
  const recoveries = meter.createCounter('xcompact.overflow_recoveries', { description: 'Context-overflow errors handled, by action (retry, fail)' });
  const saved = meter.createCounter('xcompact.tokens_saved', { description: 'Prompt tokens removed from the conversation', unit: '{token}' });
  const duration = meter.createHistogram('xcompact.compaction.duration', { description: 'Compaction duration', unit: 'ms' });
  const waits = meter.createHistogram('xcompact.wait.duration', { description: 'Time the agent loop waited on the engine', unit: 'ms' });

  let open: Span | undefined;
  const onEvent = (e: EngineNotification): void => {
    switch (e.type) {
      case 'compaction.started':
        open?.end();
        open = tracer.startSpan('xcompact.compaction', {
          attributes: with_({ [ATTR.trigger]: e.trigger, [ATTR.tokensBefore]: e.tokensBefore, [ATTR.spanTokens]: e.spanTokens, [ATTR.nodes]: e.nodes }),
        });
        return;
      case 'compaction.committed': {
        const span = open ?? tracer.startSpan('xcompact.compaction', { attributes: with_({ [ATTR.trigger]: e.trigger, [ATTR.tokensBefore]: e.tokensBefore }) });
        open = undefined;
        const usage = e.summarizer.usage;
        span.setAttributes({
          // The request right before the commit: a background summary commits long after its span opened.
          [ATTR.tokensBefore]: e.tokensBefore,
          [ATTR.tokensAfter]: e.tokensAfter,
          [ATTR.tokensSaved]: e.tokensBefore - e.tokensAfter,
          [ATTR.checkpointTokens]: e.checkpointTokens,
          [ATTR.durationMs]: e.durationMs,
          [ATTR.summaryRequests]: e.summarizer.requests,
          [ATTR.outcome]: 'committed',
          ...(usage ? { [ATTR.cachedTokens]: usage.cachedTokens ?? 0, [ATTR.summaryPromptTokens]: usage.promptTokens } : {}),
          ...(e.summarizer.model ? { [ATTR.summaryModel]: e.summarizer.model } : {}),
        });
        span.setStatus({ code: SpanStatusCode.OK });
        span.end();
        compactions.add(1, with_({ [ATTR.trigger]: e.trigger, [ATTR.outcome]: 'committed' }));
        saved.add(Math.max(0, e.tokensBefore - e.tokensAfter), with_({ [ATTR.trigger]: e.trigger, kind: 'compaction' }));
        duration.record(e.durationMs, with_({ [ATTR.trigger]: e.trigger, [ATTR.outcome]: 'committed' }));
        return;
      }
      case 'compaction.failed': {
        const span = open ?? tracer.startSpan('xcompact.compaction', { attributes: with_({ [ATTR.trigger]: e.trigger }) });
        open = undefined;
        span.setAttributes({
          [ATTR.errorCode]: e.error.code,
          [ATTR.durationMs]: e.durationMs,
          [ATTR.outcome]: 'failed',
          ...(e.error.causeCode ? { [ATTR.causeCode]: e.error.causeCode } : {}),
        });
        span.recordException(e.error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: e.error.message });
        span.end();
        compactions.add(1, with_({ [ATTR.trigger]: e.trigger, [ATTR.outcome]: 'failed', [ATTR.errorCode]: e.error.code }));
        duration.record(e.durationMs, with_({ [ATTR.trigger]: e.trigger, [ATTR.outcome]: 'failed' }));
        return;
      }
      case 'compaction.skipped':
        compactions.add(1, with_({ [ATTR.trigger]: e.trigger, [ATTR.outcome]: 'skipped' }));
        return;
      case 'pruned': {
        // `tokensFreed` is priced with our tokenizer; the totals (and a compaction's before and
        // after) are the provider's tokens: the freed figure goes through the same calibration
        // ratio as the rest of the estimate, so before − after = saved and the counter adds
        // one unit across kinds. The tokenizer's own figure stays, named for its unit.
        const m = engine.measure();
        const after = m.totalTokens;
        const freed = Math.round(e.tokensFreed * m.calibration.ratio);
        const span = tracer.startSpan('xcompact.prune', {
          attributes: with_({
            [ATTR.trigger]: e.trigger,
            [ATTR.prunedCount]: e.count,
            [ATTR.tokensBefore]: after + freed,
            [ATTR.tokensAfter]: after,
            [ATTR.tokensSaved]: freed,
            [ATTR.tokenizerTokensFreed]: e.tokensFreed,
            [ATTR.calibrationRatio]: m.calibration.ratio,
          }),
        });
        span.end();
        prunes.add(e.count, with_({ [ATTR.trigger]: e.trigger }));
        saved.add(freed, with_({ [ATTR.trigger]: e.trigger, kind: 'prune' }));
        return;
      }
      default:
        return;
    }
  };
  const unsubscribe = engine.on(onEvent);

  // The calls a loop waits on, timed; an overflow recovery becomes a span over its whole call.
  const originals = { afterStep: engine.afterStep, onRequestError: engine.onRequestError, compactNow: engine.compactNow };
  const timed =
    <A extends unknown[], R>(call: Waited, fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const t0 = now();
      try {
        return await fn.apply(engine, args);
      } finally {
        waits.record(now() - t0, with_({ [ATTR.call]: call }));
      }
    };
  const target = engine as { -readonly [K in keyof CompactionEngine]: CompactionEngine[K] };
  target.afterStep = timed('afterStep', originals.afterStep);
  target.compactNow = timed('compactNow', originals.compactNow);
  target.onRequestError = timed('onRequestError', async (error: unknown, opts?: { signal?: AbortSignal }) => {
    const startTime = now();
    const before = engine.measure().totalTokens;
    const action = await originals.onRequestError.call(engine, error, opts);
    const classification = action.classification;
    if (classification?.kind !== 'context-overflow') return action;
    const after = engine.measure().totalTokens;
    const span = tracer.startSpan('xcompact.overflow_recovery', {
      startTime,
      attributes: with_({
        [ATTR.trigger]: 'overflow',
        [ATTR.action]: action.kind,
        [ATTR.tokensBefore]: before,
        [ATTR.tokensAfter]: after,
        [ATTR.durationMs]: now() - startTime,
        [ATTR.errorCode]: 'context-overflow',
        ...(classification.provider ? { [ATTR.overflowMatch]: classification.provider } : {}),
        ...(classification.status !== undefined ? { [ATTR.status]: classification.status } : {}),
        ...(action.kind === 'fail' ? { [ATTR.reason]: action.reason } : {}),
      }),
    });
    span.setStatus(
      action.kind === 'retry'
        ? { code: SpanStatusCode.OK }
        : { code: SpanStatusCode.ERROR, message: `not recovered: ${action.kind === 'fail' ? action.reason : ''}` },
    );
    span.end();
    recoveries.add(1, with_({ [ATTR.action]: action.kind }));
    return action;
  });

  return () => {
    unsubscribe();
    open?.end();
    open = undefined;
    Object.assign(target, originals);
  };
}
