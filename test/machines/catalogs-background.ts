/**
 * Outcome catalogs of the background compaction charts (docs/spec.md#13-background-compaction): the background chart and
 * the gate in front of each job. Same shape as catalogs.ts; their paths run in
 * suite-background-engine.ts and suite-gate-engine.ts, on the real engine.
 */
import type { AnyActorRef, AnyMachineSnapshot } from 'xstate';
import { backgroundMachine } from '../../src/machines/background';
import { gateMachine, type GateInput } from '../../src/machines/gate';
import type { CommitRecord, PressureReading, SpanCheck, Verdict } from '../../src/machines/types';
import type { RangeSelection } from '../../src/services/selection';
import { activeAfterEvents, activeInvokes } from './model';
import type { CatalogEvent, MachineSpec } from './paths';

/** Replies go to this stand-in in the pure model; the runtime runner puts a real actor there. */
export const REPLY_TO = { id: 'gate' } as unknown as AnyActorRef;

const RANGE: RangeSelection = { start: 2, end: 9, startPos: 2, endPos: 9, shadowed: [2, 3, 4, 5, 6, 7, 8, 9], tokens: 1000, contextPos: 1 };
const error = (code: string, chartCode?: string) => Object.assign(new Error(`scripted ${code}`), { code, ...(chartCode ? { chartCode } : {}) });
const COMMIT: CommitRecord = {
  startSeq: 20,
  summarySeq: 21,
  checkpointSeq: 22,
  endSeq: 23,
  shadowedCount: 8,
  spanTokens: 1000,
  checkpointTokens: 80,
  tokensBefore: 3600,
  tokensAfter: 2680,
  durationMs: 5,
};
const SNAPSHOT: SpanCheck['snapshot'] = { generation: 0, surfaceLength: 12 };
export const BG_READING = (totalTokens: number): PressureReading => ({
  provider: 'test',
  model: 'small',
  totalTokens,
  threshold: 4000,
  retainTokens: 1000,
  contextWindow: 6000,
  prepareAt: 3250,
  // Halfway from the threshold to the message budget (6,000 − a 500-token reply).
  waitAt: 4750,
});
const verdict = (v: Partial<Verdict>): Verdict => ({ stable: true, spanTokens: 1000, checkpointTokens: 80, requiredTokens: 100, ...v });

type Offer = { outcome: string; output?: unknown; error?: unknown };

function invokeOffers<Aux>(snapshot: AnyMachineSnapshot, table: Record<string, Offer[]>): Array<CatalogEvent<Aux>> {
  const out: Array<CatalogEvent<Aux>> = [];
  for (const inv of activeInvokes(snapshot)) {
    for (const o of table[inv.src] ?? []) {
      const event =
        'error' in o
          ? { type: `xstate.error.actor.${inv.id}`, error: o.error, actorId: inv.id }
          : { type: `xstate.done.actor.${inv.id}`, output: o.output, actorId: inv.id };
      out.push({ outcome: `${inv.src}:${o.outcome}`, event });
    }
  }
  return out;
}

export const BACKGROUND_OFFERS: Record<string, Offer[]> = {
  selectRange: [
    { outcome: 'range', output: RANGE },
    { outcome: 'nothing', output: null },
    { outcome: 'throws', error: error('budget') },
  ],
  validateSpan: [
    { outcome: 'lock-free', output: { lockHeld: false, snapshot: SNAPSHOT } satisfies SpanCheck },
    { outcome: 'lock-held', output: { lockHeld: true, snapshot: SNAPSHOT } satisfies SpanCheck },
    { outcome: 'span-invalid', error: error('span-invalid', 'changed') },
  ],
  openBracket: [
    { outcome: 'opened', output: { startSeq: 20, tokensBefore: 3600, startedAt: 0 } },
    { outcome: 'append-refused', error: error('session-rule') },
  ],
  summarize: [
    { outcome: 'summary', output: { text: 'summary', requests: 1 } },
    { outcome: 'fails', error: error('summary-request', 'summary') },
  ],
  revalidate: [
    { outcome: 'good', output: verdict({}) },
    { outcome: 'span-changed', output: verdict({ stable: false }) },
    { outcome: 'no-shrink', output: verdict({ checkpointTokens: 1000 }) },
    { outcome: 'too-little-progress', output: verdict({ checkpointTokens: 950 }) },
    { outcome: 'throws', error: error('internal') },
  ],
  commit: [
    { outcome: 'committed', output: COMMIT },
    { outcome: 'refused', error: error('session-rule') },
  ],
  flush: [
    { outcome: 'durable', output: undefined },
    { outcome: 'store-fails', error: error('store-interleaved', 'persistence') },
  ],
  closeWithError: [
    { outcome: 'closed', output: undefined },
    { outcome: 'close-fails', error: error('store-interleaved') },
  ],
};

const ECONOMIC_RUN = ['selectRange:range', 'validateSpan:lock-free', 'openBracket:opened'];
const step = (total: number) => ({ type: 'step', reading: BG_READING(total), silentSeenSeq: -1, turn: 0, replyTo: REPLY_TO });
/** At the prepare point on a route whose server works on one request at a time (concurrency 1). */
const oneSlotStep = () => ({ ...step(3500), reading: { ...BG_READING(3500), concurrency: 1 } });
/** Below the prepare point, but the cost model says compacting now pays. */
const PAYS = { pays: true, savings: 2, cost: 1, requestsToCome: 40, breakEvenTokens: 2500, reason: 'pays: scripted' };
const paysStep = () => ({
  ...step(3000),
  reading: {
    ...BG_READING(3000),
    economics: { prices: { input: 1, cacheRead: 0.1, cacheWrite: 1.25, output: 4 }, pace: { requests: 40, growthPerRequest: 75 }, compaction: PAYS },
  },
});

export const backgroundSpec: MachineSpec<undefined> = {
  name: 'background',
  machine: backgroundMachine,
  inputs: [{ label: 'engine', input: undefined }],
  initialAux: undefined,
  events: (s) => {
    const offers: Array<CatalogEvent<undefined>> = [
      ...invokeOffers<undefined>(s, BACKGROUND_OFFERS),
      { outcome: 'step:prepare-point', event: step(3500) },
      { outcome: 'step:below-prepare-point', event: step(3000) },
      { outcome: 'step:compacting-pays', event: paysStep() },
      // At the wait point: a step waits for a summary still being written (and, with none, the threshold's relief runs).
      { outcome: 'step:threshold', event: step(4800) },
      // Past the threshold, below the wait point, while a run is under way: the request still fits, the agent goes on,
      // unless the summary is ready and held (then it is committed: the threshold says so).
      ...(s.value !== 'idle' && s.value !== 'awaitingSlot' ? [{ outcome: 'step:above-threshold', event: step(4200) }] : []),
      { outcome: 'await', event: { type: 'await', replyTo: REPLY_TO } },
      // Only a waiting job's gate cancels a run (its caller's signal aborts); with nothing running,
      // no real engine sends one: forced, there only (see FORCED_OUTCOMES).
      ...(s.context.waited ? [{ outcome: 'cancel', event: { type: 'cancel', reason: 'user pressed Ctrl-C' } }] : []),
      ...(s.value === 'idle' ? [{ outcome: 'cancel:unasked', event: { type: 'cancel' } }] : []),
      ...(s.value === 'idle' ? [{ outcome: 'step:prepare-point-one-slot', event: oneSlotStep() }] : []),
      // The agent's reply recorded (or its turn ended): sent by the engine on every such append; only a waiting run heeds it.
      ...(s.value === 'awaitingSlot' ? [{ outcome: 'agent.working', event: { type: 'agent.working' } }] : []),
      // The summary's deadline (summaryTimeoutMs) passes while it is still being prepared.
      ...activeAfterEvents(s).map((type) => ({ outcome: 'summarize:deadline', event: { type } })),
    ];
    // The step that started a run is answered only once its bracket opened (or the run ended):
    // until then its job waits for the answer, so nothing else reaches the chart.
    // Waiting for the slot, the world can only record the agent's reply or make a job wait
    // (the threshold by a smaller-window request, an overflow): any tool step records a reply.
    if (s.value === 'awaitingSlot') return offers.filter((o) => ['agent.working', 'step:threshold', 'await'].includes(o.outcome));
    if (s.context.starter) return invokeOffers<undefined>(s, BACKGROUND_OFFERS).filter((o) => !s.context.economics || ECONOMIC_RUN.includes(o.outcome));
    // A run the cost model started is followed until its bracket opens (the span it weighed is
    // there, nothing else holds the lock): what differs from a run from the prepare point shows
    // in its bracket and its announcement. Everything else is the prepare point's paths' to cover.
    return s.context.economics && !s.context.opened ? offers.filter((o) => ECONOMIC_RUN.includes(o.outcome)) : offers;
  },
  // The cost model's decision too: a run it started selects differently (see the filter above).
  project: (s) => JSON.stringify([s.value, s.context.waited, s.context.economics?.decision, s.context.oneSlot, s.context.starter !== undefined]),
  atRest: (s) => s.value === 'idle',
  maxDepth: 12,
};

// ---------------------------------------------------------------------------
// gate

const PRESSURE_JOB = { turn: 0, aborted: false, pruneEnabled: true, maxAttempts: 2, silentSeenSeq: -1 };
export const GATE_INPUTS: Array<{ label: string; input: GateInput }> = [
  { label: 'pressure', input: { kind: 'pressure', job: PRESSURE_JOB } },
  {
    label: 'overflow',
    input: {
      kind: 'overflow',
      job: { error: new Error('context overflow'), retriesUsed: 0, maxRetries: 1, auto: true, pruneEnabled: true, aborted: false, turn: 0 },
    },
  },
  { label: 'manual', input: { kind: 'manual', job: { aborted: false, abortReason: undefined, focus: undefined } } },
  // A request error that is no overflow (a 500): nothing to recover, so nothing to wait for.
  {
    label: 'request error',
    input: {
      kind: 'overflow',
      job: {
        error: new Error('Internal server error'),
        retriesUsed: 0,
        maxRetries: 1,
        auto: true,
        pruneEnabled: true,
        aborted: false,
        turn: 0,
        notOverflow: true,
      },
    },
  },
  // The caller's signal was aborted before the call.
  { label: 'pressure aborted', input: { kind: 'pressure', job: { ...PRESSURE_JOB, aborted: true } } },
];

const JOB_DONE: Record<string, unknown> = {
  pressure: {
    status: 'below',
    before: undefined,
    after: undefined,
    skipped: undefined,
    prune: undefined,
    transactions: [],
    error: undefined,
    silentOverflowSeq: undefined,
  },
  overflow: { action: 'fail', reason: 'not-overflow', classification: { kind: 'other', message: 'x' }, prune: undefined, transaction: undefined },
  manual: { status: 'nothing' },
};

export const GATE_OFFERS: Record<string, Offer[]> = {
  measure: [
    { outcome: 'reading', output: { kind: 'reading', reading: BG_READING(3500) } },
    { outcome: 'unrouted', output: { kind: 'unrouted' } },
    { outcome: 'throws', error: error('internal') },
  ],
  pressure: [{ outcome: 'done', output: JOB_DONE.pressure }],
  overflow: [{ outcome: 'done', output: JOB_DONE.overflow }],
  manual: [{ outcome: 'done', output: JOB_DONE.manual }],
};

export const gateSpec: MachineSpec<undefined> = {
  name: 'gate',
  machine: gateMachine,
  inputs: GATE_INPUTS,
  initialAux: undefined,
  events: (s) => {
    if (s.status !== 'active') return [];
    const out = invokeOffers<undefined>(s, GATE_OFFERS);
    if (s.matches('consulting')) {
      // The background chart answers a step `preparing` (at the prepare point, or while its run
      // goes on below the threshold); an await (overflow, manual) only `proceed` or `waiting`.
      out.push({ outcome: 'background:proceed', event: { type: 'background.proceed', outcomes: [] } });
      if (s.context.input.kind === 'pressure') out.push({ outcome: 'background:preparing', event: { type: 'background.preparing', outcomes: [] } });
      out.push({ outcome: 'background:waiting', event: { type: 'background.waiting' } });
    }
    if (s.matches('waiting')) out.push({ outcome: 'background:settled', event: { type: 'background.settled', outcomes: [] } });
    // The caller's signal aborts while the gate waits on something; consulting is answered in
    // the same synchronous step that sent the question, so no cancel can come between.
    // A job that starts cancelled ends at once: nothing is held long enough to be cancelled again.
    // So does a request error that is no overflow: declined at once, a cancel changes nothing there.
    const noOverflow = s.context.input.kind === 'overflow' && s.context.input.job.notOverflow === true;
    const endsAtOnce = String(s.value).startsWith('running') && (s.context.cancelled || s.context.input.job.aborted || noOverflow);
    if (!s.matches('consulting') && !endsAtOnce) out.push({ outcome: 'cancel', event: { type: 'cancel', reason: 'user pressed Ctrl-C' } });
    return out;
  },
  project: (s) => JSON.stringify([s.value, s.context.input.kind, s.context.cancelled]),
  atRest: (s) => s.status === 'done',
  maxDepth: 8,
};
