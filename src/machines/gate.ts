/**
 * The gate in front of a job when background compaction is on (docs/spec.md#13-background-compaction): it consults the
 * background chart (background.ts) before the job runs.
 *
 *   start ─ pressure ▶ measuring ─ a reading ▶ consulting
 *         ├ overflow, manual ─────────────────▶ consulting          (no reading ▶ running)
 *         └ a request error that is no overflow ▶ running (its job declines at once: nothing to wait for)
 *   a job whose caller gave up (signal aborted) skips consulting: running, aborted
 *   consulting ─ background.preparing ▶ preparing (final: the agent goes on, nothing waited)
 *              ─ background.proceed ▶ running
 *              ─ background.waiting ▶ waiting ─ background.settled ▶ running
 *   running ▶ the job's own chart (pressure, overflow or manual) ▶ done
 *
 * Overflow recovery and manual compaction always wait for a running background summary
 * (docs/spec.md#13-background-compaction: then §6 and §9 apply). A cancel while waiting cancels the background summary;
 * the job then runs with its signal aborted, so it ends `cancelled` as it would have alone.
 */
import { assign, sendTo, setup, type AnyActorRef } from 'xstate';
import { BACKGROUND_SYSTEM_ID, type BackgroundEvent, type BackgroundOutcome, type BackgroundReply } from './background';
import { manualMachine, type ManualInput, type ManualOutput } from './manual';
import { overflowMachine, type OverflowInput, type OverflowOutput } from './overflow';
import { pressureMachine, restingOutput, type PressureInput, type PressureOutput } from './pressure';
import { notProvided, outputOf, type PressureReading, type ReadingResult } from './types';

export type GateInput = { kind: 'pressure'; job: PressureInput } | { kind: 'overflow'; job: OverflowInput } | { kind: 'manual'; job: ManualInput };

/** What the host learns about the background summary from this job. */
export interface BackgroundReport {
  /** The job waited for a background summary (the threshold came first, or overflow / manual). */
  waited: boolean;
  /** A background summary is being prepared: this step went on without it. */
  preparing: boolean;
  /** Background runs that ended since the previous report. */
  outcomes: BackgroundOutcome[];
}

export type GateOutput =
  (PressureOutput & { background: BackgroundReport }) | (OverflowOutput & { background: BackgroundReport }) | (ManualOutput & { background: BackgroundReport });

export interface GateContext {
  input: GateInput;
  reading: PressureReading | undefined;
  waited: boolean;
  preparing: boolean;
  outcomes: BackgroundOutcome[];
  cancelled: boolean;
  output: PressureOutput | OverflowOutput | ManualOutput | undefined;
}

type GateEvent = BackgroundReply | { type: 'cancel'; reason?: string };

/** The gate's starting context (the engine wiring builds one gate per job kind from it). */
export function gateContext(input: GateInput): GateContext {
  return { input, reading: undefined, waited: false, preparing: false, outcomes: [], cancelled: false, output: undefined };
}

const background = ({ system }: { system: { get(id: string): AnyActorRef | undefined } }) => system.get(BACKGROUND_SYSTEM_ID)!;

/** The job's input, its signal aborted when the wait was cancelled. */
function jobInput<T extends { aborted: boolean }>(context: GateContext): T {
  const job = context.input.job as unknown as T;
  return context.cancelled ? { ...job, aborted: true } : job;
}

/**
 * The pressure job's input: with the gate's reading when nothing can have changed since it was
 * taken (no wait, no background run ended in between), so the step is measured once.
 */
function pressureInput(context: GateContext): PressureInput {
  const job = jobInput<PressureInput>(context);
  const fresh = context.reading !== undefined && !context.waited && context.outcomes.length === 0 && !context.cancelled;
  return fresh ? { ...job, given: { kind: 'reading', reading: context.reading! } } : job;
}

export const gateMachine = setup({
  types: {
    context: {} as GateContext,
    events: {} as GateEvent,
    input: {} as GateInput,
    output: {} as GateOutput,
  },
  actors: {
    measure: notProvided<ReadingResult, { phase: 'initial' | 'after-prune' | 'after-compaction' }>('measure'),
    pressure: pressureMachine,
    overflow: overflowMachine,
    manual: manualMachine,
  },
  guards: {
    'the job is pressure': ({ context }) => context.input.kind === 'pressure',
    'the job is overflow': ({ context }) => context.input.kind === 'overflow',
    'a reading': ({ event }) => outputOf<ReadingResult>(event).kind === 'reading',
    // The caller gave up (its signal aborted, before or while measuring): nothing to consult the
    // background about; the job runs aborted and ends cancelled, as it would in the foreground.
    'the job is cancelled': ({ context }) => context.cancelled || context.input.job.aborted,
    // A 500, a rate limit, an abort: recovery has nothing to do, so the caller does not wait for a
    // background summary to hear it (and a held one is not committed for it).
    'the error is no overflow': ({ context }) => context.input.kind === 'overflow' && context.input.job.notOverflow === true,
  },
  actions: {
    'remember reading': assign({ reading: ({ event }) => (outputOf<ReadingResult>(event) as Extract<ReadingResult, { kind: 'reading' }>).reading }),
    consult: sendTo(background, ({ context, self }): BackgroundEvent => {
      if (context.input.kind !== 'pressure') return { type: 'await', replyTo: self };
      const job = context.input.job;
      return { type: 'step', reading: context.reading!, silentSeenSeq: job.silentSeenSeq, turn: job.turn, replyTo: self };
    }),
    'take outcomes': assign({ outcomes: ({ context, event }) => [...context.outcomes, ...(event as { outcomes: BackgroundOutcome[] }).outcomes] }),
    'note preparing': assign({ preparing: true }),
    'note wait': assign({ waited: true }),
    'cancel background': sendTo(background, ({ event }): BackgroundEvent => ({
      type: 'cancel',
      ...(event.type === 'cancel' && event.reason !== undefined ? { reason: event.reason } : {}),
    })),
    'remember cancel': assign({ cancelled: true }),
    'forward cancel': sendTo('job', ({ event }) => ({
      type: 'cancel' as const,
      ...(event.type === 'cancel' && event.reason !== undefined ? { reason: event.reason } : {}),
    })),
    'remember output': assign({ output: ({ event }) => outputOf<PressureOutput | OverflowOutput | ManualOutput>(event) }),
  },
}).createMachine({
  id: 'gate',
  context: ({ input }) => gateContext(input),
  initial: 'start',
  on: { cancel: { actions: 'remember cancel' } },
  // No onError on the job: a job chart that fails (a bug) fails this chart with it, and the
  // engine reports it as the job's own chart error.
  states: {
    start: {
      always: [
        { guard: 'the job is cancelled', target: 'running' },
        { guard: 'the job is pressure', target: 'measuring' },
        { guard: 'the error is no overflow', target: 'running' },
        { target: 'consulting' },
      ],
    },
    measuring: {
      invoke: {
        src: 'measure',
        input: { phase: 'initial' },
        onDone: [
          { guard: 'the job is cancelled', target: 'running' },
          { guard: 'a reading', target: 'consulting', actions: 'remember reading' },
          // No route or no budget: nothing to prepare; the pressure chart says why.
          { target: 'running' },
        ],
        onError: { target: 'running' },
      },
    },
    consulting: {
      entry: 'consult',
      on: {
        'background.preparing': { target: 'preparing', actions: ['take outcomes', 'note preparing'] },
        'background.proceed': { target: 'running', actions: 'take outcomes' },
        'background.waiting': { target: 'waiting', actions: 'note wait' },
      },
    },
    waiting: {
      on: {
        'background.settled': { target: 'running', actions: 'take outcomes' },
        cancel: { actions: ['remember cancel', 'cancel background'] },
      },
    },
    running: {
      always: [
        { guard: 'the job is pressure', target: 'runningPressure' },
        { guard: 'the job is overflow', target: 'runningOverflow' },
        { target: 'runningManual' },
      ],
    },
    runningPressure: {
      invoke: { id: 'job', src: 'pressure', input: ({ context }) => pressureInput(context), onDone: { target: 'done', actions: 'remember output' } },
      on: { cancel: { actions: 'forward cancel' } },
    },
    runningOverflow: {
      invoke: {
        id: 'job',
        src: 'overflow',
        // A background commit while this waited shrank the request the provider refused.
        input: ({ context }) => ({
          ...jobInput<OverflowInput>(context),
          ...(context.outcomes.some((o) => o.status === 'committed') ? { relievedBefore: true } : {}),
        }),
        onDone: { target: 'done', actions: 'remember output' },
      },
      on: { cancel: { actions: 'forward cancel' } },
    },
    runningManual: {
      invoke: { id: 'job', src: 'manual', input: ({ context }) => jobInput<ManualInput>(context), onDone: { target: 'done', actions: 'remember output' } },
      on: { cancel: { actions: 'forward cancel' } },
    },
    preparing: { type: 'final' },
    done: { type: 'final' },
  },
  output: ({ context }): GateOutput => {
    const report: BackgroundReport = { waited: context.waited, preparing: context.preparing, outcomes: context.outcomes };
    if (context.output) return { ...context.output, background: report };
    // Went on without running the job: a summary is being prepared below the threshold.
    return { ...restingOutput('preparing', context.reading), background: report };
  },
});
