/**
 * createCompactionEngine(): the facade an agent loop calls.
 *
 * It builds the services (meter, pruner, summarizer, range selection), hands them to the
 * charts as invoked actors and runs the root engine actor. The facade never decides
 * anything about the lifecycle: it turns calls into events, and events' results back into
 * promises. What happens in between is in src/machines/.
 */
import type { OpenAIClient } from './services/openai-client';
import { createActor, fromPromise, type Actor, type InspectionEvent, type Observer } from 'xstate';
import { XcompactError } from './errors';
import { engineMachine, type EngineEmitted, type EngineRequest, type SettledResult } from './machines/engine';
import { manualMachine } from './machines/manual';
import { overflowMachine, type DeclineReason } from './machines/overflow';
import { pressureMachine, type PressureOutput, type PressureStatus } from './machines/pressure';
import { transactionMachine, type TransactionActorInputs } from './machines/transaction';
import type {
  CommitRecord,
  CompactionErrorCode,
  ErrorInfo,
  LockProbe,
  PressureReading,
  PruneInput,
  PruneSummary,
  ReadingResult,
  SelectInput,
  SpanCheck,
  SummaryOutcome,
  TransactionOutput,
  Trigger,
  Verdict,
} from './machines/types';
import { COMPACTION_CHECKPOINT_SOURCE, type SurfaceEvent } from './session/events';
import type { Session } from './session/session';
import { frameCheckpoint } from './services/checkpoint';
import {
  BudgetError,
  modelInfoFor,
  parseConfig,
  policyFor,
  resolveBudget,
  tokenizerNameFor,
  type CompactionConfig,
  type CompactionConfigInput,
  type ResolvedBudget,
} from './services/config';
import { TokenMeter, type Measurement } from './services/meter';
import type { ModelInfo } from './services/models';
import { classifyRequestError, isSilentOverflow, type RequestErrorClass } from './services/overflow';
import { applyPrune, planPrune, type PruneSettings } from './services/pruner';
import { headPosition, selectRange, type RangeSelection } from './services/range';
import { SummarizerError, type Summarizer, type SummaryRequest } from './services/summarizer';
import { ExtractiveSummarizer } from './services/summarizers/extractive';
import { OpenAISummarizer } from './services/summarizers/openai';
import { getTokenizer, type TokenizerName } from './services/tokenizer';

/**
 * The work the charts invoke, one function per invoked actor. `createCompactionEngine`
 * builds them over the session; the `services` option can wrap or replace any of them
 * (tests drive every chart transition this way, a host can plug in its own range policy).
 */
export interface EngineServices {
  measure(input: { phase: 'initial' | 'after-prune' | 'after-compaction' }): ReadingResult;
  prune(input: PruneInput): PruneSummary;
  selectRange(input: SelectInput): RangeSelection | null;
  validateSpan(input: TransactionActorInputs['validateSpan']): SpanCheck;
  openBracket(input: TransactionActorInputs['openBracket']): { startSeq: number };
  summarize(input: TransactionActorInputs['summarize'], signal: AbortSignal): Promise<SummaryOutcome>;
  revalidate(input: TransactionActorInputs['revalidate']): Verdict;
  commit(input: TransactionActorInputs['commit']): CommitRecord;
  flush(input: TransactionActorInputs['flush']): Promise<void>;
  closeWithError(input: TransactionActorInputs['closeWithError']): Promise<void>;
  classify(input: { error: unknown }): RequestErrorClass;
  probeLock(input: { purpose: 'admit' | 'decide' }): LockProbe;
  checkAdmission(input: { purpose: 'manual' }): { openTurn: number | null; lockHeld: boolean };
}

/** A failed compaction, with the stable code of SPEC §9. */
export class CompactionError extends XcompactError {
  declare readonly code: CompactionErrorCode;
  /** The underlying service error's code, e.g. 'summary-truncated'. */
  readonly causeCode: string | undefined;

  /** `cause` is the service error behind it (a SummarizerError, with the SDK error inside), when known. */
  constructor(info: ErrorInfo, cause?: unknown) {
    super(info.code, info.message, cause === undefined ? undefined : { cause });
    this.causeCode = info.cause;
  }
}

export interface CompactionEngineOptions {
  session: Session;
  /**
   * An `openai` SDK client (version 6 or 7) for any OpenAI-compatible endpoint. Without one (and
   * without `summarizer`) summaries are extractive.
   */
  client?: OpenAIClient;
  /** Model registry entries, merged over the built-ins and `config.models`. */
  models?: Record<string, Partial<ModelInfo>>;
  config?: CompactionConfigInput;
  summarizer?: Summarizer;
  /** Turn model-free pruning off without touching config (`config.prune.enabled` does the same). */
  pruner?: false;
  /** Force one tokenizer for every model. */
  tokenizer?: TokenizerName;
  /** Passed to the root actor: `@statelyai/inspect`'s `inspect`, or any inspection observer. */
  inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /** Clock for durations (ms). */
  now?: () => number;
  /** Wrap or replace the services the charts invoke; receives the defaults. */
  services?: (defaults: EngineServices) => Partial<EngineServices>;
  /** XState clock for the breaker's cool-down timer (tests pass a SimulatedClock). */
  clock?: { setTimeout(fn: (...args: unknown[]) => void, timeout: number): unknown; clearTimeout(id: unknown): void };
}

export interface CompactionRecord {
  trigger: Trigger;
  checkpointSeq: number;
  /** Surface nodes the checkpoint replaced. */
  shadowedNodes: number;
  spanTokens: number;
  checkpointTokens: number;
  tokensBefore: number;
  tokensAfter: number;
  durationMs: number;
  summary: string;
  summarizer: { provider?: string; model?: string; requests: number; usage?: SummaryOutcome['usage'] };
}

export interface AfterStepResult {
  status: PressureStatus | 'auto-off' | 'paused' | 'busy';
  before: PressureReading | undefined;
  after: PressureReading | undefined;
  pruned: PruneSummary | undefined;
  compactions: CompactionRecord[];
  error: CompactionError | undefined;
}

export type RequestErrorAction =
  | { kind: 'retry'; classification: RequestErrorClass }
  | { kind: 'fail'; error: unknown; reason: DeclineReason | 'busy'; classification: RequestErrorClass | undefined };

export type EngineNotification =
  | { type: 'compaction.started'; trigger: Trigger; startSeq: number; nodes: number; spanTokens: number; tokensBefore: number }
  | ({ type: 'compaction.committed' } & CompactionRecord)
  | { type: 'compaction.failed'; trigger: Trigger; error: CompactionError; durationMs: number }
  | { type: 'compaction.skipped'; trigger: Trigger; reason: string }
  | { type: 'pruned'; trigger: Trigger; count: number; tokensFreed: number }
  /** The provider reported a prompt larger than the window: it truncated the request silently (llama.cpp, Ollama). */
  | { type: 'overflow.silent'; seq: number; promptTokens: number; contextWindow: number }
  | EngineEmitted;

type Listener = (event: EngineNotification) => void;

export interface CompactionEngine {
  /** Run after a step's facts are durable, before `step/end` (also mid tool loop). Never throws for a failed compaction. */
  afterStep(options?: { signal?: AbortSignal }): Promise<AfterStepResult>;
  /** Call with a request's error: `retry` means the surface now fits better and the request should be rebuilt and sent again. */
  onRequestError(error: unknown, options?: { signal?: AbortSignal }): Promise<RequestErrorAction>;
  /** Manual `/compact`: only between turns. Resolves null when there is nothing to compact; throws CompactionError. */
  compactNow(options?: { signal?: AbortSignal; focus?: string }): Promise<CompactionRecord | null>;
  /** Current pressure figures. */
  measure(): Measurement & { threshold: number | undefined; contextWindow: number | undefined };
  /** Subscribe to what the engine does; returns an unsubscribe function. */
  on(listener: Listener): () => void;
  readonly config: CompactionConfig;
  readonly actor: Actor<typeof engineMachine>;
  /**
   * A graceful stop: a running compaction is cancelled (its summary request aborted) and its
   * bracket closed with `compaction/end {cancelled}`; pending calls reject with
   * `engine-stopped`. (Stopping `engine.actor` directly is what a dying process does: the
   * orphan lock stays until `session.recover()`.)
   */
  stop(): void;
}

const STACK_MAX_CHECKPOINTS = 4;
/** Summary output cap when neither the config nor a resolvable budget gives one. */
const FALLBACK_SUMMARY_MAX_TOKENS = 8192;

/** `options.models` over `config.models`, field by field for a model named in both. */
function mergeModels(fromConfig: unknown, fromOptions: Record<string, Partial<ModelInfo>>): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...((fromConfig as Record<string, unknown> | undefined) ?? {}) };
  for (const [key, entry] of Object.entries(fromOptions)) {
    const base = merged[key];
    merged[key] = base && typeof base === 'object' ? { ...(base as object), ...entry } : entry;
  }
  return merged;
}

export function createCompactionEngine(options: CompactionEngineOptions): CompactionEngine {
  const { session } = options;
  const rawConfig = (options.config ?? {}) as Record<string, unknown>;
  const config = parseConfig(options.models ? { ...rawConfig, models: mergeModels(rawConfig.models, options.models) } : rawConfig);
  const now = options.now ?? Date.now;
  const pruneEnabled = options.pruner !== false && config.prune.enabled;
  const summarizer: Summarizer =
    options.summarizer ?? (options.client ? new OpenAISummarizer({ client: options.client }) : new ExtractiveSummarizer());

  const tokenizerName = (provider: string | undefined, model: string | undefined): TokenizerName =>
    options.tokenizer ?? (provider && model ? tokenizerNameFor(config, provider, model) : (config.tokenizer ?? 'o200k_base'));
  const meter = new TokenMeter(session, {
    tokenizerFor: (header) => getTokenizer(tokenizerName(header?.data.provider, header?.data.model)),
  });

  const listeners = new Set<Listener>();
  const notify = (event: EngineNotification) => {
    for (const l of listeners) {
      try {
        l(event);
      } catch (err) {
        console.error('xcompact: an engine listener threw', err);
      }
    }
  };

  // ---------------------------------------------------------------------------
  // Services the charts invoke. Each does one piece of work and returns plain data.

  const budgetFor = (): ResolvedBudget => {
    const header = session.latestHeader;
    if (!header) throw new XcompactError('unrouted', 'no request has been recorded yet (no request/header)');
    const { provider, model, maxTokens } = header.data;
    const info = modelInfoFor(config, provider, model);
    return resolveBudget({
      config,
      provider,
      model,
      contextWindow: info?.contextWindow,
      ...(maxTokens !== undefined ? { requestMaxTokens: maxTokens } : {}),
      ...(info?.maxOutputTokens !== undefined ? { modelMaxOutputTokens: info.maxOutputTokens } : {}),
    });
  };

  let silentReported = -1;
  const measureService = (): ReadingResult => {
    const header = session.latestHeader;
    if (!header) return { kind: 'unrouted' };
    const { provider, model } = header.data;
    let budget: ResolvedBudget;
    try {
      budget = budgetFor();
    } catch (err) {
      if (err instanceof BudgetError) return { kind: 'misconfigured', provider, model, code: err.code, message: err.message };
      throw err;
    }
    const m = meter.measure();
    const usage = session.latestUsage;
    if (usage && usage.seq !== silentReported && isSilentOverflow(usage.data.usage!, budget.window)) {
      silentReported = usage.seq;
      notify({ type: 'overflow.silent', seq: usage.seq, promptTokens: usage.data.usage!.promptTokens, contextWindow: budget.window });
    }
    return {
      kind: 'reading',
      reading: { provider, model, totalTokens: m.totalTokens, threshold: budget.threshold, retainTokens: budget.retain, contextWindow: budget.window },
    };
  };

  const pruneService = ({ trigger, protectRecent }: PruneInput): PruneSummary => {
    let protectRecentTokens = 0;
    let minReclaimTokens = 0;
    if (protectRecent) {
      const b = budgetFor();
      protectRecentTokens = b.protectRecentTokens;
      minReclaimTokens = b.minReclaimTokens;
    }
    const settings: PruneSettings = {
      thresholdChars: config.prune.thresholdChars,
      headChars: config.prune.headChars,
      tailChars: config.prune.tailChars,
      neverPrune: config.prune.neverPrune,
      protectRecentTokens,
      minReclaimTokens,
    };
    const plan = planPrune(session, settings, { priceOf: (seq) => meter.priceOf(seq), priceEvent: (e) => meter.priceEvent(e) });
    const result = applyPrune(session, plan);
    if (result.pruned.length > 0) notify({ type: 'pruned', trigger, count: result.pruned.length, tokensFreed: result.tokensFreed });
    return { count: result.pruned.length, tokensFreed: result.tokensFreed, generation: session.surface.replaceGeneration };
  };

  const selectService = ({ retain, stackCheckpoints }: SelectInput): RangeSelection | null => {
    const prices = meter.measure().prices;
    // A span must cost at least twice an empty checkpoint, or no summary can shrink it.
    const minSpanTokens = 2 * meter.priceUserText(frameCheckpoint(''));
    const retainTokens = retain === 'budget' ? budgetFor().retain : 0;
    return selectRange(session, prices, {
      retainTokens,
      minSpanTokens,
      ...(stackCheckpoints ? { stack: { maxCheckpoints: STACK_MAX_CHECKPOINTS, maxTokens: Math.floor(retainTokens / 2) } } : {}),
    });
  };

  const spanIntact = (range: RangeSelection): boolean => {
    const s = session.surface;
    const startPos = s.positionOf(range.start);
    if (startPos === undefined) return false;
    for (let i = 0; i < range.shadowed.length; i++) {
      if (s.positionOf(range.shadowed[i]!) !== startPos + i) return false;
    }
    return true;
  };

  const summaryTarget = (): { provider: string; model: string } => {
    if (config.summarizationProvider && config.summarizationModel) {
      return { provider: config.summarizationProvider, model: config.summarizationModel };
    }
    const header = session.latestHeader;
    if (!header) {
      throw new CompactionError({
        code: 'summary',
        message: 'no summarization model: set summarizationProvider and summarizationModel, or record a request first',
      });
    }
    return { provider: header.data.provider, model: header.data.model };
  };

  const buildSummaryRequest = (range: RangeSelection, focus: string | undefined): SummaryRequest => {
    const target = summaryTarget();
    const s = session.surface;
    const system = range.contextPos === 1 ? session.messageAt(0) : undefined;
    const context = [];
    for (let p = range.contextPos; p < range.startPos; p++) context.push(session.messageAt(p));
    const messages = [];
    const events: SurfaceEvent[] = [];
    for (let p = range.startPos; p <= range.endPos; p++) {
      messages.push(session.messageAt(p));
      events.push(session.event(s.seqAt(p)) as SurfaceEvent);
    }
    const targetInfo = modelInfoFor(config, target.provider, target.model);
    let maxTokens: number;
    try {
      maxTokens = budgetFor().maxTokens;
    } catch {
      // No resolvable budget (overflow recovery without capacity): an explicit cap, else a modest one.
      maxTokens = policyFor(config, target.provider, target.model).maxTokens ?? FALLBACK_SUMMARY_MAX_TOKENS;
    }
    // Never ask for more output than the summarizer model gives: providers reject such requests.
    if (targetInfo?.maxOutputTokens !== undefined) maxTokens = Math.min(maxTokens, targetInfo.maxOutputTokens);
    const targetTokenizer = getTokenizer(tokenizerName(target.provider, target.model));
    const request: SummaryRequest = {
      system,
      tools: session.latestHeader?.data.tools ?? [],
      context,
      messages,
      events,
      target,
      maxTokens,
      countTokens: (text) => targetTokenizer.count(text),
    };
    if (focus !== undefined) request.focus = focus;
    if (targetInfo?.contextWindow !== undefined) request.contextWindow = targetInfo.contextWindow;
    if (targetInfo?.outputCapField !== undefined) request.outputCapField = targetInfo.outputCapField;
    return request;
  };

  const started = new Map<number, { at: number; tokensBefore: number }>();
  // The summarizer's own error of the running transaction: charts keep plain data, the facade
  // hands the real error (with the SDK error inside) to the caller as the CompactionError's cause.
  let lastSummaryError: unknown;
  const compactionError = (info: ErrorInfo): CompactionError => {
    // Only the error this failure came from: its code is the one the chart recorded.
    const code = (lastSummaryError as { code?: unknown } | undefined)?.code;
    return new CompactionError(info, info.cause !== undefined && code === info.cause ? lastSummaryError : undefined);
  };

  const defaults: EngineServices = {
    measure: () => measureService(),
    prune: (input) => pruneService(input),
    selectRange: (input) => selectService(input),
    validateSpan: ({ range }) => {
      const startsAtHead = session.surface.positionOf(range.start) === range.startPos && range.startPos >= headPosition(session);
      if (!startsAtHead || !spanIntact(range) || !session.balancedBefore(range.start) || !session.balancedAfter(range.end)) {
        throw Object.assign(new XcompactError('span-invalid', 'the selected span is no longer a balanced run of current surface nodes'), {
          chartCode: 'changed',
        });
      }
      return {
        lockHeld: session.lock.held,
        snapshot: { generation: session.surface.replaceGeneration, surfaceLength: session.surface.length },
      };
    },
    openBracket: (input) => {
      const tokensBefore = meter.measure().totalTokens;
      const e = session.append({ type: 'compaction/start', data: { turn: input.turn, trigger: input.trigger } });
      lastSummaryError = undefined;
      started.set(e.seq, { at: now(), tokensBefore });
      return { startSeq: e.seq };
    },
    summarize: async (input, signal) => {
      try {
        const r = await summarizer.summarize(buildSummaryRequest(input.range, input.focus), signal);
        const out: SummaryOutcome = { text: r.text, requests: r.requests };
        if (r.provider) out.provider = r.provider;
        if (r.model) out.model = r.model;
        if (r.usage) out.usage = r.usage;
        return out;
      } catch (err) {
        lastSummaryError = err;
        if (err instanceof SummarizerError) {
          throw Object.assign(err, { chartCode: err.code === 'summary-cancelled' ? 'cancelled' : 'summary' });
        }
        throw err;
      }
    },
    revalidate: (input) => {
      const s = session.surface;
      const stable =
        input.mode === 'automatic'
          ? s.replaceGeneration === input.snapshot.generation && s.length === input.snapshot.surfaceLength
          : spanIntact(input.range);
      const checkpointTokens = meter.priceUserText(frameCheckpoint(input.summary.text));
      const requiredTokens = input.mode === 'automatic' ? Math.ceil(config.minProgressRatio * input.range.tokens) : 0;
      return { stable, spanTokens: input.range.tokens, checkpointTokens, requiredTokens };
    },
    commit: (input) => {
      // Three appends, no await between them: the commit is atomic with respect to the loop.
      // The checkpoint replace is the one that can be refused: check it before writing anything.
      const { range, summary } = input;
      const checkpointData = { content: [{ type: 'text' as const, text: frameCheckpoint(summary.text) }], source: COMPACTION_CHECKPOINT_SOURCE };
      const refused = session.check({
        type: 'user/message',
        data: checkpointData,
        surfaceOp: { op: 'replace', start: range.start, end: range.end },
        sourceEventSeqs: [input.startSeq, ...range.shadowed],
      });
      if (refused) throw refused;
      const summaryEvent = session.append({
        type: 'compaction/summary',
        data: {
          summary: summary.text,
          range: { start: range.start, end: range.end },
          shadowedSeqs: range.shadowed,
          shadowedTokens: range.tokens,
          ...(summary.provider ? { provider: summary.provider } : {}),
          ...(summary.model ? { model: summary.model } : {}),
          ...(summary.usage ? { usage: summary.usage } : {}),
        },
      });
      const checkpoint = session.append({
        type: 'user/message',
        data: checkpointData,
        surfaceOp: { op: 'replace', start: range.start, end: range.end },
        sourceEventSeqs: [input.startSeq, summaryEvent.seq, ...range.shadowed],
      });
      const end = session.append({ type: 'compaction/end', data: { turn: input.turn } });
      return {
        startSeq: input.startSeq,
        summarySeq: summaryEvent.seq,
        checkpointSeq: checkpoint.seq,
        endSeq: end.seq,
        shadowedCount: range.shadowed.length,
        spanTokens: range.tokens,
        checkpointTokens: meter.priceOf(checkpoint.seq),
      };
    },
    flush: async () => {
      try {
        await session.flush();
      } catch (err) {
        throw Object.assign(err as object, { chartCode: 'persistence' });
      }
    },
    closeWithError: async (input) => {
      session.append({ type: 'compaction/end', data: { turn: input.turn, error: { code: input.error.code, message: input.error.message } } });
      await session.flush();
    },
    classify: ({ error }) => classifyRequestError(error),
    probeLock: () => ({ held: session.lock.held, generation: session.surface.replaceGeneration }),
    checkAdmission: () => ({ openTurn: session.openTurn, lockHeld: session.lock.held }),
  };
  const services: EngineServices = { ...defaults, ...(options.services?.(defaults) ?? {}) };

  /** compaction/start seqs written by this engine's transactions (each removed once closed). */
  const ownedStarts = new Set<number>();
  session.subscribe((e) => {
    if (e.type === 'compaction/end' || e.type === 'session/end-seed') ownedStarts.clear();
  });

  // Each service becomes an invoked actor; sync services run inside the promise so a throw is an error event.
  const txActors = {
    validateSpan: fromPromise<SpanCheck, TransactionActorInputs['validateSpan']>(async ({ input }) => services.validateSpan(input)),
    openBracket: fromPromise<{ startSeq: number }, TransactionActorInputs['openBracket']>(async ({ input }) => {
      const opened = await services.openBracket(input);
      ownedStarts.add(opened.startSeq);
      return opened;
    }),
    summarize: fromPromise<SummaryOutcome, TransactionActorInputs['summarize']>(({ input, signal }) => services.summarize(input, signal)),
    revalidate: fromPromise<Verdict, TransactionActorInputs['revalidate']>(async ({ input }) => services.revalidate(input)),
    commit: fromPromise<CommitRecord, TransactionActorInputs['commit']>(async ({ input }) => services.commit(input)),
    flush: fromPromise<void, TransactionActorInputs['flush']>(({ input }) => services.flush(input)),
    closeWithError: fromPromise<void, TransactionActorInputs['closeWithError']>(({ input }) => services.closeWithError(input)),
  };

  const recordOf = (out: Extract<TransactionOutput, { status: 'committed' }>): CompactionRecord => {
    const t = started.get(out.commit.startSeq);
    const m = meter.measure();
    return {
      trigger: out.trigger,
      checkpointSeq: out.commit.checkpointSeq,
      shadowedNodes: out.commit.shadowedCount,
      spanTokens: out.commit.spanTokens,
      checkpointTokens: out.commit.checkpointTokens,
      tokensBefore: t?.tokensBefore ?? m.totalTokens + out.commit.spanTokens - out.commit.checkpointTokens,
      tokensAfter: m.totalTokens,
      durationMs: t ? now() - t.at : 0,
      summary: out.summary.text,
      summarizer: {
        ...(out.summary.provider ? { provider: out.summary.provider } : {}),
        ...(out.summary.model ? { model: out.summary.model } : {}),
        requests: out.summary.requests,
        ...(out.summary.usage ? { usage: out.summary.usage } : {}),
      },
    };
  };
  const records = new Map<number, CompactionRecord>();

  const transaction = transactionMachine.provide({
    actors: txActors,
    actions: {
      notify: ({ context }, params) => {
        if (params.what === 'started') {
          const t = started.get(context.startSeq!);
          notify({
            type: 'compaction.started',
            trigger: context.trigger,
            startSeq: context.startSeq!,
            nodes: context.range.shadowed.length,
            spanTokens: context.range.tokens,
            tokensBefore: t?.tokensBefore ?? 0,
          });
        } else if (params.what === 'committed') {
          const record = recordOf({
            status: 'committed',
            trigger: context.trigger,
            range: context.range,
            commit: context.commit!,
            summary: context.summary!,
          });
          records.set(record.checkpointSeq, record);
          started.delete(context.startSeq!);
          notify({ type: 'compaction.committed', ...record });
        } else {
          const t = context.startSeq === undefined ? undefined : started.get(context.startSeq);
          if (context.startSeq !== undefined) started.delete(context.startSeq);
          notify({
            type: 'compaction.failed',
            trigger: context.trigger,
            error: compactionError(context.error ?? { code: 'internal', message: 'unknown failure' }),
            durationMs: t ? now() - t.at : 0,
          });
        }
      },
    },
  });

  // A transaction chart that failed (a bug, not a service failure) cannot close its own bracket:
  // its parent chart decides to release the lock, and this does the work.
  const closeAbandonedBracket = (error: ErrorInfo = { code: 'internal', message: 'the transaction chart failed; its compaction was abandoned' }) => {
    const lock = session.lock;
    // Only a lock this engine's own transaction took: never another writer's.
    if (!lock.held || !ownedStarts.has(lock.startSeq)) return;
    try {
      session.append({ type: 'compaction/end', data: { turn: lock.turn, error: { code: error.code, message: error.message } } });
      session.flush().catch(() => undefined); // a store failure surfaces on the next flush
    } catch {
      // The append itself was refused: the orphan stays and later compactions report busy.
    }
  };

  const measure = fromPromise<ReadingResult, { phase: 'initial' | 'after-prune' | 'after-compaction' }>(async ({ input }) => services.measure(input));
  const pruneActor = fromPromise<PruneSummary, PruneInput>(async ({ input }) => services.prune(input));
  const selectActor = fromPromise<RangeSelection | null, SelectInput>(async ({ input }) => services.selectRange(input));
  const pressure = pressureMachine.provide({
    actors: {
      measure,
      prune: pruneActor,
      selectRange: selectActor,
      transaction,
    },
    actions: { 'close abandoned bracket': () => closeAbandonedBracket() },
  });
  const probeLock = fromPromise<LockProbe, { purpose: 'admit' | 'decide' }>(async ({ input }) => services.probeLock(input));
  const overflow = overflowMachine.provide({
    actors: {
      classify: fromPromise<RequestErrorClass, { error: unknown }>(async ({ input }) => services.classify(input)),
      probeLock,
      prune: pruneActor,
      selectRange: selectActor,
      transaction,
    },
    actions: { 'close abandoned bracket': () => closeAbandonedBracket() },
  });
  const manual = manualMachine.provide({
    actors: {
      checkAdmission: fromPromise<{ openTurn: number | null; lockHeld: boolean }, { purpose: 'manual' }>(async ({ input }) =>
        services.checkAdmission(input),
      ),
      selectRange: selectActor,
      transaction,
    },
    actions: { 'close abandoned bracket': () => closeAbandonedBracket() },
  });
  const machine = engineMachine.provide({ actors: { pressure, overflow, manual } });

  const actor = createActor(machine, {
    input: {
      auto: config.auto,
      pruneEnabled,
      maxAttempts: 1 + config.compactionRetries,
      maxOverflowRetries: config.maxOverflowRetries,
      failureLimit: config.circuitBreaker.failureLimit,
      cooldownMs: config.circuitBreaker.cooldownMs,
    },
    ...(options.inspect ? { inspect: options.inspect } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
  });
  for (const type of ['breaker.opened', 'breaker.closed', 'capacity.missing'] as const) {
    actor.on(type, (e) => notify(e as EngineEmitted));
  }
  // However the actor ends (engine.stop(), a host stopping engine.actor), no call is left hanging.
  actor.subscribe({
    complete: () => rejectInFlight('was stopped while this call was running'),
    error: (err) => rejectInFlight(`failed (${String(err)})`),
  });
  actor.start();

  let nextId = 0;
  const inFlight = new Set<(err: Error) => void>();
  function rejectInFlight(why: string): void {
    for (const reject of [...inFlight]) reject(new XcompactError('engine-stopped', `the compaction engine ${why}`));
  }
  const request = (make: (id: string) => EngineRequest, signal: AbortSignal | undefined): Promise<SettledResult> =>
    new Promise((resolve, reject) => {
      const status = actor.getSnapshot().status;
      if (status !== 'active') {
        const why = status === 'error' ? `failed (${String(actor.getSnapshot().error)})` : 'was stopped';
        reject(new XcompactError('engine-stopped', `the compaction engine ${why}; create a new one`));
        return;
      }
      const id = `r${++nextId}`;
      const onAbort = () => actor.send({ type: 'cancel', id });
      const done = () => {
        sub.unsubscribe();
        signal?.removeEventListener('abort', onAbort);
        inFlight.delete(stopped);
      };
      const stopped = (err: Error) => {
        done();
        reject(err);
      };
      const sub = actor.on('request.settled', (e) => {
        if (e.id !== id) return;
        done();
        resolve(e.result);
      });
      inFlight.add(stopped);
      signal?.addEventListener('abort', onAbort, { once: true });
      actor.send(make(id));
    });


  const toAfterStep = (out: PressureOutput): AfterStepResult => {
    const compactions: CompactionRecord[] = [];
    for (const t of out.transactions) {
      if (t.status === 'committed') {
        const r = records.get(t.commit.checkpointSeq);
        records.delete(t.commit.checkpointSeq); // handed to the caller: nothing accumulates
        if (r) compactions.push(r);
      }
    }
    // (An unresolvable budget is told once per model by capacity.missing, not at every step.)
    if (out.status === 'stuck') notify({ type: 'compaction.skipped', trigger: 'pressure', reason: 'above the threshold, but nothing can be compacted (one indivisible unit)' });
    return { status: out.status, before: out.before, after: out.after, pruned: out.prune, compactions, error: out.error ? compactionError(out.error) : undefined };
  };

  const engine: CompactionEngine = {
    config,
    actor,
    on(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stop() {
      // A graceful stop: the running compaction (if any) is cancelled and its bracket closed, so
      // the session stays usable. (A process that dies instead leaves the orphan that
      // session.recover() clears after the next Session.open.)
      actor.stop();
      closeAbandonedBracket({ code: 'cancelled', message: 'the compaction engine was stopped while this compaction ran' });
    },
    async afterStep(opts = {}) {
      const result = await request(
        (id) => ({ type: 'step.completed', id, turn: session.openTurn, aborted: opts.signal?.aborted ?? false }),
        opts.signal,
      );
      if (result.kind === 'pressure') return toAfterStep(result.output);
      if (result.kind === 'error') {
        return { status: 'failed', before: undefined, after: undefined, pruned: undefined, compactions: [], error: new CompactionError(result.error) };
      }
      const status = result.kind === 'busy' ? 'busy' : result.kind === 'auto-off' ? 'auto-off' : 'paused';
      return { status, before: undefined, after: undefined, pruned: undefined, compactions: [], error: undefined };
    },
    async onRequestError(error, opts = {}) {
      const result = await request(
        (id) => ({
          type: 'request.failed',
          id,
          error,
          turn: session.openTurn,
          aborted: opts.signal?.aborted ?? false,
          lastAssistantSeq: session.latestReply?.seq ?? -1,
        }),
        opts.signal,
      );
      if (result.kind === 'error') return { kind: 'fail', error, reason: 'internal', classification: undefined };
      if (result.kind !== 'overflow') return { kind: 'fail', error, reason: 'busy', classification: undefined };
      const out = result.output;
      if (out.transaction?.status === 'committed') records.delete(out.transaction.commit.checkpointSeq);
      if (out.action === 'retry') return { kind: 'retry', classification: out.classification };
      return { kind: 'fail', error, reason: out.reason, classification: out.classification };
    },
    async compactNow(opts = {}) {
      const signal = opts.signal;
      const reason = signal?.aborted ? String(signal.reason instanceof Error ? signal.reason.message : (signal.reason ?? 'aborted')) : undefined;
      const result = await request(
        (id) => ({ type: 'compact.requested', id, aborted: signal?.aborted ?? false, abortReason: reason, focus: opts.focus }),
        signal,
      );
      if (result.kind === 'busy') throw new CompactionError({ code: 'busy', message: `the engine is running ${result.running} compaction` });
      if (result.kind === 'error') throw new CompactionError(result.error);
      if (result.kind !== 'manual') throw new CompactionError({ code: 'internal', message: `unexpected result ${result.kind}` });
      const out = result.output;
      if (out.status === 'nothing') return null;
      if (out.status === 'failed') throw compactionError(out.error);
      const record = records.get(out.transaction.commit.checkpointSeq) ?? recordOf(out.transaction);
      records.delete(out.transaction.commit.checkpointSeq);
      return record;
    },
    measure() {
      const m = meter.measure();
      let threshold: number | undefined;
      let contextWindow: number | undefined;
      try {
        const b = budgetFor();
        threshold = b.threshold;
        contextWindow = b.window;
      } catch {
        // No route or no capacity yet: the figures stay undefined.
      }
      return { ...m, threshold, contextWindow };
    },
  };
  return engine;
}
