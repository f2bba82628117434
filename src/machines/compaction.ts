/**
 * The engine: the root actor an agent loop talks to. Two parallel regions.
 *
 * work — one job at a time:
 *   idle ─ step.completed ─▶ pressure   (unless auto is off, or the breaker is open)
 *        ─ request.ready ─▶ fitting     (the request about to be sent: cut to fit, or refused)
 *        ─ request.failed ─▶ overflow
 *        ─ compact.requested ─▶ manual
 *   A request that arrives while a job runs is answered `busy` at once.
 *
 * breaker — a circuit breaker for automatic compaction:
 *   closed ─ failureLimit consecutive failed automatic compactions ─▶ open
 *   open ─ a success (manual or automatic) or the cool-down ─▶ closed
 *   While open, no summary is asked for: pressure compaction and overflow recovery run
 *   model-free (a prune, then a truncation checkpoint of the oldest whole turns: the ledger
 *   alone), so the agent goes on and no request goes over the window. A truncation that
 *   stood in for a failed summary counts as a failure; nothing a model-free job does counts
 *   as a success (only a manual compaction's summary, or the cool-down, closes the breaker).
 *
 * Every request carries an id; its result is emitted as `request.settled`. The charts'
 * notifications (compaction.*, pruned, overflow.silent) reach this chart as `xcompact.notify`
 * and are emitted here. Each emitted event is also sent to the parent actor, if any: a host
 * machine that invokes this chart gets results and notifications as events, no promises.
 *
 * `shutdown` is a graceful stop: the running job is stopped (its summary request aborted),
 * a bracket its transaction left open is closed `cancelled`, and the chart ends.
 */
import { and, assign, enqueueActions, not, raise, sendTo, setup, stateIn, type EventObject } from 'xstate';
import { BACKGROUND_SYSTEM_ID, backgroundMachine } from './background';
import { manualMachine, type ManualOutput } from './manual';
import { overflowMachine, type OverflowOutput } from './overflow';
import { pressureMachine, restingOutput, type PressureOutput } from './pressure';
import { fitMachine, type FitOutput } from './fit';
import { errorOf, NOTIFY, outputOf, toErrorInfo, truncated, truncationAfter, type NotifyEvent, type PressureReading } from './types';
import type { AnyActorRef } from 'xstate';
import type { RoutePolicy } from '../services/core';
import type { ChartNotification, ErrorInfo } from './types';

// ── The chart's contract: input, context, events, output ──
/*
 * The engine chart's contract (engine.ts): its input and the config's defaults, the requests
 * and events it takes, the results and announcements it emits, and its context.
 */
/** `auto`, `maxAttempts`, `maxOverflowRetries`: the policy used where no route policy is looked up. */
export type { RoutePolicy };
export interface EngineInput extends RoutePolicy {
  /** Background compaction (docs/spec.md#13-background-compaction) on for some route: the engine keeps a background chart. */
  background?: boolean;
  pruneEnabled: boolean;
  failureLimit: number;
  cooldownMs: number;
  /** Config `truncationFallback`: the model-free last resort when the summarizer cannot help (default on). */
  truncationFallback?: boolean;
}

export type EngineRequest =
  | { type: 'step.completed'; id: string; turn: number | null; aborted: boolean }
  /**
   * `overflow`: the error reads as a context overflow (the host's classification, `classifyRequestError`);
   * false: the job does not wait for a background summary only to decline. Absent: it may be one.
   */
  | { type: 'request.failed'; id: string; error: unknown; turn: number | null; aborted: boolean; lastAssistantSeq: number; overflow?: boolean }
  | { type: 'compact.requested'; id: string; aborted: boolean; abortReason: string | undefined; focus: string | undefined }
  /** The next request's header is recorded and its pressure job ran: it is about to be sent (fit.ts judges it against the window). */
  | { type: 'request.ready'; id: string }
  /** `reason`: the caller's, kept in the error and in `compaction/end.error`. */
  | { type: 'cancel'; id: string; reason?: string };

/** A graceful shutdown (see the header). */
export type ShutdownEvent = { type: 'shutdown' };

type InternalEvent = { type: 'breaker.failure' } | { type: 'breaker.success' } | NotifyEvent;
export type EngineEvent = EngineRequest | ShutdownEvent | InternalEvent;

export type SettledResult =
  | { kind: 'pressure'; output: PressureOutput }
  | { kind: 'overflow'; output: OverflowOutput }
  | { kind: 'manual'; output: ManualOutput }
  | { kind: 'fit'; output: FitOutput }
  | { kind: 'busy'; running: 'pressure' | 'overflow' | 'manual' | 'fit' }
  | { kind: 'auto-off' }
  /** The breaker is open and the model-free fallback is off (`truncationFallback: false`): pressure compaction is paused. */
  | { kind: 'paused'; consecutiveFailures: number }
  /** A chart itself failed (a bug, not a service failure): the engine stays usable. */
  | { kind: 'error'; error: ErrorInfo };

/** The answer to a request (its id) and the engine's own announcements. */
export type EngineEmitted =
  | { type: 'request.settled'; id: string; result: SettledResult }
  | { type: 'breaker.opened'; consecutiveFailures: number; cooldownMs: number }
  | { type: 'breaker.closed'; why: 'success' | 'cooldown' }
  | { type: 'capacity.missing'; provider: string; model: string; message: string };

/** Everything the engine chart emits (and sends to its parent). */
export type CompactionEmitted = EngineEmitted | ChartNotification;

/** A request over its window is cut at most this many times before it is refused (each cut is priced only once written). */
export const FIT_MAX_CUTS = 3;

/** The config's defaults, for the chart run on its own; `createCompactionMachine` bakes the parsed config's. */
export const DEFAULT_ENGINE_INPUT: EngineInput = {
  auto: true,
  pruneEnabled: true,
  maxAttempts: 2,
  maxOverflowRetries: 1,
  failureLimit: 3,
  cooldownMs: 300_000,
};

/** The chart's starting context for an input. */
export function engineContext(input: EngineInput): EngineContext {
  return {
    ...input,
    policy: { auto: input.auto, maxAttempts: input.maxAttempts, maxOverflowRetries: input.maxOverflowRetries },
    silentSeenSeq: -1,
    current: undefined,
    pending: undefined,
    consecutiveFailures: 0,
    overflowRetries: 0,
    retryAnchorSeq: -1,
    warnedModels: [],
    backgroundRef: undefined,
  };
}

export interface EngineContext extends EngineInput {
  /** The routed model's policy, looked up when a job starts. */
  policy: RoutePolicy;
  /** The newest usage seq a silent overflow was reported for. */
  silentSeenSeq: number;
  current: { id: string; kind: 'pressure' | 'overflow' | 'manual' | 'fit' } | undefined;
  pending: EngineRequest | undefined;
  consecutiveFailures: number;
  overflowRetries: number;
  /** Seq of the latest assistant message when the last overflow retry was granted. */
  retryAnchorSeq: number;
  warnedModels: string[];
  /** The background chart (docs/spec.md#13-background-compaction), when `background` is on: the quick check reads whether it is idle. */
  backgroundRef: AnyActorRef | undefined;
}

/** The breaker region is open: a job then runs model-free (read from the state, not mirrored in the context). */
function breakerOpen(self: { getSnapshot(): { matches(value: unknown): boolean } }): boolean {
  return self.getSnapshot().matches({ breaker: 'open' });
}

/**
 * A failed automatic compaction, as the breaker counts it. `busy` (another compaction holds the
 * lock) and `cancelled` are not failures of compaction: pausing it would not help.
 */
function automaticFailure(out: PressureOutput | OverflowOutput): boolean {
  const notCounted = (code: string | undefined) => code === 'busy' || code === 'cancelled';
  // A summary that failed is a failure even when a truncation checkpoint then stood in for it.
  if ('status' in out) return (out.status === 'failed' && !notCounted(out.error?.code)) || out.transactions.some((t) => truncationAfter(t) !== undefined);
  return (out.transaction?.status === 'failed' && !notCounted(out.transaction.error.code)) || out.summaryFailure !== undefined;
}

/** Evidence that summaries work again: a model-free job (a prune, a truncation) is none. */
function automaticSuccess(out: PressureOutput | OverflowOutput): boolean {
  if ('status' in out) {
    if (out.modelFree || out.transactions.some(truncated)) return false;
    // A commit kept after a late cancel is a success too.
    return out.status === 'compacted' || out.status === 'relieved-by-pruning' || out.transactions.some((t) => t.status === 'committed');
  }
  return out.action === 'retry' && !out.modelFree && out.summaryFailure === undefined && !(out.transaction && truncated(out.transaction));
}

/** Emits an event and sends it to the parent actor (a host machine), if there is one. */
function publish(make: (args: { context: EngineContext; event: EngineEvent }) => CompactionEmitted) {
  return enqueueActions<EngineContext, EngineEvent, undefined, EngineEvent, never, never, never, never, CompactionEmitted>(
    ({ context, event, enqueue, self }) => {
      const e = make({ context, event });
      enqueue.emit(e);
      if (self._parent) enqueue.sendParent(e);
    },
  );
}

const settle = (id: string, result: SettledResult): CompactionEmitted => ({ type: 'request.settled', id, result });

/**
 * The answer to a step found below the threshold before any job started: the pressure chart's
 * `below` output, with the reading the guard judged (`readingOf` gives it; the engine provides
 * the cheap measurement, the chart alone has none).
 */
export function answerBelowThreshold(readingOf: () => PressureReading | undefined) {
  return publish(({ event }) => {
    return settle((event as EngineRequest).id, { kind: 'pressure', output: restingOutput('below', readingOf()) });
  });
}

export const compactionMachine = setup({
  types: {
    context: {} as EngineContext,
    events: {} as EngineEvent,
    input: {} as EngineInput | undefined,
    emitted: {} as CompactionEmitted,
  },
  actors: {
    pressure: pressureMachine,
    overflow: overflowMachine,
    manual: manualMachine,
    fit: fitMachine,
    background: backgroundMachine,
  },
  delays: {
    cooldown: ({ context }) => context.cooldownMs,
  },
  guards: {
    'automatic compaction is off': ({ context }) => !context.policy.auto,
    'signal already aborted': ({ event }) => event.type === 'step.completed' && event.aborted,
    /**
     * Provided by the engine from a cheap measurement: the routed model has automatic compaction
     * on, pressure is below its threshold (below its prepare point when the route has background
     * compaction), and no unreported silent overflow. The chart alone cannot measure, so it
     * always runs the pressure chart.
     */
    'pressure is below the threshold': () => false,
    /**
     * Nothing can happen in the background on this step: no background chart, or it is idle (no
     * summary in flight) with no ended run left to report. Read from the child's snapshot, not
     * mirrored: a run starts only from a job's gate (none runs while work is idle) and ends in
     * the child's own transitions, so its snapshot is exact here and a mirror would lag it.
     */
    'background is idle': ({ context }) => {
      if (!context.backgroundRef) return true;
      const snap = context.backgroundRef.getSnapshot() as { value: unknown; context: { unreported: unknown[] } };
      return snap.value === 'idle' && snap.context.unreported.length === 0;
    },
    'breaker is open': stateIn({ breaker: 'open' }),
    'the fallback is off': ({ context }) => context.truncationFallback === false,
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
        const kind =
          event.type === 'step.completed' ? 'pressure' : event.type === 'request.failed' ? 'overflow' : event.type === 'request.ready' ? 'fit' : 'manual';
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
    'settle job': publish(({ context, event }) => settle(context.current!.id, { kind: context.current!.kind, output: outputOf(event) } as SettledResult)),
    'settle job with chart error': publish(({ context, event }) =>
      settle(context.current!.id, { kind: 'error', error: toErrorInfo(errorOf(event), 'internal') }),
    ),
    'finish job': assign({
      current: undefined,
      pending: undefined,
      silentSeenSeq: ({ context, event }) => {
        const seen = (event as { output?: { silentOverflowSeq?: number } }).output?.silentOverflowSeq;
        return seen !== undefined && seen > context.silentSeenSeq ? seen : context.silentSeenSeq;
      },
    }),
    'answer below the threshold': answerBelowThreshold(() => undefined),
    'answer busy': publish(({ context, event }) => settle((event as EngineRequest).id, { kind: 'busy', running: context.current!.kind })),
    // Answered from the admitting state, after 'start job': the request is the pending one.
    'answer auto off': publish(({ context }) => settle(context.pending!.id, { kind: 'auto-off' })),
    'answer paused': publish(({ context }) => settle(context.pending!.id, { kind: 'paused', consecutiveFailures: context.consecutiveFailures })),
    // The default: the input's policy. The engine provides a look-up of the routed model's.
    'look up route policy': assign({
      policy: ({ context }) => ({ auto: context.auto, maxAttempts: context.maxAttempts, maxOverflowRetries: context.maxOverflowRetries }),
    }),
    'announce notification': publish(({ event }) => (event as NotifyEvent).notification),
    'close abandoned bracket': () => {
      // Provided by the engine: the transaction of a job stopped mid-way cannot close its own bracket.
    },
    'warn missing capacity': enqueueActions(({ context, event, enqueue, self }) => {
      const s = outputOf<PressureOutput>(event).skipped!;
      enqueue.assign({ warnedModels: [...context.warnedModels, `${s.provider}/${s.model}`] });
      const e = { type: 'capacity.missing' as const, provider: s.provider, model: s.model, message: s.message };
      enqueue.emit(e);
      if (self._parent) enqueue.sendParent(e);
    }),
    'report failure to breaker': raise({ type: 'breaker.failure' }),
    'report success to breaker': raise({ type: 'breaker.success' }),
    'count failure': assign({ consecutiveFailures: ({ context }) => context.consecutiveFailures + 1 }),
    'reset failures': assign({ consecutiveFailures: 0 }),
    'announce breaker opened': publish(({ context }) => ({
      type: 'breaker.opened',
      consecutiveFailures: context.consecutiveFailures,
      cooldownMs: context.cooldownMs,
    })),
    'announce breaker closed by success': publish(() => ({ type: 'breaker.closed', why: 'success' })),
    'announce breaker closed by cool-down': publish(() => ({ type: 'breaker.closed', why: 'cooldown' })),
    // Lives as long as the engine: its summary outlasts the step that started it (docs/spec.md#13-background-compaction).
    'spawn background chart': assign({
      backgroundRef: ({ context, spawn }) => (context.background ? spawn('background', { id: 'background', systemId: BACKGROUND_SYSTEM_ID }) : undefined),
    }),
    'forward cancel': sendTo('job', ({ event }) => ({
      type: 'cancel' as const,
      ...(event.type === 'cancel' && event.reason !== undefined ? { reason: event.reason } : {}),
    })),
  },
}).createMachine({
  id: 'engine',
  type: 'parallel',
  context: ({ input }) => engineContext(input ?? DEFAULT_ENGINE_INPUT),
  entry: 'spawn background chart',
  on: {
    [NOTIFY]: { actions: 'announce notification' },
  },
  states: {
    work: {
      initial: 'idle',
      states: {
        idle: {
          on: {
            // Most steps end here: below the threshold, answered without starting a job (no child
            // actor, no abort signal), so a step costs little more than the measurement.
            'step.completed': [
              {
                guard: and([
                  not('signal already aborted'),
                  not(and(['breaker is open', 'the fallback is off'])),
                  'background is idle',
                  'pressure is below the threshold',
                ]),
                actions: 'answer below the threshold',
              },
              { target: 'admitting', actions: ['start job', 'look up route policy'] },
            ],
            'request.failed': { target: 'overflow', actions: ['reset overflow retries after a success', 'start job', 'look up route policy'] },
            'compact.requested': { target: 'manual', actions: 'start job' },
            'request.ready': { target: 'fitting', actions: 'start job' },
          },
        },
        // Pressure compaction runs only if the routed model's policy has it on.
        admitting: {
          always: [
            { guard: 'automatic compaction is off', target: 'idle', actions: ['answer auto off', 'finish job'] },
            { guard: and(['breaker is open', 'the fallback is off']), target: 'idle', actions: ['answer paused', 'finish job'] },
            // With the breaker open too: the pressure chart then relieves model-free (its input says so).
            { target: 'pressure' },
          ],
        },
        pressure: {
          invoke: {
            id: 'job',
            src: 'pressure',
            input: ({ context, self }) => ({
              turn: context.pending?.type === 'step.completed' ? context.pending.turn : null,
              aborted: context.pending?.type === 'step.completed' ? context.pending.aborted : false,
              pruneEnabled: context.pruneEnabled,
              maxAttempts: context.policy.maxAttempts,
              silentSeenSeq: context.silentSeenSeq,
              ...(context.truncationFallback === false ? { fallback: false } : {}),
              ...(breakerOpen(self) ? { modelFree: true } : {}),
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
            input: ({ context, self }) => {
              const p = context.pending as Extract<EngineRequest, { type: 'request.failed' }>;
              return {
                error: p.error,
                retriesUsed: context.overflowRetries,
                maxRetries: context.policy.maxOverflowRetries,
                auto: context.policy.auto,
                pruneEnabled: context.pruneEnabled,
                aborted: p.aborted,
                turn: p.turn,
                ...(p.overflow === false ? { notOverflow: true } : {}),
                ...(context.truncationFallback === false ? { fallback: false } : breakerOpen(self) ? { modelFree: true } : {}),
              };
            },
            onDone: [
              // A truncation that stood in for a failed summary: the retry is granted, the failure counted.
              {
                guard: and(['retry granted', 'automatic compaction failed']),
                target: 'idle',
                actions: ['count overflow retry', 'report failure to breaker', 'settle job', 'finish job'],
              },
              {
                guard: and(['retry granted', 'automatic compaction succeeded']),
                target: 'idle',
                actions: ['count overflow retry', 'report success to breaker', 'settle job', 'finish job'],
              },
              { guard: 'retry granted', target: 'idle', actions: ['count overflow retry', 'settle job', 'finish job'] },
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
        // Model-free and quick: no gate, no breaker (a cut is neither a compaction's success nor its failure).
        fitting: {
          invoke: {
            id: 'job',
            src: 'fit',
            input: ({ context }) => ({ cutEnabled: context.pruneEnabled, maxCuts: FIT_MAX_CUTS }),
            onDone: { target: 'idle', actions: ['settle job', 'finish job'] },
            onError: { target: 'idle', actions: ['settle job with chart error', 'finish job'] },
          },
        },
        stopped: { type: 'final', entry: 'close abandoned bracket' },
      },
      on: {
        // Leaving the job's state stops it (its summary request aborts); with the breaker, the chart ends.
        shutdown: { target: '.stopped' },
        cancel: { guard: 'is the running request', actions: 'forward cancel' },
        'step.completed': { actions: 'answer busy' },
        'request.failed': { actions: 'answer busy' },
        'compact.requested': { actions: 'answer busy' },
        'request.ready': { actions: 'answer busy' },
      },
    },
    breaker: {
      initial: 'closed',
      on: { shutdown: { target: '.stopped' } },
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
            cooldown: { target: 'closed', actions: ['reset failures', 'announce breaker closed by cool-down'] },
          },
          on: {
            'breaker.success': { target: 'closed', actions: ['reset failures', 'announce breaker closed by success'] },
            'breaker.failure': { actions: 'count failure' },
          },
        },
        stopped: { type: 'final' },
      },
    },
  },
});
