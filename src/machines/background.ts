/**
 * Background compaction (docs/spec.md#13-background-compaction): a summary prepared while the agent works on. One actor
 * lives as long as the engine (spawned by it, system id `xcompact.background`); the gate chart
 * of each job consults it (see gate.ts).
 *
 *   idle ─ step at the prepare point, or below it when compacting now pays (cost model) ─▶ selecting ─ nothing ▶ idle
 *   validating ─ lock held ▶ idle          opening (compaction/start, marked background)
 *   awaitingSlot (a one-slot server: concurrency 1) ─ the agent's reply arrived, its turn ended,
 *               or a job waits ─▶ summarizing
 *   summarizing ┬ preparing ─ a step reached the wait point (halfway from the threshold to the
 *               │             message budget: the request still fits below it) ─▶ waitingAtThreshold
 *               └ the summary ▶ ready (span as selected? shrinks? frees enough?)
 *   ready ┬ a job waits, or the cost model started the run ▶ committing ▶ flushing ▶ idle
 *         └ otherwise ▶ held ─ a step at the threshold, overflow, /compact ─▶ ready (checked again) ▶ committing
 *   any failure ▶ closing (compaction/end {error}) ▶ idle;  cancel ▶ cancelled (compaction/end {cancelled}) ▶ idle
 *
 * Replies to the gate that consulted it: `background.proceed` (nothing running: the job runs as
 * usual), `background.preparing` (a summary is being prepared and the wait point is not reached, or
 * it is ready and held and the threshold is not: the agent goes on), `background.waiting` then `background.settled` (the job waits for the
 * summary: the only wait). Each reply hands over the runs that ended since the last one. The
 * step that starts a run is answered once its bracket is open (`preparing`), or `proceed` when
 * the run ended before (nothing to compact, the lock held, a failure): `preparing` always means
 * a summary is under way.
 *
 * One server slot: a server working on one request at a time queues the agent's request behind a
 * summary (which also evicts the slot's prompt cache). The agent waits from a step's request to its
 * reply and runs its tools after it: there, the opened run waits (awaitingSlot) for the agent's
 * next reply or turn end (`agent.working`, sent by the host) and summarizes while the tools run.
 * Every run that ends is counted by the engine's breaker (busy and cancelled are not failures).
 */
import { assign, enqueueActions, not, setup, type AnyActorRef } from 'xstate';
import type { RangeSelection } from '../services/selection';
import { transactionActors } from './transaction';
import {
  compactionRecord,
  engineAncestor,
  errorOf,
  notProvided,
  outputOf,
  tell,
  toErrorInfo,
  type ChartNotification,
  type CommitRecord,
  type ErrorInfo,
  type OpenedBracket,
  type SelectInput,
  type SpanCheck,
  type SummaryOutcome,
  DEFAULT_SUMMARY_DEADLINE_MS,
  SUMMARY_TIMEOUT_ERROR,
} from './types';
import { noProgressError, noShrinkError, spanChanged, verdictGuards } from './verdict';
import type { CompactionRecord, EconomicDecision, PressureReading } from './types';

// ── The chart's contract: input, context, events, output ──
/*
 * The background chart's contract (background.ts): the runs it reports, the events it takes and
 * the replies it gives, its context, and the two judgements its guards share.
 */
/** One background run, as the gate reports it to the host. */
export interface BackgroundOutcome {
  status: 'committed' | 'failed' | 'cancelled' | 'nothing';
  record: CompactionRecord | undefined;
  error: ErrorInfo | undefined;
  /** A job waited for this run. */
  waited: boolean;
  /** The summary was ready before any job waited (held): a job that waited, waited for its commit only, not for a model. */
  held: boolean;
}

export type BackgroundEvent =
  | { type: 'step'; reading: PressureReading; silentSeenSeq: number; turn: number | null; replyTo: AnyActorRef }
  | { type: 'await'; replyTo: AnyActorRef }
  | { type: 'cancel'; reason?: string }
  /** The agent is not waiting for the model (its reply was recorded, or its turn ended): the server's slot is free. */
  | { type: 'agent.working' };

export type BackgroundReply =
  | { type: 'background.proceed'; outcomes: BackgroundOutcome[] }
  | { type: 'background.preparing'; outcomes: BackgroundOutcome[] }
  | { type: 'background.waiting' }
  | { type: 'background.settled'; outcomes: BackgroundOutcome[] };

export interface BackgroundContext {
  turn: number | null;
  range: RangeSelection | undefined;
  snapshot: SpanCheck['snapshot'] | undefined;
  opened: OpenedBracket | undefined;
  summary: SummaryOutcome | undefined;
  commit: CommitRecord | undefined;
  error: ErrorInfo | undefined;
  outcome: BackgroundOutcome['status'] | undefined;
  waiters: AnyActorRef[];
  waited: boolean;
  unreported: BackgroundOutcome[];
  /** The cost model's decision that started this run (not the prepare point), announced with compaction.started. */
  economics: EconomicDecision | undefined;
  /** The step that started this run, until it is answered (`preparing` once the bracket is open, else `proceed`). */
  starter: AnyActorRef | undefined;
  /** The route's server works on one request at a time: the summary waits for the agent's slot to free. */
  oneSlot: boolean;
  /** The route's backgroundCommit is 'ready': the summary is committed once ready, not held until a job must wait. */
  commitWhenReady: boolean;
  /** The ready summary was held (no job waited for it yet). */
  held: boolean;
}

export const IDLE: Omit<BackgroundContext, 'unreported' | 'turn'> = {
  range: undefined,
  snapshot: undefined,
  opened: undefined,
  summary: undefined,
  commit: undefined,
  error: undefined,
  outcome: undefined,
  waiters: [],
  waited: false,
  economics: undefined,
  starter: undefined,
  oneSlot: false,
  commitWhenReady: false,
  held: false,
};

export type StepEvent = Extract<BackgroundEvent, { type: 'step' }>;

/** At or above the threshold, or a prompt the provider truncated silently: relief is due (no run starts in the background then). */
export function atThreshold(e: StepEvent): boolean {
  return reaches(e, e.reading.threshold);
}

/**
 * At or above the wait point (`waitAt`, the threshold when the reading has none), or a prompt
 * the provider truncated silently: the agent must not go on while a summary is still being written.
 */
export function mustWait(e: StepEvent): boolean {
  return reaches(e, e.reading.waitAt ?? e.reading.threshold);
}

function reaches(e: StepEvent, limit: number): boolean {
  const r = e.reading;
  return r.totalTokens >= limit || (r.silentOverflow !== undefined && r.silentOverflow.seq > e.silentSeenSeq);
}

export const cancelledError = (reason: string | undefined): ErrorInfo => ({
  code: 'cancelled',
  message: reason === undefined ? 'the background compaction was cancelled' : `the background compaction was cancelled: ${reason}`,
});

export const BACKGROUND_SYSTEM_ID = 'xcompact.background';

export const backgroundMachine = setup({
  types: {
    context: {} as BackgroundContext,
    events: {} as BackgroundEvent,
    emitted: {} as ChartNotification,
  },
  actors: {
    selectRange: notProvided<RangeSelection | null, SelectInput>('selectRange'),
    ...transactionActors,
  },
  delays: {
    // Provided by the engine: the summary target's summaryTimeoutMs.
    summaryDeadline: () => DEFAULT_SUMMARY_DEADLINE_MS,
  },
  guards: {
    'the prepare point is reached': ({ event }) => {
      const e = event as StepEvent;
      return e.reading.prepareAt !== undefined && e.reading.totalTokens >= e.reading.prepareAt && !atThreshold(e);
    },
    'the step must wait': ({ event }) => mustWait(event as StepEvent),
    'the step reached the threshold': ({ event }) => atThreshold(event as StepEvent),
    /**
     * The cost model (config `economics`) says compacting now, below the threshold, pays: the
     * foreground pressure chart would compact early; with background on for the route (it has a
     * prepare point) the summary is prepared here instead, and the agent does not wait for it.
     */
    'compacting now pays': ({ event }) => {
      const e = event as StepEvent;
      return e.reading.prepareAt !== undefined && e.reading.economics?.compaction?.pays === true && !atThreshold(e);
    },
    'a job is waiting': ({ context }) => context.waited,
    /**
     * Commit at once: a job waits for the summary, the cost model started the run (compacting
     * now pays), or the route commits background summaries once ready (backgroundCommit 'ready').
     */
    'the commit is due': ({ context }) => context.waited || context.economics !== undefined || context.commitWhenReady,
    'the server has one slot': ({ context }) => context.oneSlot,
    'nothing to compact': ({ event }) => outputOf<RangeSelection | null>(event) === null,
    ...verdictGuards,
    'span changed': spanChanged,
  },
  actions: {
    reply: enqueueActions(({ context, event, enqueue }, params: { type: 'background.proceed' | 'background.preparing' | 'background.waiting' }) => {
      const to = (event as { replyTo: AnyActorRef }).replyTo;
      if (params.type === 'background.waiting') {
        enqueue.sendTo(to, { type: 'background.waiting' } satisfies BackgroundReply);
        return;
      }
      enqueue.sendTo(to, { type: params.type, outcomes: context.unreported } satisfies BackgroundReply);
      enqueue.assign({ unreported: [] });
    }),
    'start run': assign({
      ...IDLE,
      turn: ({ event }) => (event as StepEvent).turn,
      starter: ({ event }) => (event as StepEvent).replyTo,
      oneSlot: ({ event }) => (event as StepEvent).reading.concurrency === 1,
      commitWhenReady: ({ event }) => (event as StepEvent).reading.commitWhenReady === true,
    }),
    /** The bracket is open: the step that started the run goes on while the summary is prepared. */
    'answer starter': enqueueActions(({ context, enqueue }) => {
      if (!context.starter) return;
      enqueue.sendTo(context.starter, { type: 'background.preparing', outcomes: context.unreported } satisfies BackgroundReply);
      enqueue.assign({ unreported: [], starter: undefined });
    }),
    'remember economic decision': assign({
      economics: ({ event }) => ({ ...(event as StepEvent).reading.economics!.compaction!, decision: 'compact-early' as const }),
    }),
    'add waiter': assign({ waiters: ({ context, event }) => [...context.waiters, (event as { replyTo: AnyActorRef }).replyTo], waited: true }),
    'remember range': assign({ range: ({ event }) => outputOf<RangeSelection>(event) }),
    'remember snapshot': assign({ snapshot: ({ event }) => outputOf<SpanCheck>(event).snapshot }),
    'remember start': assign({ opened: ({ event }) => outputOf<OpenedBracket>(event) }),
    'remember summary': assign({ summary: ({ event }) => outputOf<SummaryOutcome>(event) }),
    'remember commit': assign({ commit: ({ event }) => outputOf<CommitRecord>(event) }),
    'note held': assign({ held: true }),
    fail: assign({ error: ({ event }, params: { fallback: ErrorInfo['code'] }) => toErrorInfo(errorOf(event), params.fallback) }),
    'fail with': assign({ error: (_, params: { error: ErrorInfo }) => params.error }),
    'fail cancelled': assign({
      error: ({ event }) => cancelledError(event.type === 'cancel' ? event.reason : undefined),
    }),
    'fail no shrink': assign({ error: ({ event }) => noShrinkError(event) }),
    'fail no progress': assign({ error: ({ event }) => noProgressError(event) }),
    end: assign({ outcome: (_, params: { as: BackgroundOutcome['status'] }) => params.as }),
    notify: enqueueActions(({ context, enqueue, self }, params: { what: 'started' | 'committed' | 'failed' }) => {
      if (params.what === 'started') {
        tell(enqueue, self, {
          type: 'compaction.started',
          trigger: 'pressure',
          startSeq: context.opened!.startSeq,
          nodes: context.range!.shadowed.length,
          spanTokens: context.range!.tokens,
          tokensBefore: context.opened!.tokensBefore,
          background: true,
          ...(context.economics ? { economics: context.economics } : {}),
        });
      } else if (params.what === 'committed') {
        tell(enqueue, self, { type: 'compaction.committed', ...compactionRecord('pressure', context.commit!, context.summary!), background: true });
      } else {
        tell(enqueue, self, {
          type: 'compaction.failed',
          trigger: 'pressure',
          error: context.error ?? { code: 'internal', message: 'unknown failure' },
          startedAt: context.opened?.startedAt,
          background: true,
        });
      }
    }),
    /** The run ended: the breaker counts it, a waiting job is released, the next step hears of it. */
    'settle run': enqueueActions(({ context, enqueue, self }) => {
      if (context.outcome === undefined) return;
      const outcome: BackgroundOutcome = {
        status: context.outcome,
        record: context.outcome === 'committed' ? compactionRecord('pressure', context.commit!, context.summary!) : undefined,
        error: context.outcome === 'committed' || context.outcome === 'nothing' ? undefined : context.error,
        waited: context.waited,
        held: context.held,
      };
      const engine = engineAncestor(self);
      const counted = outcome.status === 'failed' && outcome.error?.code !== 'busy';
      if (engine && (counted || outcome.status === 'committed')) enqueue.sendTo(engine, { type: counted ? 'breaker.failure' : 'breaker.success' });
      const unreported = [...context.unreported, outcome];
      if (context.starter) {
        // The run ended before its bracket opened: the step that started it runs its job as usual.
        enqueue.sendTo(context.starter, { type: 'background.proceed', outcomes: unreported } satisfies BackgroundReply);
        enqueue.assign({ ...IDLE, unreported: [] });
      } else if (context.waiters.length > 0) {
        for (const [i, w] of context.waiters.entries())
          enqueue.sendTo(w, { type: 'background.settled', outcomes: i === 0 ? unreported : [] } satisfies BackgroundReply);
        enqueue.assign({ ...IDLE, unreported: [] });
      } else {
        enqueue.assign({ ...IDLE, unreported });
      }
    }),
  },
}).createMachine({
  id: 'background',
  context: { ...IDLE, turn: null, unreported: [] },
  initial: 'idle',
  // While a run is under way: a step below the wait point goes on (its request still fits), one at or above it waits.
  on: {
    step: [
      { guard: not('the step must wait'), actions: { type: 'reply', params: { type: 'background.preparing' } } },
      { actions: ['add waiter', { type: 'reply', params: { type: 'background.waiting' } }] },
    ],
    await: { actions: ['add waiter', { type: 'reply', params: { type: 'background.waiting' } }] },
    // A cancel reaches a run only from a waiting job's gate: the summary (or its check) is then
    // cancelled (their own handlers); from the commit on it is too late: the run ends as it would have.
    cancel: {},
  },
  states: {
    idle: {
      entry: 'settle run',
      on: {
        step: [
          {
            guard: 'compacting now pays',
            target: 'selecting',
            actions: ['start run', 'remember economic decision'],
          },
          { guard: 'the prepare point is reached', target: 'selecting', actions: 'start run' },
          { actions: { type: 'reply', params: { type: 'background.proceed' } } },
        ],
        await: { actions: { type: 'reply', params: { type: 'background.proceed' } } },
        cancel: {},
      },
    },
    selecting: {
      invoke: {
        src: 'selectRange',
        // An early compaction (the cost model's) keeps the floor tail, as in the pressure chart; one from the prepare point, the
        // budget's tail as it will be at the threshold, where it is committed ('ahead').
        input: ({ context }): SelectInput => ({ purpose: 'pressure', attempt: 1, retain: context.economics ? 'floor' : 'ahead', stackCheckpoints: true }),
        onDone: [
          { guard: 'nothing to compact', target: 'idle', actions: { type: 'end', params: { as: 'nothing' } } },
          { target: 'validating', actions: 'remember range' },
        ],
        onError: {
          target: 'idle',
          actions: [
            { type: 'fail', params: { fallback: 'internal' } },
            { type: 'end', params: { as: 'failed' } },
          ],
        },
      },
    },
    validating: {
      invoke: {
        src: 'validateSpan',
        input: ({ context }) => ({ range: context.range!, mode: 'background' as const }),
        onDone: [
          {
            guard: 'lock is held',
            target: 'idle',
            actions: [
              { type: 'fail with', params: { error: { code: 'busy', message: 'another compaction holds the lock' } } },
              { type: 'end', params: { as: 'failed' } },
            ],
          },
          { target: 'opening', actions: 'remember snapshot' },
        ],
        onError: {
          target: 'idle',
          actions: [
            { type: 'fail', params: { fallback: 'changed' } },
            { type: 'end', params: { as: 'failed' } },
          ],
        },
      },
    },
    opening: {
      invoke: {
        src: 'openBracket',
        input: ({ context }) => ({ trigger: 'pressure' as const, turn: context.turn, range: context.range!, background: true }),
        onDone: [
          {
            guard: 'the server has one slot',
            target: 'awaitingSlot',
            actions: ['remember start', { type: 'notify', params: { what: 'started' } }, 'answer starter'],
          },
          { target: 'summarizing', actions: ['remember start', { type: 'notify', params: { what: 'started' } }, 'answer starter'] },
        ],
        onError: {
          target: 'idle',
          actions: [
            { type: 'fail', params: { fallback: 'commit' } },
            { type: 'end', params: { as: 'failed' } },
          ],
        },
      },
    },
    // The agent waits for its reply: a summary now would queue it behind the summary on the
    // server's one slot. A job that waits (the threshold, overflow, /compact) frees the slot.
    awaitingSlot: {
      always: { guard: 'a job is waiting', target: 'summarizing' },
      // No cancel here: only a waiting job cancels a run, and a waiting job has started the summary.
      on: { 'agent.working': { target: 'summarizing' } },
    },
    summarizing: {
      invoke: {
        src: 'summarize',
        input: ({ context }) => ({ range: context.range!, focus: undefined, trigger: 'pressure' as const }),
        onDone: { target: 'ready', actions: 'remember summary' },
        onError: { target: 'closing', actions: { type: 'fail', params: { fallback: 'summary' } } },
      },
      on: { cancel: { target: 'cancelled', actions: 'fail cancelled' } },
      // Past the summary's deadline (a job may be waiting for it): abandon it, as the transaction does.
      after: { summaryDeadline: { target: 'closing', actions: { type: 'fail with', params: { error: SUMMARY_TIMEOUT_ERROR } } } },
      initial: 'preparing',
      states: {
        // The agent goes on; a job that reached the threshold meanwhile waits from the start.
        preparing: { always: { guard: 'a job is waiting', target: 'waitingAtThreshold' } },
        waitingAtThreshold: {},
      },
    },
    ready: {
      invoke: {
        src: 'revalidate',
        input: ({ context }) => ({ range: context.range!, mode: 'background' as const, snapshot: context.snapshot!, summary: context.summary! }),
        onDone: [
          {
            guard: 'span changed',
            target: 'closing',
            actions: {
              type: 'fail with',
              params: { error: { code: 'changed', message: 'the span changed while its summary was prepared; nothing was committed' } },
            },
          },
          { guard: 'checkpoint does not shrink the span', target: 'closing', actions: 'fail no shrink' },
          { guard: 'too little progress', target: 'closing', actions: 'fail no progress' },
          { guard: 'the commit is due', target: 'committing' },
          { target: 'held', actions: 'note held' },
        ],
        onError: { target: 'closing', actions: { type: 'fail', params: { fallback: 'changed' } } },
      },
      on: { cancel: { target: 'cancelled', actions: 'fail cancelled' } },
    },
    // The summary is ready below the threshold, and the run was started by the prepare point (not
    // by the cost model): committing now would shadow what the agent may still use, before the
    // config's threshold says so. It waits, bracket open and lock held, for the first job that
    // must wait (a step at the threshold, an overflow, /compact), and is checked again then:
    // that job waits for a commit, not for a summary. A session that ends first has lost nothing.
    held: {
      always: { guard: 'a job is waiting', target: 'ready' },
      // Ready: from the threshold a step waits for the commit only, not for a model.
      on: {
        step: [
          { guard: 'the step reached the threshold', actions: ['add waiter', { type: 'reply', params: { type: 'background.waiting' } }] },
          { actions: { type: 'reply', params: { type: 'background.preparing' } } },
        ],
      },
    },
    committing: {
      // Three appends with no await between them: a cancel is too late here.
      invoke: {
        src: 'commit',
        input: ({ context }) => ({
          range: context.range!,
          startSeq: context.opened!.startSeq,
          summary: context.summary!,
          turn: context.turn,
          opened: context.opened!,
        }),
        onDone: { target: 'flushing', actions: 'remember commit' },
        onError: { target: 'closing', actions: { type: 'fail', params: { fallback: 'commit' } } },
      },
    },
    flushing: {
      invoke: {
        src: 'flush',
        input: { trigger: 'pressure' as const },
        onDone: {
          target: 'idle',
          actions: [
            { type: 'notify', params: { what: 'committed' } },
            { type: 'end', params: { as: 'committed' } },
          ],
        },
        onError: {
          target: 'idle',
          actions: [
            { type: 'fail', params: { fallback: 'persistence' } },
            { type: 'notify', params: { what: 'failed' } },
            { type: 'end', params: { as: 'failed' } },
          ],
        },
      },
    },
    closing: {
      invoke: {
        src: 'closeWithError',
        input: ({ context }) => ({ startSeq: context.opened!.startSeq, turn: context.turn, error: context.error! }),
        // Even a failed close ends here: the orphan compaction/start then keeps reporting busy.
        onDone: {
          target: 'idle',
          actions: [
            { type: 'notify', params: { what: 'failed' } },
            { type: 'end', params: { as: 'failed' } },
          ],
        },
        onError: {
          target: 'idle',
          actions: [
            { type: 'notify', params: { what: 'failed' } },
            { type: 'end', params: { as: 'failed' } },
          ],
        },
      },
    },
    cancelled: {
      invoke: {
        src: 'closeWithError',
        input: ({ context }) => ({ startSeq: context.opened!.startSeq, turn: context.turn, error: context.error! }),
        onDone: {
          target: 'idle',
          actions: [
            { type: 'notify', params: { what: 'failed' } },
            { type: 'end', params: { as: 'cancelled' } },
          ],
        },
        onError: {
          target: 'idle',
          actions: [
            { type: 'notify', params: { what: 'failed' } },
            { type: 'end', params: { as: 'cancelled' } },
          ],
        },
      },
    },
  },
});
