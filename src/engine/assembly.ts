/**
 * createCompactionMachine(): the engine chart with its services provided, for a host whose
 * agent loop is itself an XState machine. The host invokes (or spawns) it and talks to it in
 * events: it sends `step.completed`, `request.failed`, `compact.requested`, `cancel` and
 * `shutdown`; it receives each answer as a `request.settled` event (with the request's id) and
 * every notification (`compaction.*`, `pruned`, `overflow.silent`, `breaker.*`,
 * `capacity.missing`) both as emitted events and as events sent to it, its parent.
 */
import type { OpenAIClient } from '../services/overflow';
import { assign, createMachine, fromPromise } from 'xstate';
import { XcompactError } from '../errors';
import { answerBelowThreshold, DEFAULT_ENGINE_INPUT, engineContext, compactionMachine, type EngineInput } from '../machines/compaction';
import { backgroundMachine } from '../machines/background';
import { gateContext, gateMachine, type GateInput } from '../machines/gate';
import { manualMachine } from '../machines/manual';
import { fitMachine } from '../machines/fit';
import { overflowMachine } from '../machines/overflow';
import { pressureMachine, type MeasureInput } from '../machines/pressure';
import { transactionMachine, type TransactionActorInputs } from '../machines/transaction';
import type { ErrorInfo, PressureReading } from '../machines/types';
import type { Session } from '../session/session';
import { parseConfig, policyFor, tokenizerNameFor, type CompactionConfig, type CompactionConfigInput } from '../services/config';
import type { ServiceDeps } from '../services/core';
import type { UnclosedBracket } from '../services/transaction';
import { createEngineServices, type EngineServices } from './actors';
import { measurePressure } from '../services/pressure';
import { TokenMeter } from '../services/metering';
import type { ModelInfo } from '../services/config';
import { routePolicy, summaryTarget } from '../services/core';
import type { Summarizer } from '../services/summarizing';
import { ExtractiveSummarizer } from '../services/summarizing';
import { OpenAISummarizer } from '../services/summarizing';
import { CountPrefetch, ProvisionalPrices, type TokenizerName } from '../services/metering';
import { createRouteTokenizers } from '../services/core';
import type { SessionEvent } from '../session/events';

export interface CompactionMachineOptions {
  session: Session;
  /** Any OpenAI-compatible client. Without one (and without `summarizer`) summaries are extractive. */
  client?: OpenAIClient;
  /**
   * The model's server, when `client` is not an openai client (an `@anthropic-ai/sdk` client, an
   * AI SDK provider): with tokenizer 'server', its `/tokenize` is asked (the base URL without `/v1`).
   */
  server?: { baseURL: string; apiKey?: string | undefined };
  /** Model registry entries, merged over the built-ins and `config.models`. */
  models?: Record<string, Partial<ModelInfo>>;
  config?: CompactionConfigInput;
  summarizer?: Summarizer;
  /** Turn model-free pruning off without touching config (`config.prune.enabled` does the same). */
  pruner?: false;
  /** Force one tokenizer for every model. */
  tokenizer?: TokenizerName;
  /**
   * With tokenizer 'server': the longest a step waits for the server's counts (ms, default 300);
   * what is not counted by then is priced by the fallback tokenizer and counted again next step.
   */
  tokenizerDeadlineMs?: number;
  /** Clock for durations (ms). */
  now?: () => number;
  /** Wrap or replace the services the charts invoke; receives the defaults. */
  services?: (defaults: EngineServices) => Partial<EngineServices>;
  /**
   * Answer a step that is below the threshold from the root chart, with the default
   * measurement, without starting the pressure chart (no child actor: a step costs about one
   * measurement). Default: on, unless `services` replaces `measure` (its figure would not be
   * the one judged); false runs every step through the pressure chart.
   */
  quickCheck?: boolean;
}

/** The machine and what it was built over (the promise facade reads these). */
export interface BuiltCompactionMachine {
  machine: typeof compactionMachine;
  config: CompactionConfig;
  deps: ServiceDeps;
  /**
   * Fetches the counts an asynchronous tokenizer (`server`) lacks for what was appended since,
   * and has the meter price again what it priced with a stand-in: the engine awaits it before a step.
   */
  prefetch(signal?: AbortSignal): Promise<void>;
  /** The summarizer's own error of the latest transaction (a CompactionError's cause). */
  lastSummaryError(): unknown;
  /** Closing an abandoned compaction's bracket failed (the engine announces it as `compaction.unclosed`). */
  onUnclosed(listener: (u: UnclosedBracket) => void): () => void;
  dispose(): void;
}

/** `options.models` over `config.models`, field by field for a model named in both. */
function mergeModels(fromConfig: unknown, fromOptions: Record<string, Partial<ModelInfo>>): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...((fromConfig as Record<string, unknown> | undefined) ?? {}) };
  for (const [key, entry] of Object.entries(fromOptions)) {
    const base = merged[key];
    merged[key] = base && typeof base === 'object' ? { ...base, ...entry } : entry;
  }
  return merged;
}

const CHART_FAILED: ErrorInfo = { code: 'internal', message: 'the transaction chart failed; its compaction was abandoned' };
const STOPPED: ErrorInfo = { code: 'cancelled', message: 'the compaction engine was stopped while this compaction ran' };

export function buildCompactionMachine(options: CompactionMachineOptions): BuiltCompactionMachine {
  if (typeof options !== 'object' || options === null || typeof (options.session as { append?: unknown } | null | undefined)?.append !== 'function') {
    throw new XcompactError(
      'config',
      'createCompactionEngine / createCompactionMachine need options with a `session` (a Session from Session.open or Session.inMemory).',
    );
  }
  const { session } = options;
  const rawConfig = (options.config ?? {}) as Record<string, unknown>;
  const config = parseConfig(options.models ? { ...rawConfig, models: mergeModels(rawConfig.models, options.models) } : rawConfig);
  const tokenizerName = (provider: string | undefined, model: string | undefined): TokenizerName =>
    options.tokenizer ?? (provider && model ? tokenizerNameFor(config, provider, model) : (config.tokenizer ?? 'o200k_base'));
  const client = (options.client ?? options.server) as { baseURL?: unknown; apiKey?: unknown } | undefined;
  const routes = createRouteTokenizers({
    config,
    tokenizerName,
    baseURL: typeof client?.baseURL === 'string' ? client.baseURL : undefined,
    apiKey: typeof client?.apiKey === 'string' ? client.apiKey : undefined,
    ...(options.tokenizerDeadlineMs !== undefined ? { deadlineMs: options.tokenizerDeadlineMs } : {}),
  });
  const tokenizerOf = (header: SessionEvent<'request/header'> | undefined) => routes.tokenizerFor(header?.data.provider, header?.data.model);
  const provisional = new ProvisionalPrices();
  const meter = new TokenMeter(session, { tokenizerFor: tokenizerOf, provisional });
  const deps: ServiceDeps = { session, meter, config, now: options.now ?? Date.now, tokenizerName, tokenizerFor: routes.tokenizerFor };
  // Counts an asynchronous tokenizer (`server`) has to fetch before the meter prices a step.
  const counts = new CountPrefetch(session, provisional, tokenizerOf);
  const prefetch = async (signal?: AbortSignal): Promise<void> => {
    try {
      if (await counts.run(signal)) meter.refreshPrices();
    } catch {
      // Never a step's failure: what was not counted is priced by the fallback, as when the server is down.
    }
  };
  const summarizer: Summarizer = options.summarizer ?? (options.client ? new OpenAISummarizer({ client: options.client }) : new ExtractiveSummarizer());
  const built = createEngineServices(deps, summarizer);
  const defaults = built.services;
  const services: EngineServices = { ...defaults, ...(options.services?.(defaults) ?? {}) };

  // Each service becomes an invoked actor; sync services run inside the promise so a throw is an error event.
  type In<K extends keyof TransactionActorInputs> = TransactionActorInputs[K];
  const act = <I, O>(fn: (input: I) => O | PromiseLike<O>) => fromPromise<O, I>(async ({ input }) => fn(input));
  const txActors = {
    validateSpan: act((i: In<'validateSpan'>) => services.validateSpan(i)),
    openBracket: act((i: In<'openBracket'>) => services.openBracket(i)),
    summarize: fromPromise(({ input, signal }: { input: In<'summarize'>; signal: AbortSignal }) => services.summarize(input, signal)),
    truncate: act((i: In<'truncate'>) => services.truncate(i)),
    revalidate: act((i: In<'revalidate'>) => services.revalidate(i)),
    commit: act((i: In<'commit'>) => services.commit(i)),
    flush: act((i: In<'flush'>) => services.flush(i)),
    closeWithError: act((i: In<'closeWithError'>) => services.closeWithError(i)),
  };
  // The summary's overall deadline: the summary target's policy (a chunked summary's every request counts).
  const summaryDeadline = (): number => {
    try {
      const target = summaryTarget(deps);
      return policyFor(config, target.provider, target.model).summaryTimeoutMs;
    } catch {
      return config.summaryTimeoutMs;
    }
  };
  const transaction = transactionMachine.provide({ actors: txActors, delays: { summaryDeadline } });
  // A transaction chart that failed (a bug, not a service failure) cannot close its own bracket:
  // its parent chart decides to release the lock, and this does the work.
  const closeAbandoned = { 'close abandoned bracket': () => void built.brackets.closeAbandoned(CHART_FAILED) };
  // A reading the gate already took for this step is decided on as it is: one measurement per step.
  const measure = act((i: MeasureInput) => i.given ?? services.measure({ phase: i.phase }));
  const prune = act((i: Parameters<EngineServices['prune']>[0]) => services.prune(i));
  const selectRange = act((i: Parameters<EngineServices['selectRange']>[0]) => services.selectRange(i));
  const probeLock = act((i: { purpose: 'admit' | 'decide' }) => services.probeLock(i));
  const pressure = pressureMachine.provide({ actors: { measure, prune, selectRange, transaction }, actions: closeAbandoned });
  const overflow = overflowMachine.provide({
    actors: { classify: act((i: { error: unknown }) => services.classify(i)), probeLock, prune, selectRange, transaction },
    actions: closeAbandoned,
  });
  const manual = manualMachine.provide({
    actors: { checkAdmission: act((i: { purpose: 'manual' }) => services.checkAdmission(i)), selectRange, transaction },
    actions: closeAbandoned,
  });
  const fit = fitMachine.provide({
    actors: { measure: act(() => services.measureWindow()), cut: act((i: { need: number }) => services.cut(i)) },
  });
  // Background compaction (docs/spec.md#13-background-compaction), if any route has it: each job passes the gate first.
  const background = config.background || config.modelPolicies.some((p) => p.background);
  const gated = gateMachine.provide({ actors: { measure, pressure, overflow, manual } });
  const gateFor = <K extends GateInput['kind']>(kind: K) =>
    createMachine(
      {
        ...gated.config,
        context: ({ input }: { input: Extract<GateInput, { kind: K }>['job'] }) => gateContext({ kind, job: input } as GateInput),
      } as typeof gated.config,
      gated.implementations as never,
    ) as unknown as typeof gateMachine;
  const backgroundChart = backgroundMachine.provide({
    actors: { selectRange, ...txActors },
    delays: { summaryDeadline },
  });
  const jobs = background
    ? { pressure: gateFor('pressure'), overflow: gateFor('overflow'), manual: gateFor('manual'), fit, background: backgroundChart }
    : { pressure, overflow, manual, fit };
  // The reading the quick guard judged, reported by the answer of the same transition.
  let quickReading: PressureReading | undefined;
  // With background on too: the root chart's 'background is idle' guard (engine.ts) lets this
  // answer only when no summary is in flight and no ended run waits to be reported, and the
  // limit below is the prepare point, so a step the gate would start preparing still goes to it.
  const quickCheck = options.quickCheck ?? services.measure === defaults.measure;
  const belowQuickly = (silentSeenSeq: number): boolean => {
    quickReading = undefined;
    if (!quickCheck) return false;
    try {
      if (!routePolicy(deps).auto) return false;
      const r = measurePressure(deps);
      if (r.kind !== 'reading') return false;
      const silent = r.reading.silentOverflow;
      // The route's prepare point when it has background compaction (at most the threshold), else the threshold.
      const limit = r.reading.prepareAt ?? r.reading.threshold;
      if ((silent !== undefined && silent.seq > silentSeenSeq) || !(r.reading.totalTokens < limit)) return false;
      // Below the threshold, but the cost model says compacting now pays: the charts decide (the
      // background chart prepares it when the route has background compaction, else the pressure chart compacts).
      if (r.reading.economics?.compaction?.pays === true) return false;
      // Or pruning now pays (and pruning is on for this engine): the pressure chart prunes early.
      if (r.reading.economics?.prune?.pays === true && options.pruner !== false && config.prune.enabled) return false;
      quickReading = r.reading;
      return true;
    } catch {
      // A measurement that throws is the pressure chart's to report (its measure fails).
      return false;
    }
  };
  const provided = compactionMachine.provide({
    actors: jobs as never,
    guards: { 'pressure is below the threshold': ({ context }) => belowQuickly(context.silentSeenSeq) },
    actions: {
      'answer below the threshold': answerBelowThreshold(() => quickReading),
      'look up route policy': assign({ policy: () => routePolicy(deps) }),
      'close abandoned bracket': () => void built.brackets.closeAbandoned(STOPPED),
    },
  });
  const input: EngineInput = {
    ...DEFAULT_ENGINE_INPUT,
    auto: config.auto,
    pruneEnabled: options.pruner !== false && config.prune.enabled,
    maxAttempts: 1 + config.compactionRetries,
    maxOverflowRetries: config.maxOverflowRetries,
    background,
    failureLimit: config.circuitBreaker.failureLimit,
    cooldownMs: config.circuitBreaker.cooldownMs,
    truncationFallback: config.truncationFallback,
  };
  // The same chart with this config baked in: a host invokes it without input.
  const machine = createMachine(
    { ...provided.config, context: () => engineContext(input) } as typeof provided.config,
    provided.implementations as never,
  ) as unknown as typeof compactionMachine;
  return {
    machine,
    config,
    deps,
    prefetch,
    lastSummaryError: built.lastSummaryError,
    onUnclosed: (listener) => built.brackets.onUnclosed(listener),
    dispose: () => built.brackets.dispose(),
  };
}

/**
 * The engine chart with its services provided over `options.session`: invoke or spawn it from
 * a host machine (see the header, and examples/xstate-agent.ts).
 */
export function createCompactionMachine(options: CompactionMachineOptions): typeof compactionMachine {
  return buildCompactionMachine(options).machine;
}
