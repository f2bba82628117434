/**
 * Overflow recovery: the provider rejected a request as too long.
 *
 *   classifying ─ not an overflow / recovery off / retries used up / cancelled ▶ declined
 *   probingLock ─ another compaction holds the lock ▶ declined   (checked before pruning)
 *       │ free: snapshot replaceGeneration
 *   pruning (if enabled; every oversized result, the newest included: the request must fit;
 *            one that throws is announced as prune.failed, and selection goes on)
 *   selecting (maximal balanced head: only the newest unit stays) ─ nothing ▶ deciding
 *       └ summaries unavailable (the breaker is open) ▶ truncating
 *   compacting (transaction) ─ the summarizer could not help (its summary failed, or came back
 *       │ over its cap) ▶ truncating (the model-free last resort: a truncation checkpoint of the
 *       │ same span, the ledger alone) ▶ deciding
 *   deciding ─ generation advanced (or a background commit landed while the job waited) and not cancelled ▶ retry
 *            └ otherwise ▶ declined (the caller keeps the original error), with the reason:
 *              summary-failed, busy, stuck (nothing to compact: announced as compaction.skipped)
 *              or no-progress
 */
import { assign, sendTo, setup } from 'xstate';
import type { RequestErrorClass } from '../services/overflow';
import type { RangeSelection } from '../services/selection';
import { transactionMachine } from './transaction';
import {
  announceAction,
  announcePruneFailure,
  notProvided,
  outputOf,
  truncationAfter,
  type ChartNotification,
  type LockProbe,
  type PruneInput,
  type PruneSummary,
  type SelectInput,
  type TransactionOutput,
  type TruncationReason,
} from './types';

export interface OverflowInput {
  error: unknown;
  /** Overflow retries already granted since the last successful assistant message. */
  retriesUsed: number;
  maxRetries: number;
  /** `auto: false` turns overflow recovery off along with pressure compaction. */
  auto: boolean;
  /** `prune.enabled: false` (or `pruner: false`) leaves tool output alone here too. */
  pruneEnabled: boolean;
  /** The caller's signal was already aborted when the error was reported. */
  aborted: boolean;
  turn: number | null;
  /** The error was classified as no context overflow before the job (the gate then does not wait for a background summary). */
  notOverflow?: boolean;
  /**
   * A background summary was committed while this job waited for it (the gate): the request the
   * provider refused was built before that commit, so a retry sends a smaller one even when
   * recovery itself finds nothing more to compact.
   */
  relievedBefore?: boolean;
  /** Summaries cannot help (the engine's circuit breaker is open): recovery truncates, model-free. */
  modelFree?: boolean;
  /** Config `truncationFallback: false`: no truncation stands in for a summary that failed (absent: on). */
  fallback?: boolean;
}

/**
 * Why recovery declined. After recovery ran: `summary-failed` (the summary request failed, or its
 * summary was unusable), `stuck` (nothing could be compacted: the newest unit alone is too big),
 * `busy` (another writer took the lock), `no-progress` (anything else that left the surface as it was).
 */
export type DeclineReason = 'not-overflow' | 'disabled' | 'retries-exhausted' | 'busy' | 'no-progress' | 'summary-failed' | 'stuck' | 'cancelled' | 'internal';

/**
 * `transaction`: the last one (a truncation's, when one stood in); `summaryFailure`: the
 * transaction whose summary failed before a truncation stood in for it (the breaker counts it).
 */
export type OverflowOutput =
  | {
      action: 'retry';
      classification: RequestErrorClass;
      prune: PruneSummary | undefined;
      transaction: TransactionOutput | undefined;
      summaryFailure?: TransactionOutput;
      /** Recovery asked no model (the breaker was open). */
      modelFree?: true;
    }
  | {
      action: 'fail';
      reason: DeclineReason;
      classification: RequestErrorClass | undefined;
      prune: PruneSummary | undefined;
      transaction: TransactionOutput | undefined;
      summaryFailure?: TransactionOutput;
      modelFree?: true;
    };

export interface OverflowContext {
  error: unknown;
  retriesUsed: number;
  maxRetries: number;
  auto: boolean;
  pruneEnabled: boolean;
  cancelled: boolean;
  turn: number | null;
  classification: RequestErrorClass | undefined;
  generationBefore: number | undefined;
  /** OverflowInput.relievedBefore. */
  relievedBefore: boolean;
  prune: PruneSummary | undefined;
  range: RangeSelection | undefined;
  transaction: TransactionOutput | undefined;
  reason: DeclineReason | undefined;
  /** Selection found nothing to compact. */
  nothingToCompact: boolean;
  modelFree: boolean;
  fallback: boolean;
  truncation: TruncationReason | undefined;
  summaryFailure: TransactionOutput | undefined;
}

export type OverflowEvent = { type: 'cancel'; reason?: string };

const announcePrune = announceAction<OverflowContext, OverflowEvent>(({ event }) => {
  const p = outputOf<PruneSummary>(event);
  return p.count > 0 ? { type: 'pruned', trigger: 'overflow', count: p.count, tokensFreed: p.tokensFreed } : undefined;
});

function reasonAfterRecovery(context: OverflowContext): DeclineReason {
  if (context.cancelled) return 'cancelled';
  const tx = context.transaction;
  if (tx?.status === 'failed') {
    if (tx.error.code === 'busy') return 'busy';
    if (tx.error.code === 'summary') return 'summary-failed';
  }
  if (context.nothingToCompact) return 'stuck';
  return 'no-progress';
}

const announceStuck = announceAction<OverflowContext, OverflowEvent>(({ context }) =>
  context.reason === 'stuck'
    ? {
        type: 'compaction.skipped',
        trigger: 'overflow',
        reason: 'the request overflows, but nothing can be compacted (the newest unit alone exceeds the window)',
      }
    : undefined,
);

export const overflowMachine = setup({
  types: {
    context: {} as OverflowContext,
    events: {} as OverflowEvent,
    input: {} as OverflowInput,
    output: {} as OverflowOutput,
    emitted: {} as ChartNotification,
  },
  actors: {
    classify: notProvided<RequestErrorClass, { error: unknown }>('classify'),
    probeLock: notProvided<LockProbe, { purpose: 'admit' | 'decide' }>('probeLock'),
    prune: notProvided<PruneSummary, PruneInput>('prune'),
    selectRange: notProvided<RangeSelection | null, SelectInput>('selectRange'),
    transaction: transactionMachine,
  },
  guards: {
    'not a context overflow': ({ event }) => outputOf<RequestErrorClass>(event).kind !== 'context-overflow',
    'recovery is disabled': ({ context }) => !context.auto || context.maxRetries === 0,
    'retries are used up': ({ context }) => context.retriesUsed >= context.maxRetries,
    cancelled: ({ context }) => context.cancelled,
    'lock is held': ({ event }) => outputOf<LockProbe>(event).held,
    'pruning is disabled': ({ context }) => !context.pruneEnabled,
    'nothing to compact': ({ event }) => outputOf<RangeSelection | null>(event) === null,
    'summaries are unavailable': ({ context }) => context.modelFree,
    'the summarizer could not help': ({ context, event }) =>
      context.fallback && !context.cancelled && truncationAfter(outputOf<TransactionOutput>(event)) !== undefined,
    'generation advanced': ({ context, event }) =>
      !context.cancelled &&
      (context.relievedBefore || (context.generationBefore !== undefined && outputOf<LockProbe>(event).generation > context.generationBefore)),
  },
  actions: {
    'remember classification': assign({ classification: ({ event }) => outputOf<RequestErrorClass>(event) }),
    'snapshot generation': assign({ generationBefore: ({ event }) => outputOf<LockProbe>(event).generation }),
    'remember prune': assign({ prune: ({ event }) => outputOf<PruneSummary>(event) }),
    'announce prune': announcePrune,
    'announce prune failure': announcePruneFailure<OverflowContext, OverflowEvent>('overflow'),
    'remember range': assign({ range: ({ event }) => outputOf<RangeSelection>(event) }),
    'remember transaction': assign({ transaction: ({ event }) => outputOf<TransactionOutput>(event) }),
    'truncate for the open breaker': assign({ truncation: 'breaker-open' as const }),
    'truncate after the summary': assign({
      truncation: ({ event }) => truncationAfter(outputOf<TransactionOutput>(event)),
      summaryFailure: ({ event }) => outputOf<TransactionOutput>(event),
    }),
    'mark cancelled': assign({ cancelled: true }),
    'forward cancel': sendTo('transaction', ({ event }) => ({ type: 'cancel' as const, ...(event.reason !== undefined ? { reason: event.reason } : {}) })),
    'close abandoned bracket': () => {
      // Provided by the engine: a transaction chart that failed may have left its lock taken.
    },
    decline: assign({ reason: (_, params: { reason: DeclineReason }) => params.reason }),
    'decline after recovery': assign({ reason: ({ context }) => reasonAfterRecovery(context) }),
    'announce stuck': announceStuck,
    'remember nothing to compact': assign({ nothingToCompact: true }),
  },
}).createMachine({
  id: 'overflow',
  context: ({ input }) => ({
    error: input.error,
    retriesUsed: input.retriesUsed,
    maxRetries: input.maxRetries,
    auto: input.auto,
    pruneEnabled: input.pruneEnabled,
    cancelled: input.aborted,
    turn: input.turn,
    classification: undefined,
    generationBefore: undefined,
    relievedBefore: input.relievedBefore === true,
    prune: undefined,
    range: undefined,
    transaction: undefined,
    reason: undefined,
    nothingToCompact: false,
    modelFree: input.modelFree === true,
    fallback: input.fallback !== false,
    truncation: undefined,
    summaryFailure: undefined,
  }),
  initial: 'classifying',
  // Cancellation never interrupts a step that already wrote; it stops the next one from authorising a retry.
  on: { cancel: { actions: 'mark cancelled' } },
  states: {
    classifying: {
      invoke: {
        src: 'classify',
        input: ({ context }) => ({ error: context.error }),
        onDone: [
          {
            guard: 'not a context overflow',
            target: 'declined',
            actions: ['remember classification', { type: 'decline', params: { reason: 'not-overflow' } }],
          },
          { guard: 'recovery is disabled', target: 'declined', actions: ['remember classification', { type: 'decline', params: { reason: 'disabled' } }] },
          {
            guard: 'retries are used up',
            target: 'declined',
            actions: ['remember classification', { type: 'decline', params: { reason: 'retries-exhausted' } }],
          },
          { guard: 'cancelled', target: 'declined', actions: ['remember classification', { type: 'decline', params: { reason: 'cancelled' } }] },
          { target: 'probingLock', actions: 'remember classification' },
        ],
        onError: { target: 'declined', actions: { type: 'decline', params: { reason: 'internal' } } },
      },
    },
    probingLock: {
      invoke: {
        src: 'probeLock',
        input: { purpose: 'admit' },
        onDone: [
          { guard: 'cancelled', target: 'declined', actions: { type: 'decline', params: { reason: 'cancelled' } } },
          { guard: 'lock is held', target: 'declined', actions: { type: 'decline', params: { reason: 'busy' } } },
          { guard: 'pruning is disabled', target: 'selecting', actions: 'snapshot generation' },
          { target: 'pruning', actions: 'snapshot generation' },
        ],
        onError: { target: 'declined', actions: { type: 'decline', params: { reason: 'internal' } } },
      },
    },
    pruning: {
      invoke: {
        src: 'prune',
        input: { trigger: 'overflow', protectRecent: false },
        onDone: [
          { guard: 'cancelled', target: 'deciding', actions: ['remember prune', 'announce prune'] },
          { target: 'selecting', actions: ['remember prune', 'announce prune'] },
        ],
        // A failed prune is an optimisation that failed: announced, and compaction still runs.
        onError: { target: 'selecting', actions: 'announce prune failure' },
      },
    },
    selecting: {
      invoke: {
        src: 'selectRange',
        input: { purpose: 'overflow', attempt: 1, retain: 'newest-unit', stackCheckpoints: false },
        onDone: [
          { guard: 'cancelled', target: 'deciding' },
          { guard: 'nothing to compact', target: 'deciding', actions: 'remember nothing to compact' },
          { guard: 'summaries are unavailable', target: 'truncating', actions: ['remember range', 'truncate for the open breaker'] },
          { target: 'compacting', actions: 'remember range' },
        ],
        onError: { target: 'deciding' },
      },
    },
    compacting: {
      invoke: {
        id: 'transaction',
        src: 'transaction',
        input: ({ context }) => ({ trigger: 'overflow' as const, mode: 'automatic' as const, range: context.range!, turn: context.turn }),
        onDone: [
          // The summary failed or came back over its cap: the model-free last resort, on the same span.
          { guard: 'the summarizer could not help', target: 'truncating', actions: ['remember transaction', 'truncate after the summary'] },
          { target: 'deciding', actions: 'remember transaction' },
        ],
        // A bug inside the transaction chart: pruning may still have advanced the surface.
        onError: { target: 'deciding', actions: 'close abandoned bracket' },
      },
      on: { cancel: { actions: ['mark cancelled', 'forward cancel'] } },
    },
    // A truncation checkpoint of the span (the ledger alone), recorded like any other.
    truncating: {
      invoke: {
        id: 'transaction',
        src: 'transaction',
        input: ({ context }) => ({
          trigger: 'overflow' as const,
          mode: 'automatic' as const,
          range: context.range!,
          turn: context.turn,
          truncation: context.truncation!,
        }),
        onDone: { target: 'deciding', actions: 'remember transaction' },
        onError: { target: 'deciding', actions: 'close abandoned bracket' },
      },
      on: { cancel: { actions: ['mark cancelled', 'forward cancel'] } },
    },
    deciding: {
      invoke: {
        src: 'probeLock',
        input: { purpose: 'decide' },
        onDone: [
          { guard: 'generation advanced', target: 'retry' },
          { target: 'declined', actions: ['decline after recovery', 'announce stuck'] },
        ],
        onError: { target: 'declined', actions: { type: 'decline', params: { reason: 'internal' } } },
      },
    },
    retry: { type: 'final' },
    declined: { type: 'final' },
  },
  output: ({ context }): OverflowOutput =>
    context.reason === undefined && context.classification
      ? {
          action: 'retry',
          classification: context.classification,
          prune: context.prune,
          transaction: context.transaction,
          ...(context.summaryFailure ? { summaryFailure: context.summaryFailure } : {}),
          ...(context.modelFree ? { modelFree: true as const } : {}),
        }
      : {
          action: 'fail',
          reason: context.reason ?? 'internal',
          classification: context.classification,
          prune: context.prune,
          transaction: context.transaction,
          ...(context.summaryFailure ? { summaryFailure: context.summaryFailure } : {}),
          ...(context.modelFree ? { modelFree: true as const } : {}),
        },
});
