/**
 * The compaction transaction: one span condensed into one checkpoint, bracketed in the log.
 *
 *   validating ─ lock held / cancelled ─────────────────────────────▶ rejected (nothing written)
 *       │ span ok, lock free
 *   opening (append compaction/start: the lock) ─ a truncation ▶ truncating (the ledger alone, no model) ─┐
 *   summarizing (invoked, cancellable) ── cancel / error / deadline ─┐                                    │
 *       │ (both go on to revalidating: a truncation checkpoint is checked and committed like a summary) ◀──┘
 *   revalidating ── changed / no shrink / no progress ────┤
 *   committing (compaction/summary + checkpoint + end) ───┤ error
 *   flushing ── error ─▶ persistenceFailed                 ▼
 *   committed                                   closing (one compaction/end {error} attempt) ─▶ failed
 *
 * A summary that arrives after `cancel` is never committed: leaving `summarizing` stops
 * the summarize actor (its signal aborts) and its late result is dropped with it. A cancel's
 * `reason` (the caller's) is kept in the error and in `compaction/end.error`.
 *
 * A truncation transaction (input `truncation`: the model-free last resort its parent chart chose
 * when the summarizer cannot help) asks no model: its checkpoint is the span's ledger alone.
 *
 * Announces compaction.started / committed / failed (emitted, and relayed to the engine chart).
 */
import { assign, enqueueActions, setup } from 'xstate';
import type { RangeSelection } from '../services/selection';
import {
  errorOf,
  notProvided,
  outputOf,
  compactionRecord,
  tell,
  toErrorInfo,
  type ChartNotification,
  type CommitRecord,
  type OpenedBracket,
  type ErrorInfo,
  type Mode,
  type SpanCheck,
  type SummaryOutcome,
  type TransactionInput,
  type TransactionOutput,
  type Trigger,
  type Verdict,
  DEFAULT_SUMMARY_DEADLINE_MS,
  SUMMARY_TIMEOUT_ERROR,
  type TruncationReason,
} from './types';
import { noProgressError, noShrinkError, spanChanged, verdictGuards } from './verdict';

export interface TransactionContext {
  trigger: Trigger;
  mode: Mode;
  range: RangeSelection;
  turn: number | null;
  focus: string | undefined;
  /** The cost model's decision that started it, if it did. */
  economics: TransactionInput['economics'];
  /** A truncation transaction: why no summary is asked for. */
  truncation: TruncationReason | undefined;
  snapshot: SpanCheck['snapshot'] | undefined;
  startSeq: number | undefined;
  opened: OpenedBracket | undefined;
  summary: SummaryOutcome | undefined;
  commit: CommitRecord | undefined;
  error: ErrorInfo | undefined;
  /** A cancel arrived while a step that cannot be interrupted was running. */
  cancelRequested: boolean;
  cancelReason: string | undefined;
}

/** `reason`: the caller's, kept in the error and in `compaction/end.error`. */
export type TransactionEvent = { type: 'cancel'; reason?: string };

export type TransactionActorInputs = {
  validateSpan: { range: RangeSelection; mode: Mode };
  openBracket: { trigger: Trigger; turn: number | null; range: RangeSelection; background?: boolean };
  summarize: { range: RangeSelection; focus: string | undefined; trigger: Trigger };
  truncate: { range: RangeSelection; reason: TruncationReason };
  revalidate: { range: RangeSelection; mode: Mode; snapshot: SpanCheck['snapshot']; summary: SummaryOutcome };
  commit: { range: RangeSelection; startSeq: number; summary: SummaryOutcome; turn: number | null; opened?: OpenedBracket };
  flush: { trigger: Trigger };
  closeWithError: { startSeq: number; turn: number | null; error: ErrorInfo };
};

/** The services a transaction invokes, to be provided; the background chart invokes the same ones. */
export const transactionActors = {
  validateSpan: notProvided<SpanCheck, TransactionActorInputs['validateSpan']>('validateSpan'),
  openBracket: notProvided<OpenedBracket, TransactionActorInputs['openBracket']>('openBracket'),
  summarize: notProvided<SummaryOutcome, TransactionActorInputs['summarize']>('summarize'),
  truncate: notProvided<SummaryOutcome, TransactionActorInputs['truncate']>('truncate'),
  revalidate: notProvided<Verdict, TransactionActorInputs['revalidate']>('revalidate'),
  commit: notProvided<CommitRecord, TransactionActorInputs['commit']>('commit'),
  flush: notProvided<void, TransactionActorInputs['flush']>('flush'),
  closeWithError: notProvided<void, TransactionActorInputs['closeWithError']>('closeWithError'),
};

export const transactionMachine = setup({
  types: {
    context: {} as TransactionContext,
    events: {} as TransactionEvent,
    input: {} as TransactionInput,
    output: {} as TransactionOutput,
    emitted: {} as ChartNotification,
  },
  actors: transactionActors,
  delays: {
    // Provided by the engine: the summary target's summaryTimeoutMs.
    summaryDeadline: () => DEFAULT_SUMMARY_DEADLINE_MS,
  },
  guards: {
    'cancel was requested': ({ context }) => context.cancelRequested,
    'a truncation': ({ context }) => context.truncation !== undefined,
    ...verdictGuards,
    'surface changed': spanChanged,
  },
  actions: {
    'remember cancel': assign({
      cancelRequested: true,
      cancelReason: ({ context, event }) => (event.type === 'cancel' && event.reason !== undefined ? event.reason : context.cancelReason),
    }),
    'remember snapshot': assign({ snapshot: ({ event }) => outputOf<SpanCheck>(event).snapshot }),
    'remember start': assign({
      startSeq: ({ event }) => outputOf<OpenedBracket>(event).startSeq,
      opened: ({ event }) => outputOf<OpenedBracket>(event),
    }),
    'remember summary': assign({ summary: ({ event }) => outputOf<SummaryOutcome>(event) }),
    'remember commit': assign({ commit: ({ event }) => outputOf<CommitRecord>(event) }),
    'fail busy': assign({
      error: () => ({ code: 'busy', message: 'another compaction holds the lock (an unmatched compaction/start)' }) satisfies ErrorInfo,
    }),
    'fail changed': assign({
      error: () => ({ code: 'changed', message: 'the surface changed while the summary was written; nothing was committed' }) satisfies ErrorInfo,
    }),
    'fail no shrink': assign({ error: ({ event }) => noShrinkError(event) }),
    'fail no progress': assign({ error: ({ event }) => noProgressError(event) }),
    'fail cancelled': assign({
      error: ({ context, event }) => {
        const reason = event.type === 'cancel' && event.reason !== undefined ? event.reason : context.cancelReason;
        return {
          code: 'cancelled',
          message: reason === undefined ? 'the compaction was cancelled' : `the compaction was cancelled: ${reason}`,
        } satisfies ErrorInfo;
      },
    }),
    'fail from span check': assign({ error: ({ event }) => toErrorInfo(errorOf(event), 'changed') }),
    'fail from bracket': assign({ error: ({ event }) => toErrorInfo(errorOf(event), 'commit') }),
    'fail from summarizer': assign({ error: ({ event }) => toErrorInfo(errorOf(event), 'summary') }),
    'fail from truncation': assign({ error: ({ event }) => toErrorInfo(errorOf(event), 'internal') }),
    'fail summary timeout': assign({ error: () => SUMMARY_TIMEOUT_ERROR }),
    'fail from revalidation': assign({ error: ({ event }) => toErrorInfo(errorOf(event), 'changed') }),
    'fail from commit': assign({ error: ({ event }) => toErrorInfo(errorOf(event), 'commit') }),
    'fail from flush': assign({ error: ({ event }) => toErrorInfo(errorOf(event), 'persistence') }),
    notify: enqueueActions(({ context, enqueue, self }, params: { what: 'started' | 'committed' | 'failed' }) => {
      if (params.what === 'started') {
        tell(enqueue, self, {
          type: 'compaction.started',
          trigger: context.trigger,
          startSeq: context.startSeq!,
          nodes: context.range.shadowed.length,
          spanTokens: context.range.tokens,
          tokensBefore: context.opened?.tokensBefore ?? 0,
          ...(context.economics ? { economics: context.economics } : {}),
        });
      } else if (params.what === 'committed') {
        tell(enqueue, self, { type: 'compaction.committed', ...compactionRecord(context.trigger, context.commit!, context.summary!) });
      } else {
        tell(enqueue, self, {
          type: 'compaction.failed',
          trigger: context.trigger,
          error: context.error ?? { code: 'internal', message: 'unknown failure' },
          startedAt: context.opened?.startedAt,
        });
      }
    }),
  },
}).createMachine({
  id: 'transaction',
  context: ({ input }) => ({
    trigger: input.trigger,
    mode: input.mode,
    range: input.range,
    turn: input.turn,
    economics: input.economics,
    truncation: input.truncation,
    focus: input.focus,
    snapshot: undefined,
    startSeq: undefined,
    opened: undefined,
    summary: undefined,
    commit: undefined,
    error: undefined,
    cancelRequested: false,
    cancelReason: undefined,
  }),
  initial: 'validating',
  // Steps that run to completion note a cancel; the next decision honours it. Waiting states
  // (summarizing, revalidating) leave at once; after the commit began, it is too late.
  on: { cancel: { actions: 'remember cancel' } },
  states: {
    validating: {
      invoke: {
        src: 'validateSpan',
        input: ({ context }) => ({ range: context.range, mode: context.mode }),
        onDone: [
          { guard: 'cancel was requested', target: 'rejected', actions: 'fail cancelled' },
          { guard: 'lock is held', target: 'rejected', actions: 'fail busy' },
          { target: 'opening', actions: 'remember snapshot' },
        ],
        onError: { target: 'rejected', actions: 'fail from span check' },
      },
    },
    opening: {
      invoke: {
        src: 'openBracket',
        input: ({ context }) => ({ trigger: context.trigger, turn: context.turn, range: context.range }),
        onDone: [
          // The lock is taken: close it again rather than start a summary nobody wants.
          {
            guard: 'cancel was requested',
            target: 'closing',
            actions: ['remember start', { type: 'notify', params: { what: 'started' } }, 'fail cancelled'],
          },
          { guard: 'a truncation', target: 'truncating', actions: ['remember start', { type: 'notify', params: { what: 'started' } }] },
          { target: 'summarizing', actions: ['remember start', { type: 'notify', params: { what: 'started' } }] },
        ],
        onError: { target: 'rejected', actions: 'fail from bracket' },
      },
    },
    summarizing: {
      invoke: {
        src: 'summarize',
        input: ({ context }) => ({ range: context.range, focus: context.focus, trigger: context.trigger }),
        onDone: { target: 'revalidating', actions: 'remember summary' },
        onError: { target: 'closing', actions: 'fail from summarizer' },
      },
      on: { cancel: { target: 'closing', actions: 'fail cancelled' } },
      // The summary as a whole overran its deadline: leaving aborts the request (a stall between
      // chunks is the summarizer's own idle limit, reported through onError).
      after: { summaryDeadline: { target: 'closing', actions: 'fail summary timeout' } },
    },
    // The model-free checkpoint: the span's ledger, written from its events (no request, nothing to wait for).
    truncating: {
      invoke: {
        src: 'truncate',
        input: ({ context }) => ({ range: context.range, reason: context.truncation! }),
        onDone: { target: 'revalidating', actions: 'remember summary' },
        onError: { target: 'closing', actions: 'fail from truncation' },
      },
      on: { cancel: { target: 'closing', actions: 'fail cancelled' } },
    },
    revalidating: {
      invoke: {
        src: 'revalidate',
        input: ({ context }) => ({
          range: context.range,
          mode: context.mode,
          snapshot: context.snapshot!,
          summary: context.summary!,
        }),
        onDone: [
          { guard: 'surface changed', target: 'closing', actions: 'fail changed' },
          { guard: 'checkpoint does not shrink the span', target: 'closing', actions: 'fail no shrink' },
          { guard: 'too little progress', target: 'closing', actions: 'fail no progress' },
          { target: 'committing' },
        ],
        onError: { target: 'closing', actions: 'fail from revalidation' },
      },
      on: { cancel: { target: 'closing', actions: 'fail cancelled' } },
    },
    committing: {
      // The commit appends its three events with no await in between; cancel is too late here.
      invoke: {
        src: 'commit',
        input: ({ context }) => ({
          range: context.range,
          startSeq: context.startSeq!,
          summary: context.summary!,
          turn: context.turn,
          ...(context.opened ? { opened: context.opened } : {}),
        }),
        onDone: { target: 'flushing', actions: 'remember commit' },
        onError: { target: 'closing', actions: 'fail from commit' },
      },
    },
    flushing: {
      invoke: {
        src: 'flush',
        input: ({ context }) => ({ trigger: context.trigger }),
        onDone: { target: 'committed', actions: { type: 'notify', params: { what: 'committed' } } },
        onError: { target: 'persistenceFailed', actions: ['fail from flush', { type: 'notify', params: { what: 'failed' } }] },
      },
    },
    closing: {
      invoke: {
        src: 'closeWithError',
        input: ({ context }) => ({ startSeq: context.startSeq!, turn: context.turn, error: context.error! }),
        onDone: { target: 'failed', actions: { type: 'notify', params: { what: 'failed' } } },
        // Even a failed close ends here: the orphan compaction/start then keeps reporting busy.
        onError: { target: 'failed', actions: { type: 'notify', params: { what: 'failed' } } },
      },
    },
    committed: { type: 'final' },
    persistenceFailed: { type: 'final' },
    failed: { type: 'final' },
    rejected: { type: 'final' },
  },
  output: ({ context }): TransactionOutput =>
    context.commit && !context.error
      ? { status: 'committed', trigger: context.trigger, range: context.range, commit: context.commit, summary: context.summary! }
      : {
          status: 'failed',
          trigger: context.trigger,
          range: context.range,
          error: context.error ?? { code: 'internal', message: 'the transaction ended without a result' },
          startSeq: context.startSeq,
        },
});
