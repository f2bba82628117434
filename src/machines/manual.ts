/**
 * Manual compaction (`compactNow`, the `/compact` command): everything but the newest unit.
 *
 *   checkingSignal ─ already aborted ▶ cancelled (nothing written)
 *   admitting ─ a turn is open, or the lock is held ▶ busy
 *   selecting ─ nothing to compact ▶ nothing (null, nothing written)
 *   compacting (transaction: mode manual, turn null, no pruning) ─ committed ▶ committed
 *                                                                └ failed ▶ failed
 */
import { assign, sendTo, setup } from 'xstate';
import type { RangeSelection } from '../services/selection';
import { transactionMachine } from './transaction';
import { errorOf, notProvided, outputOf, toErrorInfo, type ErrorInfo, type SelectInput, type TransactionOutput } from './types';

export interface ManualInput {
  /** The caller's signal was already aborted. */
  aborted: boolean;
  abortReason: string | undefined;
  focus: string | undefined;
}

export type ManualOutput =
  | { status: 'committed'; transaction: Extract<TransactionOutput, { status: 'committed' }> }
  | { status: 'nothing' }
  | { status: 'failed'; error: ErrorInfo; transaction: TransactionOutput | undefined };

export interface ManualContext extends ManualInput {
  range: RangeSelection | undefined;
  transaction: TransactionOutput | undefined;
  error: ErrorInfo | undefined;
}

export type ManualEvent = { type: 'cancel'; reason?: string };

export interface Admission {
  openTurn: number | null;
  lockHeld: boolean;
}

export const manualMachine = setup({
  types: {
    context: {} as ManualContext,
    events: {} as ManualEvent,
    input: {} as ManualInput,
    output: {} as ManualOutput,
  },
  actors: {
    checkAdmission: notProvided<Admission, { purpose: 'manual' }>('checkAdmission'),
    selectRange: notProvided<RangeSelection | null, SelectInput>('selectRange'),
    transaction: transactionMachine,
  },
  guards: {
    'signal already aborted': ({ context }) => context.aborted,
    'a turn is open': ({ event }) => outputOf<Admission>(event).openTurn !== null,
    'lock is held': ({ event }) => outputOf<Admission>(event).lockHeld,
    'nothing to compact': ({ event }) => outputOf<RangeSelection | null>(event) === null,
    'transaction committed': ({ event }) => outputOf<TransactionOutput>(event).status === 'committed',
  },
  actions: {
    'fail cancelled before start': assign({
      error: ({ context }): ErrorInfo => ({ code: 'cancelled', message: context.abortReason ?? 'the signal was already aborted' }),
    }),
    'fail busy with open turn': assign({
      error: ({ event }): ErrorInfo => ({
        code: 'busy',
        message: `turn ${outputOf<Admission>(event).openTurn} is open: /compact runs only between turns`,
      }),
    }),
    'fail busy with lock': assign({
      error: (): ErrorInfo => ({
        code: 'busy',
        message: 'another compaction holds the lock (an unmatched compaction/start); if its process is gone, call session.recover()',
      }),
    }),
    'remember range': assign({ range: ({ event }) => outputOf<RangeSelection>(event) }),
    'remember transaction': assign({ transaction: ({ event }) => outputOf<TransactionOutput>(event) }),
    'fail from transaction': assign({
      error: ({ event }) => {
        const out = outputOf<TransactionOutput>(event);
        return out.status === 'failed' ? out.error : undefined;
      },
    }),
    'forward cancel': sendTo('transaction', ({ event }) => ({ type: 'cancel' as const, ...(event.reason !== undefined ? { reason: event.reason } : {}) })),
    'close abandoned bracket': () => {
      // Provided by the engine: a transaction chart that failed may have left its lock taken.
    },
    'fail cancelled': assign({
      error: ({ event }): ErrorInfo => ({
        code: 'cancelled',
        message: event.type === 'cancel' && event.reason !== undefined ? `the compaction was cancelled: ${event.reason}` : 'the compaction was cancelled',
      }),
    }),
    'fail internally': assign({ error: ({ event }): ErrorInfo => toErrorInfo(errorOf(event), 'internal') }),
  },
}).createMachine({
  id: 'manual',
  context: ({ input }) => ({ ...input, range: undefined, transaction: undefined, error: undefined }),
  initial: 'checkingSignal',
  states: {
    checkingSignal: {
      always: [{ guard: 'signal already aborted', target: 'cancelled', actions: 'fail cancelled before start' }, { target: 'admitting' }],
    },
    admitting: {
      invoke: {
        src: 'checkAdmission',
        input: { purpose: 'manual' },
        onDone: [
          { guard: 'a turn is open', target: 'busy', actions: 'fail busy with open turn' },
          { guard: 'lock is held', target: 'busy', actions: 'fail busy with lock' },
          { target: 'selecting' },
        ],
        onError: { target: 'failed', actions: 'fail internally' },
      },
      on: { cancel: { target: 'cancelled', actions: 'fail cancelled' } },
    },
    selecting: {
      invoke: {
        src: 'selectRange',
        input: { purpose: 'manual', attempt: 1, retain: 'newest-unit', stackCheckpoints: false },
        onDone: [
          { guard: 'nothing to compact', target: 'nothing' },
          { target: 'compacting', actions: 'remember range' },
        ],
        onError: { target: 'failed', actions: 'fail internally' },
      },
      on: { cancel: { target: 'cancelled', actions: 'fail cancelled' } },
    },
    compacting: {
      invoke: {
        id: 'transaction',
        src: 'transaction',
        input: ({ context }) => ({
          trigger: 'manual' as const,
          mode: 'manual' as const,
          range: context.range!,
          turn: null,
          ...(context.focus === undefined ? {} : { focus: context.focus }),
        }),
        onDone: [
          { guard: 'transaction committed', target: 'committed', actions: 'remember transaction' },
          { target: 'failed', actions: ['remember transaction', 'fail from transaction'] },
        ],
        onError: { target: 'failed', actions: ['fail internally', 'close abandoned bracket'] },
      },
      on: { cancel: { actions: 'forward cancel' } },
    },
    cancelled: { type: 'final' },
    busy: { type: 'final' },
    nothing: { type: 'final' },
    committed: { type: 'final' },
    failed: { type: 'final' },
  },
  output: ({ context }): ManualOutput => {
    const tx = context.transaction;
    if (tx?.status === 'committed' && !context.error) return { status: 'committed', transaction: tx };
    if (!context.error) return { status: 'nothing' };
    return { status: 'failed', error: context.error, transaction: tx };
  },
});
