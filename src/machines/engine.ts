/**
 * The engine: the root actor an agent loop talks to. Two parallel regions.
 *
 * work — one job at a time:
 *   idle ─ step.completed ─▶ pressure   (unless auto is off, or the breaker is open)
 *        ─ request.failed ─▶ overflow
 *        ─ compact.requested ─▶ manual
 *   A request that arrives while a job runs is answered `busy` at once.
 *
 * breaker — a circuit breaker for automatic compaction:
 *   closed ─ failureLimit consecutive failed automatic compactions ─▶ open
 *   open ─ a success (manual or automatic) or the cool-down ─▶ closed
 *   While open, pressure compaction is paused (overflow recovery still runs: without it
 *   the agent cannot continue at all).
 *
 * Every request carries an id; its result is emitted as `request.settled`.
 */
import { assign, emit, enqueueActions, raise, sendTo, setup, stateIn } from 'xstate';
import { manualMachine, type ManualOutput } from './manual';
import { overflowMachine, type OverflowOutput } from './overflow';
import { pressureMachine, type PressureOutput } from './pressure';
import { errorOf, outputOf, toErrorInfo, type ErrorInfo } from './types';

export interface EngineInput {
  auto: boolean;
  pruneEnabled: boolean;
  maxAttempts: number;
  maxOverflowRetries: number;
  failureLimit: number;
  cooldownMs: number;
}

export type EngineRequest =
  | { type: 'step.completed'; id: string; turn: number | null; aborted: boolean }
  | { type: 'request.failed'; id: string; error: unknown; turn: number | null; aborted: boolean; lastAssistantSeq: number }
  | { type: 'compact.requested'; id: string; aborted: boolean; abortReason: string | undefined; focus: string | undefined }
  | { type: 'cancel'; id: string };

type InternalEvent = { type: 'breaker.failure' } | { type: 'breaker.success' };
export type EngineEvent = EngineRequest | InternalEvent;

export type SettledResult =
  | { kind: 'pressure'; output: PressureOutput }
  | { kind: 'overflow'; output: OverflowOutput }
  | { kind: 'manual'; output: ManualOutput }
  | { kind: 'busy'; running: 'pressure' | 'overflow' | 'manual' }
  | { kind: 'auto-off' }
  | { kind: 'paused'; consecutiveFailures: number }
  /** A chart itself failed (a bug, not a service failure): the engine stays usable. */
  | { kind: 'error'; error: ErrorInfo };

export type EngineEmitted =
  | { type: 'request.settled'; id: string; result: SettledResult }
  | { type: 'breaker.opened'; consecutiveFailures: number; cooldownMs: number }
  | { type: 'breaker.closed'; why: 'success' | 'cooldown' }
  | { type: 'capacity.missing'; provider: string; model: string; message: string };

export interface EngineContext extends EngineInput {
  current: { id: string; kind: 'pressure' | 'overflow' | 'manual' } | undefined;
  pending: EngineRequest | undefined;
  consecutiveFailures: number;
  overflowRetries: number;
  /** Seq of the latest assistant message when the last overflow retry was granted. */
  retryAnchorSeq: number;
  warnedModels: string[];
}

/**
 * A failed automatic compaction, as the breaker counts it. `busy` (another compaction holds the
 * lock) and `cancelled` are not failures of compaction: pausing it would not help.
 */
function automaticFailure(out: PressureOutput | OverflowOutput): boolean {
  const notCounted = (code: string | undefined) => code === 'busy' || code === 'cancelled';
  if ('status' in out) return out.status === 'failed' && !notCounted(out.error?.code);
  return out.transaction?.status === 'failed' && !notCounted(out.transaction.error.code);
}

function automaticSuccess(out: PressureOutput | OverflowOutput): boolean {
  if ('status' in out) {
    // A commit kept after a late cancel is a success too.
    return out.status === 'compacted' || out.status === 'relieved-by-pruning' || out.transactions.some((t) => t.status === 'committed');
  }
  return out.action === 'retry';
}

export const engineMachine = setup({
  types: {
    context: {} as EngineContext,
    events: {} as EngineEvent,
    input: {} as EngineInput,
    emitted: {} as EngineEmitted,
  },
  actors: {
    pressure: pressureMachine,
    overflow: overflowMachine,
    manual: manualMachine,
  },
  delays: {
    cooldown: ({ context }) => context.cooldownMs,
  },
  guards: {
    'automatic compaction is off': ({ context }) => !context.auto,
    'breaker is open': stateIn({ breaker: 'open' }),
    'is the running request': ({ context, event }) => event.type === 'cancel' && context.current?.id === event.id,
    'this failure reaches the limit': ({ context }) => context.consecutiveFailures + 1 >= context.failureLimit,
    'automatic compaction failed': ({ event }) => automaticFailure(outputOf<PressureOutput | OverflowOutput>(event)),
    'automatic compaction succeeded': ({ event }) => automaticSuccess(outputOf<PressureOutput | OverflowOutput>(event)),
    'manual compaction committed': ({ event }) => outputOf<ManualOutput>(event).status === 'committed',
    'first warning for this model': ({ context, event }) => {
      const s = outputOf<PressureOutput>(event).skipped;
      return s !== undefined && !context.warnedModels.includes(`${s.provider}/${s.model}`);
    },
    'retry granted': ({ event }) => outputOf<OverflowOutput>(event).action === 'retry',
  },
  actions: {
    'start job': assign({
      current: ({ event }) => {
        const kind = event.type === 'step.completed' ? 'pressure' : event.type === 'request.failed' ? 'overflow' : 'manual';
        return { id: (event as EngineRequest).id, kind } as const;
      },
      pending: ({ event }) => event as EngineRequest,
    }),
    'reset overflow retries after a success': assign({
      overflowRetries: ({ context, event }) =>
        event.type === 'request.failed' && event.lastAssistantSeq > context.retryAnchorSeq ? 0 : context.overflowRetries,
    }),
    'count overflow retry': assign({
      overflowRetries: ({ context }) => context.overflowRetries + 1,
      retryAnchorSeq: ({ context }) => (context.pending?.type === 'request.failed' ? context.pending.lastAssistantSeq : context.retryAnchorSeq),
    }),
    'settle job': emit(({ context, event }) => {
      const kind = context.current!.kind;
      return {
        type: 'request.settled' as const,
        id: context.current!.id,
        result: { kind, output: outputOf(event) } as SettledResult,
      };
    }),
    'settle job with chart error': emit(({ context, event }) => ({
      type: 'request.settled' as const,
      id: context.current!.id,
      result: { kind: 'error', error: toErrorInfo(errorOf(event), 'internal') } as SettledResult,
    })),
    'finish job': assign({ current: undefined, pending: undefined }),
    'answer busy': emit(({ context, event }) => ({
      type: 'request.settled' as const,
      id: (event as EngineRequest).id,
      result: { kind: 'busy', running: context.current!.kind } as SettledResult,
    })),
    'answer auto off': emit(({ event }) => ({
      type: 'request.settled' as const,
      id: (event as EngineRequest).id,
      result: { kind: 'auto-off' } as SettledResult,
    })),
    'answer paused': emit(({ context, event }) => ({
      type: 'request.settled' as const,
      id: (event as EngineRequest).id,
      result: { kind: 'paused', consecutiveFailures: context.consecutiveFailures } as SettledResult,
    })),
    'warn missing capacity': enqueueActions(({ context, event, enqueue }) => {
      const s = outputOf<PressureOutput>(event).skipped!;
      enqueue.assign({ warnedModels: [...context.warnedModels, `${s.provider}/${s.model}`] });
      enqueue.emit({ type: 'capacity.missing', provider: s.provider, model: s.model, message: s.message });
    }),
    'report failure to breaker': raise({ type: 'breaker.failure' }),
    'report success to breaker': raise({ type: 'breaker.success' }),
    'count failure': assign({ consecutiveFailures: ({ context }) => context.consecutiveFailures + 1 }),
    'reset failures': assign({ consecutiveFailures: 0 }),
    'announce breaker opened': emit(({ context }) => ({
      type: 'breaker.opened' as const,
      consecutiveFailures: context.consecutiveFailures,
      cooldownMs: context.cooldownMs,
    })),
    'announce breaker closed': emit((_, params: { why: 'success' | 'cooldown' }) => ({ type: 'breaker.closed' as const, why: params.why })),
    'forward cancel': sendTo('job', { type: 'cancel' }),
  },
}).createMachine({
  id: 'engine',
  type: 'parallel',
  context: ({ input }) => ({
    ...input,
    current: undefined,
    pending: undefined,
    consecutiveFailures: 0,
    overflowRetries: 0,
    retryAnchorSeq: -1,
    warnedModels: [],
  }),
  states: {
    work: {
      initial: 'idle',
      states: {
        idle: {
          on: {
            'step.completed': [
              { guard: 'automatic compaction is off', actions: 'answer auto off' },
              { guard: 'breaker is open', actions: 'answer paused' },
              { target: 'pressure', actions: 'start job' },
            ],
            'request.failed': { target: 'overflow', actions: ['reset overflow retries after a success', 'start job'] },
            'compact.requested': { target: 'manual', actions: 'start job' },
          },
        },
        pressure: {
          invoke: {
            id: 'job',
            src: 'pressure',
            input: ({ context }) => ({
              turn: context.pending?.type === 'step.completed' ? context.pending.turn : null,
              aborted: context.pending?.type === 'step.completed' ? context.pending.aborted : false,
              pruneEnabled: context.pruneEnabled,
              maxAttempts: context.maxAttempts,
            }),
            onDone: [
              {
                guard: 'automatic compaction failed',
                target: 'idle',
                actions: ['report failure to breaker', 'settle job', 'finish job'],
              },
              {
                guard: 'automatic compaction succeeded',
                target: 'idle',
                actions: ['report success to breaker', 'settle job', 'finish job'],
              },
              { guard: 'first warning for this model', target: 'idle', actions: ['warn missing capacity', 'settle job', 'finish job'] },
              { target: 'idle', actions: ['settle job', 'finish job'] },
            ],
            onError: { target: 'idle', actions: ['settle job with chart error', 'finish job'] },
          },
        },
        overflow: {
          invoke: {
            id: 'job',
            src: 'overflow',
            input: ({ context }) => {
              const p = context.pending as Extract<EngineRequest, { type: 'request.failed' }>;
              return {
                error: p.error,
                retriesUsed: context.overflowRetries,
                maxRetries: context.maxOverflowRetries,
                auto: context.auto,
                pruneEnabled: context.pruneEnabled,
                aborted: p.aborted,
                turn: p.turn,
              };
            },
            onDone: [
              {
                guard: 'retry granted',
                target: 'idle',
                actions: ['count overflow retry', 'report success to breaker', 'settle job', 'finish job'],
              },
              {
                guard: 'automatic compaction failed',
                target: 'idle',
                actions: ['report failure to breaker', 'settle job', 'finish job'],
              },
              { target: 'idle', actions: ['settle job', 'finish job'] },
            ],
            onError: { target: 'idle', actions: ['settle job with chart error', 'finish job'] },
          },
        },
        manual: {
          invoke: {
            id: 'job',
            src: 'manual',
            input: ({ context }) => {
              const p = context.pending as Extract<EngineRequest, { type: 'compact.requested' }>;
              return { aborted: p.aborted, abortReason: p.abortReason, focus: p.focus };
            },
            onDone: [
              { guard: 'manual compaction committed', target: 'idle', actions: ['report success to breaker', 'settle job', 'finish job'] },
              { target: 'idle', actions: ['settle job', 'finish job'] },
            ],
            onError: { target: 'idle', actions: ['settle job with chart error', 'finish job'] },
          },
        },
      },
      on: {
        cancel: { guard: 'is the running request', actions: 'forward cancel' },
        'step.completed': { actions: 'answer busy' },
        'request.failed': { actions: 'answer busy' },
        'compact.requested': { actions: 'answer busy' },
      },
    },
    breaker: {
      initial: 'closed',
      states: {
        closed: {
          on: {
            'breaker.failure': [
              { guard: 'this failure reaches the limit', target: 'open', actions: ['count failure', 'announce breaker opened'] },
              { actions: 'count failure' },
            ],
            'breaker.success': { actions: 'reset failures' },
          },
        },
        open: {
          after: {
            cooldown: { target: 'closed', actions: ['reset failures', { type: 'announce breaker closed', params: { why: 'cooldown' } }] },
          },
          on: {
            'breaker.success': { target: 'closed', actions: ['reset failures', { type: 'announce breaker closed', params: { why: 'success' } }] },
            'breaker.failure': { actions: 'count failure' },
          },
        },
      },
    },
  },
});
