/**
 * Pressure compaction, run after every successful step (before `step/end`, so also in the
 * middle of a tool loop).
 *
 *   checkingSignal ─ already aborted ▶ cancelled
 *   measuring ─ unrouted / misconfigured ▶ skipped      ─ below threshold ▶ below
 *       │ below, but compacting now pays (cost model) ▶ selecting
 *       │ below, but pruning now pays (cost model: reads saved, less what it forgets) ▶ pruning
 *       │ at or above threshold, or the provider reported a prompt above the window
 *       │ (a silent overflow: announced once per reply, compacted whatever the meter says):
 *       │ relief, never declined — the cost model picks the cheapest that brings the request
 *       │ under the threshold: a prune alone ▶ pruning; a summary alone (a prune would free
 *       │ nothing) ▶ selecting; otherwise (or with no cost model) a prune, then a summary of
 *       │ the pruned surface if it is not enough
 *   pruning (if enabled) ▶ remeasuringAfterPrune ─ below ▶ relievedByPruning (no model call)
 *       └ threw ▶ selecting (announced as prune.failed: compaction still runs)
 *   selecting ─ nothing to compact ▶ stuck (first attempt) / failed (a retry with nothing new)
 *       └ summaries unavailable (the breaker is open) ▶ truncating
 *   compacting (transaction) ─ the summarizer could not help (its summary failed, or came back
 *       │ over its cap) ▶ truncating ─ committed ▶ remeasuring   (the model-free last resort:
 *       │ prune, then a truncation checkpoint of the oldest whole turns, the ledger alone)
 *       └ failed otherwise ▶ failed
 *   remeasuring ─ below ▶ compacted (truncated, when a truncation checkpoint brought it there)
 *       └ above, attempts left ▶ selecting (the retry merges from the head)
 *       └ above, none left ▶ failed ("still above threshold after N attempts")
 *
 * Announces (emitted, and relayed to the engine chart): pruned, prune.failed, compaction.skipped (stuck),
 * overflow.silent.
 */
import { and, assign, not, sendTo, setup } from 'xstate';
import type { RangeSelection } from '../services/selection';
import { transactionMachine } from './transaction';
import {
  errorOf,
  notProvided,
  announceAction,
  announcePruneFailure,
  outputOf,
  toErrorInfo,
  type ChartNotification,
  type EconomicDecision,
  type ErrorInfo,
  type PressureReading,
  type PruneSummary,
  type PruneInput,
  type ReadingResult,
  type SelectInput,
  type TransactionOutput,
  type TruncationReason,
  truncated,
  truncationAfter,
} from './types';

// ── The chart's contract: input, context, events, output ──
/*
 * The pressure chart's contract (pressure.ts): what it is given (input, and what its measure
 * actor is asked), what it answers (status and output, also for a step on which it did not
 * run), and the context and events of the chart itself.
 */
export interface PressureInput {
  turn: number | null;
  /** The caller's signal was already aborted when the step was reported. */
  aborted: boolean;
  pruneEnabled: boolean;
  /** 1 + compactionRetries (the routed model's policy). */
  maxAttempts: number;
  /** The newest usage seq a silent overflow was already reported for (-1: none). */
  silentSeenSeq: number;
  /**
   * A reading the caller took with nothing appended or committed since (the background gate's):
   * decided on as it is, so a step is measured once.
   */
  given?: ReadingResult;
  /**
   * Summaries cannot help (the engine's circuit breaker is open): relief is model-free, a prune
   * and then a truncation checkpoint; no compaction starts early.
   */
  modelFree?: boolean;
  /** Config `truncationFallback: false`: no truncation stands in for a summary that failed (absent: on). */
  fallback?: boolean;
}

/** What the measure actor is asked: the phase, and a reading already taken for it (returned as it is). */
export interface MeasureInput {
  phase: 'initial' | 'after-prune' | 'after-compaction';
  given?: ReadingResult;
}

export type PressureStatus =
  | 'skipped' // no routed model yet, or the model's budget cannot be resolved
  | 'below' // under the threshold: nothing to do
  | 'relieved-by-pruning' // pruning alone brought pressure under the threshold
  | 'compacted' // one or more checkpoints brought it under
  | 'truncated' // a truncation checkpoint (the model-free last resort) brought it under
  | 'stuck' // above the threshold with nothing compactable (one indivisible unit)
  | 'failed' // a transaction failed, or pressure stayed above after every attempt
  | 'cancelled'
  /** Background mode (gate.ts): a summary is being prepared below the threshold; this chart did not run. */
  | 'preparing';

export interface PressureOutput {
  status: PressureStatus;
  before: PressureReading | undefined;
  after: PressureReading | undefined;
  skipped: Extract<ReadingResult, { kind: 'misconfigured' }> | undefined;
  prune: PruneSummary | undefined;
  transactions: TransactionOutput[];
  error: ErrorInfo | undefined;
  /** The usage seq of a silent overflow this run handled (reported once per seq). */
  silentOverflowSeq: number | undefined;
  /** What the cost model decided, with its numbers (undefined: the threshold alone decided). */
  economics: EconomicDecision | undefined;
  /** The run asked no model (the breaker was open): a relief it brought says nothing of the summarizer. */
  modelFree: boolean;
}

/**
 * The answer to a step on which nothing ran (found below the threshold before any job, or a
 * background summary is being prepared): the reading, unchanged, and nothing else.
 */
export function restingOutput(status: 'below' | 'preparing', reading: PressureReading | undefined): PressureOutput {
  return {
    status,
    before: reading,
    after: reading,
    skipped: undefined,
    prune: undefined,
    transactions: [],
    error: undefined,
    silentOverflowSeq: undefined,
    economics: undefined,
    modelFree: false,
  };
}

export interface PressureContext extends Omit<PressureInput, 'modelFree'> {
  /** Summaries cannot help: the breaker was open, or one failed in this run (the next attempt truncates at once). */
  modelFree: boolean;
  /** Why the truncation transaction about to run stands in for a summary. */
  truncation: TruncationReason | undefined;
  /** The input's modelFree: no model was asked in this run. */
  askedNoModel: boolean;
  attempts: number;
  before: PressureReading | undefined;
  last: PressureReading | undefined;
  skipped: PressureOutput['skipped'];
  prune: PruneSummary | undefined;
  range: RangeSelection | undefined;
  transactions: TransactionOutput[];
  error: ErrorInfo | undefined;
  status: PressureStatus;
  /** A cancel arrived while a transaction was running: nothing new starts after it. */
  cancelRequested: boolean;
  silentOverflowSeq: number | undefined;
  /** What the cost model decided this run, with its numbers (undefined: the threshold alone decided). */
  economics: EconomicDecision | undefined;
}

export type PressureEvent = { type: 'cancel'; reason?: string };

export type { EconomicDecision };

function reading(event: { type: string }): PressureReading | undefined {
  const r = outputOf<ReadingResult | null>(event);
  return r && r.kind === 'reading' ? r.reading : undefined;
}

function isBelow(r: PressureReading | undefined): boolean {
  return r !== undefined && r.totalTokens < r.threshold;
}

const announcePrune = announceAction<PressureContext, PressureEvent>(({ context, event }) => {
  const p = outputOf<PruneSummary>(event);
  if (p.count === 0) return undefined;
  return { type: 'pruned', trigger: 'pressure', count: p.count, tokensFreed: p.tokensFreed, ...(context.economics ? { economics: context.economics } : {}) };
});
const announceStuck = announceAction<PressureContext, PressureEvent>(() => ({
  type: 'compaction.skipped',
  trigger: 'pressure',
  reason: 'above the threshold, but nothing can be compacted (one indivisible unit)',
}));
/**
 * The provider cut the prompt without an error: the conversation is over the window whatever
 * the meter says, so this run compacts as if above the threshold, and says so once per reply.
 */
const announceSilentOverflow = announceAction<PressureContext, PressureEvent>(({ event }) => {
  const r = reading(event)!;
  return { type: 'overflow.silent', seq: r.silentOverflow!.seq, promptTokens: r.silentOverflow!.promptTokens, contextWindow: r.contextWindow };
});

export const pressureMachine = setup({
  types: {
    context: {} as PressureContext,
    events: {} as PressureEvent,
    input: {} as PressureInput,
    output: {} as PressureOutput,
    emitted: {} as ChartNotification,
  },
  actors: {
    measure: notProvided<ReadingResult, MeasureInput>('measure'),
    prune: notProvided<PruneSummary, PruneInput>('prune'),
    selectRange: notProvided<RangeSelection | null, SelectInput>('selectRange'),
    transaction: transactionMachine,
  },
  guards: {
    'signal already aborted': ({ context }) => context.aborted,
    'cancel was requested': ({ context }) => context.cancelRequested,
    'no routed model yet': ({ event }) => outputOf<ReadingResult>(event).kind === 'unrouted',
    'budget cannot be resolved': ({ event }) => outputOf<ReadingResult>(event).kind === 'misconfigured',
    'below threshold': ({ event }) => isBelow(reading(event)),
    'the provider truncated the prompt silently': ({ context, event }) => {
      const silent = reading(event)?.silentOverflow;
      return silent !== undefined && silent.seq > context.silentSeenSeq;
    },
    'pruning is enabled': ({ context }) => context.pruneEnabled,
    'compacting now pays': ({ event }) => reading(event)?.economics?.compaction?.pays === true,
    'pruning now pays (cost model)': ({ event }) => reading(event)?.economics?.prune?.pays === true,
    'a prune alone relieves the pressure (cost model)': ({ event }) => reading(event)?.economics?.relief?.choice === 'prune',
    'a prune would free nothing (cost model)': ({ event }) => reading(event)?.economics?.relief?.choice === 'summarize',
    'nothing to compact': ({ event }) => outputOf<RangeSelection | null>(event) === null,
    'transaction committed': ({ event }) => outputOf<TransactionOutput>(event).status === 'committed',
    'transaction was cancelled': ({ event }) => {
      const out = outputOf<TransactionOutput>(event);
      return out.status === 'failed' && out.error.code === 'cancelled';
    },
    'attempts left': ({ context }) => context.attempts < context.maxAttempts,
    'no attempt made yet': ({ context }) => context.attempts === 0,
    'summaries are unavailable': ({ context }) => context.modelFree,
    // A compaction started early (below the threshold) gives up instead: it was an optimisation.
    'the summarizer could not help': ({ context, event }) =>
      context.fallback !== false &&
      !context.cancelRequested &&
      context.economics?.decision !== 'compact-early' &&
      truncationAfter(outputOf<TransactionOutput>(event)) !== undefined,
    'a truncation stood in': ({ context }) => context.transactions.some(truncated),
  },
  actions: {
    'remember first reading': assign({
      before: ({ event }) => reading(event),
      last: ({ event }) => reading(event),
    }),
    'remember reading': assign({ last: ({ event }) => reading(event) }),
    'remember misconfiguration': assign({
      skipped: ({ event }) => outputOf<ReadingResult>(event) as PressureOutput['skipped'],
    }),
    'remember prune': assign({ prune: ({ event }) => outputOf<PruneSummary>(event) }),
    'remember economic decision': assign({
      economics: ({ event }, params: { decision: EconomicDecision['decision'] }) => {
        const e = reading(event)?.economics;
        if (params.decision === 'compact-early') return e?.compaction ? { ...e.compaction, decision: 'compact-early' } : undefined;
        if (params.decision === 'prune-early') return e?.prune ? { ...e.prune, decision: 'prune-early' } : undefined;
        if (!e?.relief) return undefined;
        const { choice: _choice, ...verdict } = e.relief;
        return { ...verdict, decision: params.decision };
      },
    }),
    'announce prune': announcePrune,
    'announce prune failure': announcePruneFailure<PressureContext, PressureEvent>('pressure'),
    'announce stuck': announceStuck,
    'remember silent overflow': assign({ silentOverflowSeq: ({ event }) => reading(event)?.silentOverflow?.seq }),
    'announce silent overflow': announceSilentOverflow,
    'remember range': assign({ range: ({ event }) => outputOf<RangeSelection>(event) ?? undefined, attempts: ({ context }) => context.attempts + 1 }),
    'truncate for the open breaker': assign({ truncation: 'breaker-open' as const }),
    // From now on in this run no summary is asked for: the summarizer failed once already.
    'truncate after the summary': assign({ truncation: ({ event }) => truncationAfter(outputOf<TransactionOutput>(event)), modelFree: true }),
    'remember transaction': assign({ transactions: ({ context, event }) => [...context.transactions, outputOf<TransactionOutput>(event)] }),
    'fail from transaction': assign({
      error: ({ event }) => {
        const out = outputOf<TransactionOutput>(event);
        return out.status === 'failed' ? out.error : undefined;
      },
    }),
    'fail still above threshold': assign({
      error: ({ context, event }) => {
        const r = reading(event) ?? context.last;
        return {
          code: 'still-above-threshold',
          message: `still above threshold after ${context.attempts} attempt(s) (${r?.totalTokens ?? '?'} ≥ ${r?.threshold ?? '?'})`,
        } satisfies ErrorInfo;
      },
    }),
    'fail from service': assign({ error: ({ event }) => toErrorInfo(errorOf(event), 'internal') }),
    'forward cancel': sendTo('transaction', ({ event }) => ({ type: 'cancel' as const, ...(event.reason !== undefined ? { reason: event.reason } : {}) })),
    'remember cancel': assign({ cancelRequested: true }),
    'close abandoned bracket': () => {
      // Provided by the engine: a transaction chart that failed may have left its lock taken.
    },
    'set status': assign({ status: (_, params: { status: PressureStatus }) => params.status }),
  },
}).createMachine({
  id: 'pressure',
  context: ({ input }) => ({
    ...input,
    modelFree: input.modelFree === true,
    askedNoModel: input.modelFree === true,
    truncation: undefined,
    attempts: 0,
    before: undefined,
    last: undefined,
    skipped: undefined,
    prune: undefined,
    range: undefined,
    transactions: [],
    error: undefined,
    status: 'failed',
    cancelRequested: false,
    silentOverflowSeq: undefined,
    economics: undefined,
  }),
  initial: 'checkingSignal',
  on: { cancel: { target: '.cancelled' } },
  states: {
    checkingSignal: {
      always: [{ guard: 'signal already aborted', target: 'cancelled' }, { target: 'measuring' }],
    },
    measuring: {
      invoke: {
        src: 'measure',
        input: ({ context }): MeasureInput => (context.given ? { phase: 'initial', given: context.given } : { phase: 'initial' }),
        onDone: [
          { guard: 'no routed model yet', target: 'skipped' },
          { guard: 'budget cannot be resolved', target: 'skipped', actions: 'remember misconfiguration' },
          {
            guard: and(['the provider truncated the prompt silently', 'pruning is enabled']),
            target: 'pruning',
            actions: ['remember first reading', 'remember silent overflow', 'announce silent overflow'],
          },
          {
            guard: 'the provider truncated the prompt silently',
            target: 'selecting',
            actions: ['remember first reading', 'remember silent overflow', 'announce silent overflow'],
          },
          {
            guard: and(['below threshold', 'compacting now pays', not('summaries are unavailable')]),
            target: 'selecting',
            actions: ['remember first reading', { type: 'remember economic decision', params: { decision: 'compact-early' } }],
          },
          // Below the threshold, masking old bulky outputs when the reads it saves, less what it forgets, repay the rewrite.
          {
            guard: and(['below threshold', 'pruning is enabled', 'pruning now pays (cost model)']),
            target: 'pruning',
            actions: ['remember first reading', { type: 'remember economic decision', params: { decision: 'prune-early' } }],
          },
          { guard: 'below threshold', target: 'below', actions: 'remember first reading' },
          // Above the threshold relief is never declined: the cheapest action that brings the request under it.
          {
            guard: and(['pruning is enabled', 'a prune alone relieves the pressure (cost model)']),
            target: 'pruning',
            actions: ['remember first reading', { type: 'remember economic decision', params: { decision: 'prune' } }],
          },
          {
            guard: and(['pruning is enabled', 'a prune would free nothing (cost model)']),
            target: 'selecting',
            actions: ['remember first reading', { type: 'remember economic decision', params: { decision: 'summarize' } }],
          },
          // A prune, then a summary of the pruned surface if it is not enough (also with no cost model).
          {
            guard: 'pruning is enabled',
            target: 'pruning',
            actions: ['remember first reading', { type: 'remember economic decision', params: { decision: 'prune-then-summarize' } }],
          },
          { target: 'selecting', actions: 'remember first reading' },
        ],
        onError: { target: 'failed', actions: 'fail from service' },
      },
    },
    pruning: {
      invoke: {
        src: 'prune',
        input: { trigger: 'pressure', protectRecent: true },
        onDone: { target: 'remeasuringAfterPrune', actions: ['remember prune', 'announce prune'] },
        // A failed prune is an optimisation that failed: announced, and compaction still runs.
        onError: { target: 'selecting', actions: 'announce prune failure' },
      },
    },
    remeasuringAfterPrune: {
      invoke: {
        src: 'measure',
        input: { phase: 'after-prune' },
        onDone: [
          { guard: 'below threshold', target: 'relievedByPruning', actions: 'remember reading' },
          { target: 'selecting', actions: 'remember reading' },
        ],
        onError: { target: 'failed', actions: 'fail from service' },
      },
    },
    selecting: {
      invoke: {
        src: 'selectRange',
        // The first attempt keeps small earlier checkpoints in place; a retry merges from the head.
        input: ({ context }): SelectInput => ({
          purpose: 'pressure',
          attempt: context.attempts + 1,
          // An early compaction (the cost model's) keeps the floor tail; one at the threshold, the budget's.
          retain: context.economics?.decision === 'compact-early' && context.attempts === 0 ? 'floor' : 'budget',
          stackCheckpoints: context.attempts === 0,
        }),
        onDone: [
          { guard: and(['nothing to compact', 'no attempt made yet']), target: 'stuck' },
          // A retry with nothing new to fold in (a lone checkpoint) cannot bring pressure down.
          { guard: 'nothing to compact', target: 'failed', actions: 'fail still above threshold' },
          { guard: 'summaries are unavailable', target: 'truncating', actions: ['remember range', 'truncate for the open breaker'] },
          { target: 'compacting', actions: 'remember range' },
        ],
        onError: { target: 'failed', actions: 'fail from service' },
      },
    },
    compacting: {
      invoke: {
        id: 'transaction',
        src: 'transaction',
        input: ({ context }) => ({
          trigger: 'pressure' as const,
          mode: 'automatic' as const,
          range: context.range!,
          turn: context.turn,
          ...(context.economics ? { economics: context.economics } : {}),
        }),
        onDone: [
          { guard: 'transaction was cancelled', target: 'cancelled', actions: ['remember transaction', 'fail from transaction'] },
          // Cancelled too late to stop this commit: keep it, but start nothing after it.
          { guard: and(['cancel was requested', 'transaction committed']), target: 'cancelled', actions: 'remember transaction' },
          { guard: 'transaction committed', target: 'remeasuring', actions: 'remember transaction' },
          // The summary failed or came back over its cap: the model-free last resort, on the same span.
          { guard: 'the summarizer could not help', target: 'truncating', actions: ['remember transaction', 'truncate after the summary'] },
          // A failure of its own (even after a late cancel) is a failure: the breaker counts it.
          { target: 'failed', actions: ['remember transaction', 'fail from transaction'] },
        ],
        // A bug inside the transaction chart itself (not a service failure, which it handles).
        onError: { target: 'failed', actions: ['fail from service', 'close abandoned bracket'] },
      },
      // The transaction closes its own bracket on cancel; this chart waits for it.
      on: { cancel: { actions: ['forward cancel', 'remember cancel'] } },
    },
    // The model-free last resort: a truncation checkpoint of the span (the ledger alone), recorded like any other.
    truncating: {
      invoke: {
        id: 'transaction',
        src: 'transaction',
        input: ({ context }) => ({
          trigger: 'pressure' as const,
          mode: 'automatic' as const,
          range: context.range!,
          turn: context.turn,
          truncation: context.truncation!,
        }),
        onDone: [
          { guard: 'transaction was cancelled', target: 'cancelled', actions: ['remember transaction', 'fail from transaction'] },
          { guard: and(['cancel was requested', 'transaction committed']), target: 'cancelled', actions: 'remember transaction' },
          { guard: 'transaction committed', target: 'remeasuring', actions: 'remember transaction' },
          { target: 'failed', actions: ['remember transaction', 'fail from transaction'] },
        ],
        onError: { target: 'failed', actions: ['fail from service', 'close abandoned bracket'] },
      },
      on: { cancel: { actions: ['forward cancel', 'remember cancel'] } },
    },
    remeasuring: {
      invoke: {
        src: 'measure',
        input: { phase: 'after-compaction' },
        onDone: [
          { guard: and(['below threshold', 'a truncation stood in']), target: 'truncated', actions: 'remember reading' },
          { guard: 'below threshold', target: 'compacted', actions: 'remember reading' },
          { guard: 'attempts left', target: 'selecting', actions: 'remember reading' },
          { target: 'failed', actions: ['remember reading', 'fail still above threshold'] },
        ],
        onError: { target: 'failed', actions: 'fail from service' },
      },
    },
    skipped: { type: 'final', entry: { type: 'set status', params: { status: 'skipped' } } },
    below: { type: 'final', entry: { type: 'set status', params: { status: 'below' } } },
    relievedByPruning: { type: 'final', entry: { type: 'set status', params: { status: 'relieved-by-pruning' } } },
    stuck: { type: 'final', entry: [{ type: 'set status', params: { status: 'stuck' } }, 'announce stuck'] },
    compacted: { type: 'final', entry: { type: 'set status', params: { status: 'compacted' } } },
    truncated: { type: 'final', entry: { type: 'set status', params: { status: 'truncated' } } },
    failed: { type: 'final', entry: { type: 'set status', params: { status: 'failed' } } },
    cancelled: { type: 'final', entry: { type: 'set status', params: { status: 'cancelled' } } },
  },
  output: ({ context }) => ({
    status: context.status,
    before: context.before,
    after: context.last,
    skipped: context.skipped,
    prune: context.prune,
    transactions: context.transactions,
    error: context.error,
    silentOverflowSeq: context.silentOverflowSeq,
    economics: context.economics,
    modelFree: context.askedNoModel,
  }),
});
