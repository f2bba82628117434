/**
 * The request fits (docs/spec.md#19-the-request-fits): run just before a request is sent, after
 * the pressure job (prune, compact) of `engine.beforeRequest()`. The agent never stops for a
 * request that can be made to fit: one still over its message budget has its largest tool
 * results cut (head and tail kept, the whole text recallable, each cut recorded as a prune);
 * only a request that no cut brings under the window is refused.
 *
 *   measuring ─ no request recorded, or no window known ▶ unjudged
 *       │ within the message budget ▶ fits
 *       │ over it, cutting allowed (pruning on) ▶ cutting ─ cut nothing ▶ over
 *       └ over it, pruning off ▶ over
 *   cutting ▶ remeasuring ─ within ▶ fits (cut)
 *       ├ over, attempts left ▶ cutting (a cut is priced only once written: the next one corrects it)
 *       └ over, none left ▶ over
 *   cancel (the caller's signal aborted), from every state ▶ cancelled: the request is not sent
 *
 * Announces `fit.cut` for each cut that wrote something.
 */
import { assign, setup } from 'xstate';
import type { WindowReading, WindowResult } from '../services/pressure';
import { announceAction, errorOf, notProvided, outputOf, toErrorInfo, type ChartNotification, type ErrorInfo, type PruneSummary } from './types';

// ── The chart's contract: input, context, events, output ──
export interface FitInput {
  /** Config `prune.enabled` (and the engine's `pruner`): with it off, nothing is cut and an over-window request is refused. */
  cutEnabled: boolean;
  /** Cuts at most this many times (each after remeasuring). */
  maxCuts: number;
}

/** The request against its window, as the fit chart judges it. */
export type FitReading = WindowReading;
export type FitMeasure = WindowResult;

export type FitStatus =
  | 'unjudged' // no request recorded yet, or its window is unknown: not judged
  | 'fits' // within the message budget, as it was or after cutting
  | 'over' // over it, and cutting could not bring it under (or is off)
  | 'cancelled'; // the caller's signal aborted: the request is not sent

export type FitEvent = { type: 'cancel'; reason?: string };

export interface FitOutput {
  status: FitStatus;
  before: FitReading | undefined;
  after: FitReading | undefined;
  /** What the cuts wrote (summed over attempts); undefined when nothing was cut. */
  cut: { count: number; tokensFreed: number } | undefined;
  /** Why the chart stopped early: a cut that threw. */
  error: ErrorInfo | undefined;
}

export interface FitContext extends FitInput {
  before: FitReading | undefined;
  last: FitReading | undefined;
  cuts: number;
  cut: FitOutput['cut'];
  error: ErrorInfo | undefined;
  status: FitStatus;
}

const readingOf = (out: FitMeasure): FitReading | undefined => (out.kind === 'reading' ? out.reading : undefined);
const within = (r: FitReading | undefined): boolean => r !== undefined && r.totalTokens <= r.messageBudget;

const measured = (event: { type: string }): FitMeasure => outputOf<FitMeasure>(event);
const cutOut = (event: { type: string }): PruneSummary => outputOf<PruneSummary>(event);
const isOver = (event: { type: string }): boolean => {
  const r = readingOf(measured(event));
  return r !== undefined && !within(r);
};

export const fitMachine = setup({
  types: {
    context: {} as FitContext,
    events: {} as FitEvent,
    input: {} as FitInput,
    output: {} as FitOutput,
    emitted: {} as ChartNotification,
  },
  actors: {
    measure: notProvided<FitMeasure, void>('measureWindow'),
    cut: notProvided<PruneSummary, { need: number }>('cut'),
  },
  // Each branch's guard excludes every other branch's: their order means nothing.
  guards: {
    'not judged': ({ event }) => measured(event).kind === 'unjudged',
    'within the budget': ({ event }) => within(readingOf(measured(event))),
    'over the budget, cutting on': ({ context, event }) => isOver(event) && context.cutEnabled,
    'over the budget, cutting off': ({ context, event }) => isOver(event) && !context.cutEnabled,
    'over the budget, cuts left': ({ context, event }) => isOver(event) && context.cuts < context.maxCuts,
    'over the budget, no cuts left': ({ context, event }) => isOver(event) && context.cuts >= context.maxCuts,
    'the cut freed nothing': ({ event }) => cutOut(event).count === 0,
    'the cut freed something': ({ event }) => cutOut(event).count > 0,
  },
  actions: {
    'remember first reading': assign(({ event }) => ({ before: readingOf(measured(event)), last: readingOf(measured(event)) })),
    'remember reading': assign(({ event }) => ({ last: readingOf(measured(event)) })),
    'remember cut': assign(({ context, event }) => {
      const out = cutOut(event);
      return {
        cuts: context.cuts + 1,
        cut: out.count === 0 ? context.cut : { count: (context.cut?.count ?? 0) + out.count, tokensFreed: (context.cut?.tokensFreed ?? 0) + out.tokensFreed },
      };
    }),
    'announce cut': announceAction<FitContext, FitEvent>(({ context, event }) => {
      const out = cutOut(event);
      return { type: 'fit.cut', count: out.count, tokensFreed: out.tokensFreed, over: context.last!.totalTokens - context.last!.messageBudget };
    }),
    'remember error': assign(({ event }) => ({ error: toErrorInfo(errorOf(event), 'internal') })),
    'set status': assign((_, params: { status: FitStatus }) => ({ status: params.status })),
  },
}).createMachine({
  id: 'fit',
  context: ({ input }) => ({ ...input, before: undefined, last: undefined, cuts: 0, cut: undefined, error: undefined, status: 'over' }),
  initial: 'measuring',
  on: { cancel: { target: '.cancelled' } },
  states: {
    measuring: {
      invoke: {
        src: 'measure',
        onDone: [
          { guard: 'not judged', target: 'unjudged' },
          { guard: 'within the budget', target: 'fits', actions: 'remember first reading' },
          { guard: 'over the budget, cutting on', target: 'cutting', actions: 'remember first reading' },
          { guard: 'over the budget, cutting off', target: 'over', actions: 'remember first reading' },
        ],
        onError: { target: 'over', actions: 'remember error' },
      },
    },
    cutting: {
      invoke: {
        src: 'cut',
        input: ({ context }) => ({ need: Math.max(1, context.last!.totalTokens - context.last!.messageBudget) }),
        onDone: [
          { guard: 'the cut freed nothing', target: 'over' },
          // Announced before it is remembered: the announcement reads the reading the cut was sized on.
          { guard: 'the cut freed something', target: 'remeasuring', actions: ['announce cut', 'remember cut'] },
        ],
        onError: { target: 'over', actions: 'remember error' },
      },
    },
    remeasuring: {
      invoke: {
        src: 'measure',
        onDone: [
          { guard: 'within the budget', target: 'fits', actions: 'remember reading' },
          { guard: 'over the budget, cuts left', target: 'cutting', actions: 'remember reading' },
          { guard: 'over the budget, no cuts left', target: 'over', actions: 'remember reading' },
          // The route went away between two readings (it cannot: nothing but the cut wrote): judged as it was.
          { guard: 'not judged', target: 'over' },
        ],
        onError: { target: 'over', actions: 'remember error' },
      },
    },
    unjudged: { type: 'final', entry: { type: 'set status', params: { status: 'unjudged' } } },
    fits: { type: 'final', entry: { type: 'set status', params: { status: 'fits' } } },
    over: { type: 'final', entry: { type: 'set status', params: { status: 'over' } } },
    cancelled: { type: 'final', entry: { type: 'set status', params: { status: 'cancelled' } } },
  },
  output: ({ context }) => ({ status: context.status, before: context.before, after: context.last, cut: context.cut, error: context.error }),
});
