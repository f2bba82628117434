/**
 * Outcome catalogs: for each chart, the inputs it starts from and, for each invoked actor,
 * the outputs and errors that make each guard branch the first to pass — the payloads the
 * generator puts on `xstate.done.actor.*` / `xstate.error.actor.*` events.
 *
 * Each offer carries an outcome name (`service:outcome`). The runtime suites (see
 * runner.ts and the *.test.ts files here) know how to make the real engine produce each
 * named outcome, preferably by arranging the world, and say where they force one.
 */
import type { AnyMachineSnapshot } from 'xstate';
import { compactionMachine, type EngineInput } from '../../src/machines/compaction';
import { manualMachine, type ManualInput, type ManualOutput } from '../../src/machines/manual';
import { FIT_MAX_CUTS } from '../../src/machines/compaction';
import { fitMachine, type FitInput, type FitOutput } from '../../src/machines/fit';
import type { WindowReading } from '../../src/services/pressure';
import { overflowMachine, type OverflowInput, type OverflowOutput } from '../../src/machines/overflow';
import { pressureMachine, restingOutput, type PressureInput, type PressureOutput } from '../../src/machines/pressure';
import { transactionMachine } from '../../src/machines/transaction';
import type { CommitRecord, PressureEconomics, PressureReading, SpanCheck, TransactionInput, TransactionOutput, Verdict } from '../../src/machines/types';
import type { RangeSelection } from '../../src/services/selection';
import { backgroundSpec, gateSpec } from './catalogs-background';
import type { EconomicVerdict, ReliefVerdict } from '../../src/services/economics';
import { activeAfterEvents, activeInvokes } from './model';
import { generatePaths, type CatalogEvent, type Coverage, type MachineSpec } from './paths';

// ---------------------------------------------------------------------------
// Representative payloads

export const RANGE: RangeSelection = { start: 2, end: 9, startPos: 2, endPos: 9, shadowed: [2, 3, 4, 5, 6, 7, 8, 9], tokens: 1000, contextPos: 1 };
const SNAPSHOT: SpanCheck['snapshot'] = { generation: 0, surfaceLength: 12 };
const COMMIT: CommitRecord = {
  startSeq: 20,
  summarySeq: 21,
  checkpointSeq: 22,
  endSeq: 23,
  shadowedCount: 8,
  spanTokens: 1000,
  checkpointTokens: 80,
  tokensBefore: 5000,
  tokensAfter: 4080,
  durationMs: 5,
};
const READING = (totalTokens: number): PressureReading => ({
  provider: 'test',
  model: 'small',
  totalTokens,
  threshold: 4000,
  retainTokens: 1000,
  contextWindow: 6000,
});
const VERDICT = (pays: boolean): EconomicVerdict => ({
  pays,
  savings: pays ? 2 : 0,
  cost: 1,
  requestsToCome: 40,
  breakEvenTokens: 2500,
  reason: pays ? 'pays' : 'does not pay',
});
const RELIEF = (choice: ReliefVerdict['choice']): ReliefVerdict => ({ ...VERDICT(true), choice });
const ECONOMICS = (over: Partial<PressureEconomics>): PressureEconomics => ({
  prices: { input: 1, cacheRead: 0.1, cacheWrite: 1.25, output: 4 },
  pace: { requests: 40, growthPerRequest: 60 },
  ...over,
});
const error = (code: string, chartCode?: string) => Object.assign(new Error(`scripted ${code}`), { code, ...(chartCode ? { chartCode } : {}) });

export const TX_COMMITTED: TransactionOutput = {
  status: 'committed',
  trigger: 'pressure',
  range: RANGE,
  commit: COMMIT,
  summary: { text: 'summary', requests: 1 },
};
export const TX_FAILED: TransactionOutput = {
  status: 'failed',
  trigger: 'pressure',
  range: RANGE,
  error: { code: 'summary', message: 'summary failed', cause: 'summary-request' },
  startSeq: 20,
};
/** A truncation checkpoint committed (the model-free last resort): no model was asked. */
export const TX_TRUNCATED: TransactionOutput = {
  status: 'committed',
  trigger: 'pressure',
  range: RANGE,
  commit: COMMIT,
  summary: { text: '[Truncated without a summary]', requests: 0, truncation: { reason: 'summary-failed' } },
};
/** A truncation that failed: the surface changed while it was checked. */
export const TX_TRUNCATION_FAILED: TransactionOutput = {
  status: 'failed',
  trigger: 'pressure',
  range: RANGE,
  error: { code: 'changed', message: 'the surface changed while the summary was written; nothing was committed' },
  startSeq: 24,
};
export const TX_CANCELLED: TransactionOutput = {
  status: 'failed',
  trigger: 'pressure',
  range: RANGE,
  error: { code: 'cancelled', message: 'the compaction was cancelled' },
  startSeq: 20,
};

type Offer = { outcome: string; output?: unknown; error?: unknown; states?: string[] };

/** Done/error events for the invokes active in `snapshot`, from a table keyed by `src`. */
function invokeOffers<Aux>(snapshot: AnyMachineSnapshot, table: Record<string, Offer[]>): Array<CatalogEvent<Aux>> {
  const out: Array<CatalogEvent<Aux>> = [];
  for (const inv of activeInvokes(snapshot)) {
    for (const o of table[inv.src] ?? []) {
      if (o.states && !o.states.includes(inv.state)) continue;
      const event =
        'error' in o
          ? { type: `xstate.error.actor.${inv.id}`, error: o.error, actorId: inv.id }
          : { type: `xstate.done.actor.${inv.id}`, output: o.output, actorId: inv.id };
      out.push({ outcome: `${inv.src}:${o.outcome}`, event });
    }
  }
  return out;
}

const active = (s: AnyMachineSnapshot) => s.status === 'active';

/**
 * After a cancel the chart forwarded, the transaction's own `cancelled` comes first: the path a
 * cancel takes then shows the forwarded cancel stopping the transaction (a committed one after
 * it, too late to stop, is a path of its own).
 */
function afterCancelFirst<Aux>(offers: Array<CatalogEvent<Aux>>, cancelled: boolean): Array<CatalogEvent<Aux>> {
  if (!cancelled) return offers;
  return [...offers.filter((o) => o.outcome === 'transaction:cancelled'), ...offers.filter((o) => o.outcome !== 'transaction:cancelled')];
}

// ---------------------------------------------------------------------------
// transaction

const verdict = (v: Partial<Verdict>): Verdict => ({ stable: true, spanTokens: 1000, checkpointTokens: 80, requiredTokens: 100, ...v });

export const TRANSACTION_OFFERS: Record<string, Offer[]> = {
  validateSpan: [
    { outcome: 'lock-free', output: { lockHeld: false, snapshot: SNAPSHOT } satisfies SpanCheck },
    { outcome: 'lock-held', output: { lockHeld: true, snapshot: SNAPSHOT } satisfies SpanCheck },
    { outcome: 'span-invalid', error: error('span-invalid', 'changed') },
  ],
  openBracket: [
    { outcome: 'opened', output: { startSeq: 20 } },
    { outcome: 'append-refused', error: error('session-rule') },
  ],
  summarize: [
    { outcome: 'summary', output: { text: 'summary', requests: 1 } },
    { outcome: 'fails', error: error('summary-request', 'summary') },
  ],
  truncate: [
    { outcome: 'checkpoint', output: { text: '[Truncated without a summary]', requests: 0, truncation: { reason: 'breaker-open' } } },
    { outcome: 'throws', error: error('internal') },
  ],
  revalidate: [
    { outcome: 'good', output: verdict({}) },
    { outcome: 'surface-changed', output: verdict({ stable: false }) },
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

export const TRANSACTION_INPUT: TransactionInput = { trigger: 'pressure', mode: 'automatic', range: RANGE, turn: 0 };

export const transactionSpec: MachineSpec<undefined> = {
  name: 'transaction',
  machine: transactionMachine,
  inputs: [
    { label: 'automatic', input: TRANSACTION_INPUT },
    // The model-free last resort its parent chose (here: the breaker is open): no summary is asked for.
    { label: 'truncation', input: { ...TRANSACTION_INPUT, truncation: 'breaker-open' } },
  ],
  initialAux: undefined,
  events: (s) =>
    active(s)
      ? [
          ...invokeOffers<undefined>(s, TRANSACTION_OFFERS),
          { outcome: 'cancel', event: { type: 'cancel' } },
          // The summary's deadline (summaryTimeoutMs) passes while it is still being written.
          ...activeAfterEvents(s).map((type) => ({ outcome: 'summarize:deadline', event: { type } })),
        ]
      : [],
  // A cancel noted while validating or opening is honoured by the next decision: part of the state.
  project: (s) => JSON.stringify([s.value, s.context.cancelRequested]),
  atRest: (s) => s.status === 'done',
  maxDepth: 10,
};

// ---------------------------------------------------------------------------
// pressure

export const PRESSURE_OFFERS: Record<string, Offer[]> = {
  measure: [
    { outcome: 'above', output: { kind: 'reading', reading: READING(5000) } },
    { outcome: 'below', output: { kind: 'reading', reading: READING(3000) } },
    // The provider reported a prompt above the window (it truncated the request silently).
    {
      outcome: 'silent-overflow',
      output: { kind: 'reading', reading: { ...READING(6100), silentOverflow: { seq: 30, promptTokens: 6100 } } },
      states: ['measuring'],
    },
    { outcome: 'unrouted', output: { kind: 'unrouted' }, states: ['measuring'] },
    {
      outcome: 'misconfigured',
      output: { kind: 'misconfigured', provider: 'nowhere', model: 'mystery', code: 'budget-unknown-window', message: 'unknown window' },
      states: ['measuring'],
    },
    { outcome: 'throws', error: error('internal') },
    // The cost model (economics on): below the threshold, compacting now pays, or pruning now pays;
    // above it, its choice of relief: a prune alone, or a summary alone (a prune would free nothing).
    {
      outcome: 'below-pays',
      output: { kind: 'reading', reading: { ...READING(3000), economics: ECONOMICS({ compaction: VERDICT(true) }) } },
      states: ['measuring'],
    },
    {
      outcome: 'below-prune-pays',
      output: { kind: 'reading', reading: { ...READING(3000), economics: ECONOMICS({ prune: VERDICT(true) }) } },
      states: ['measuring'],
    },
    {
      outcome: 'above-nothing-to-prune',
      output: { kind: 'reading', reading: { ...READING(5000), economics: ECONOMICS({ relief: RELIEF('summarize') }) } },
      states: ['measuring'],
    },
    {
      outcome: 'above-prune-relieves',
      output: { kind: 'reading', reading: { ...READING(5000), economics: ECONOMICS({ relief: RELIEF('prune') }) } },
      states: ['measuring'],
    },
    {
      outcome: 'above-prune-then-summarize',
      output: { kind: 'reading', reading: { ...READING(5000), economics: ECONOMICS({ relief: RELIEF('prune-then-summarize') }) } },
      states: ['measuring'],
    },
  ],
  prune: [
    { outcome: 'pruned', output: { count: 1, tokensFreed: 900, generation: 1 } },
    { outcome: 'throws', error: error('budget') },
  ],
  selectRange: [
    { outcome: 'range', output: RANGE },
    { outcome: 'nothing', output: null },
    { outcome: 'throws', error: error('budget') },
  ],
  // After a cancel of this chart (forwarded and remembered), any outcome ends in `cancelled`; without
  // one, `cancelled` is the transaction's own (the host's summarizer aborted: see tx-outcomes.ts).
  transaction: [
    { outcome: 'committed', output: TX_COMMITTED, states: ['compacting'] },
    { outcome: 'cancelled', output: TX_CANCELLED },
    { outcome: 'failed', output: TX_FAILED, states: ['compacting'] },
    { outcome: 'truncated', output: TX_TRUNCATED, states: ['truncating'] },
    { outcome: 'truncation-failed', output: TX_TRUNCATION_FAILED, states: ['truncating'] },
    { outcome: 'chart-error', error: new TypeError('a transaction guard threw') },
  ],
};

export const PRESSURE_INPUTS: Array<{ label: string; input: PressureInput }> = [
  { label: 'prune on', input: { turn: 0, aborted: false, pruneEnabled: true, maxAttempts: 2, silentSeenSeq: -1, fallback: false } },
  { label: 'prune off', input: { turn: 0, aborted: false, pruneEnabled: false, maxAttempts: 2, silentSeenSeq: -1, fallback: false } },
  { label: 'aborted', input: { turn: 0, aborted: true, pruneEnabled: true, maxAttempts: 2, silentSeenSeq: -1, fallback: false } },
  // truncationFallback on (the default): a failed summary is followed by a truncation of the same span.
  { label: 'fallback', input: { turn: 0, aborted: false, pruneEnabled: false, maxAttempts: 2, silentSeenSeq: -1 } },
  // The breaker is open: no summary is asked for, the span is truncated at once.
  { label: 'breaker open', input: { turn: 0, aborted: false, pruneEnabled: false, maxAttempts: 2, silentSeenSeq: -1, modelFree: true } },
];

/**
 * The fallback's paths: over the threshold, one span, its summary failed (or, breaker open, none
 * asked for), then the truncation's own outcomes; the threshold's paths cover everything else.
 */
const FALLBACK_PATH = [
  'measure:above',
  'selectRange:range',
  'transaction:failed',
  'transaction:truncated',
  'transaction:truncation-failed',
  'transaction:chart-error',
  'transaction:cancelled',
  'measure:below',
];
function fallbackOffers<Aux>(s: AnyMachineSnapshot, offers: Array<CatalogEvent<Aux>>): Array<CatalogEvent<Aux>> {
  const c = s.context as { fallback?: boolean; askedNoModel?: boolean; cancelRequested?: boolean };
  if (c.fallback === false) return offers.filter((o) => !o.outcome.startsWith('transaction:truncat'));
  if (c.askedNoModel) return offers.filter((o) => ['measure:above', 'selectRange:range', 'transaction:truncated', 'measure:below'].includes(o.outcome));
  // Without a cancel, `cancelled` is the host summarizer's: left to the threshold's paths.
  return offers.filter((o) => FALLBACK_PATH.includes(o.outcome) && (o.outcome !== 'transaction:cancelled' || c.cancelRequested));
}

/**
 * After a decision of the cost model only what a real session can then give: an early
 * compaction's selection finds the range the cost model weighed (or the route is gone:
 * throws); a skipped prune's, above the threshold, may find nothing (one indivisible unit).
 * Everything after a selection is the threshold's paths' to cover.
 */
function economicOffers<Aux>(s: AnyMachineSnapshot, offers: Array<CatalogEvent<Aux>>): Array<CatalogEvent<Aux>> {
  const decision = (s.context as { economics?: { decision: string } }).economics?.decision;
  if (decision === 'compact-early') return offers.filter((o) => o.outcome === 'selectRange:throws');
  if (decision === 'summarize') return offers.filter((o) => o.outcome === 'selectRange:nothing');
  // A prune the cost model chose (alone above the threshold, or early below it) frees what it weighed: the request ends below.
  if (decision === 'prune' || decision === 'prune-early') return offers.filter((o) => o.outcome === 'prune:pruned' || o.outcome === 'measure:below');
  // A prune that is not enough, then one summary of the pruned surface that is.
  if (decision === 'prune-then-summarize') {
    const next = s.value === 'remeasuringAfterPrune' ? ['measure:above'] : ['prune:pruned', 'selectRange:range', 'transaction:committed', 'measure:below'];
    return offers.filter((o) => next.includes(o.outcome));
  }
  return offers;
}

/**
 * A prune that threw goes on to selection (an optimisation that failed); the world made it throw
 * by unrouting the session, so selection can then only throw too.
 */
type PressureAux = 'prune-failed' | undefined;
function afterPrune(offers: Array<CatalogEvent<PressureAux>>, aux: PressureAux): Array<CatalogEvent<PressureAux>> {
  const marked = offers.map((o): CatalogEvent<PressureAux> => (o.outcome === 'prune:throws' ? { ...o, aux: 'prune-failed' } : o));
  return aux === 'prune-failed' ? marked.filter((o) => o.outcome === 'selectRange:throws') : marked;
}

export const pressureSpec: MachineSpec<PressureAux> = {
  name: 'pressure',
  machine: pressureMachine,
  inputs: PRESSURE_INPUTS,
  initialAux: undefined,
  events: (s, aux) =>
    active(s)
      ? [
          ...afterCancelFirst(afterPrune(economicOffers(s, fallbackOffers(s, invokeOffers<PressureAux>(s, PRESSURE_OFFERS))), aux), s.context.cancelRequested),
          // A cancel on the fallback's paths only while the truncation runs.
          ...(s.context.fallback === false || s.matches('truncating') ? [{ outcome: 'cancel', event: { type: 'cancel' } }] : []),
        ]
      : [],
  // A cancel remembered while compacting decides how the transaction's outcome is taken: part of the state.
  // The cost model's decision too: its paths stay apart from the threshold's (see economicOffers).
  project: (s, aux) =>
    JSON.stringify([
      s.value,
      s.context.pruneEnabled,
      s.context.attempts,
      s.context.cancelRequested,
      s.context.economics?.decision,
      aux,
      s.context.fallback,
      s.context.askedNoModel,
    ]),
  atRest: (s) => s.status === 'done',
  maxDepth: 12,
  // The cost model's choice of a prune then a summary is recorded only when the cost model chose it.
  witness: {
    'pressure.measuring done(measure)#9': (_s, _aux, e) =>
      (e as { output?: { reading?: { economics?: { relief?: unknown } } } }).output?.reading?.economics?.relief !== undefined,
  },
};

// ---------------------------------------------------------------------------
// overflow

export const OVERFLOW_OFFERS: Record<string, Offer[]> = {
  classify: [
    { outcome: 'overflow', output: { kind: 'context-overflow', provider: 'openai', message: 'maximum context length' } },
    { outcome: 'other', output: { kind: 'other', message: 'Invalid tool_calls' } },
    { outcome: 'throws', error: error('internal') },
  ],
  probeLock: [
    { outcome: 'free', output: { held: false, generation: 0 }, states: ['probingLock'] },
    { outcome: 'held', output: { held: true, generation: 0 }, states: ['probingLock'] },
    // In deciding, whether the generation advanced follows from what was written (see overflowSpec).
    { outcome: 'throws', error: error('internal') },
  ],
  prune: [
    { outcome: 'pruned', output: { count: 1, tokensFreed: 900, generation: 1 } },
    { outcome: 'nothing-to-prune', output: { count: 0, tokensFreed: 0, generation: 0 } },
    { outcome: 'throws', error: error('store-closed') },
  ],
  selectRange: [
    { outcome: 'range', output: RANGE },
    { outcome: 'nothing', output: null },
    { outcome: 'throws', error: error('internal') },
  ],
  transaction: [
    { outcome: 'committed', output: { ...TX_COMMITTED, trigger: 'overflow' }, states: ['compacting'] },
    { outcome: 'failed', output: { ...TX_FAILED, trigger: 'overflow' }, states: ['compacting'] },
    { outcome: 'truncated', output: { ...TX_TRUNCATED, trigger: 'overflow' }, states: ['truncating'] },
    { outcome: 'cancelled', output: { ...TX_CANCELLED, trigger: 'overflow' } },
    { outcome: 'chart-error', error: new TypeError('a transaction guard threw') },
  ],
};

const overflowInput = (over: Partial<OverflowInput>): OverflowInput => ({
  error: new Error('context overflow'),
  retriesUsed: 0,
  maxRetries: 1,
  auto: true,
  pruneEnabled: true,
  aborted: false,
  turn: 0,
  ...over,
});

export const OVERFLOW_INPUTS: Array<{ label: string; input: OverflowInput }> = [
  { label: 'recovery on', input: overflowInput({ fallback: false }) },
  { label: 'auto off', input: overflowInput({ auto: false, fallback: false }) },
  // `config.prune.enabled: false` (or the engine's `pruner: false`): recovery goes straight to selection.
  { label: 'prune off', input: overflowInput({ pruneEnabled: false, fallback: false }) },
  { label: 'retries used up', input: overflowInput({ retriesUsed: 1, fallback: false }) },
  { label: 'signal aborted', input: overflowInput({ aborted: true, fallback: false }) },
  // truncationFallback on: a failed summary is followed by a truncation of the same span.
  { label: 'fallback', input: overflowInput({ pruneEnabled: false }) },
  // The breaker is open: no summary is asked for, the span is truncated at once.
  { label: 'breaker open', input: overflowInput({ pruneEnabled: false, modelFree: true }) },
];

/** The fallback's paths (see the pressure chart's): the threshold-free rest is the other inputs'. */
const OVERFLOW_FALLBACK_PATH = [
  'classify:overflow',
  'probeLock:free',
  'selectRange:range',
  'transaction:failed',
  'transaction:truncated',
  'transaction:chart-error',
  'transaction:cancelled',
];
function overflowFallbackOffers<Aux>(s: AnyMachineSnapshot, offers: Array<CatalogEvent<Aux>>): Array<CatalogEvent<Aux>> {
  const c = s.context as { fallback: boolean; modelFree: boolean; cancelled: boolean };
  if (!c.fallback) return offers.filter((o) => !o.outcome.startsWith('transaction:truncat'));
  // With the breaker open a cancel can reach the truncation itself (transaction:cancelled after a
  // cancel): the forward of the cancel to the transaction is then observed.
  const allowed = c.modelFree
    ? ['classify:overflow', 'probeLock:free', 'selectRange:range', 'transaction:truncated', 'transaction:cancelled']
    : OVERFLOW_FALLBACK_PATH;
  return offers.filter(
    (o) =>
      o.outcome.startsWith('probeLock:advanced') ||
      o.outcome.startsWith('probeLock:unchanged') ||
      (allowed.includes(o.outcome) && (o.outcome !== 'transaction:cancelled' || c.cancelled)),
  );
}

export const overflowSpec: MachineSpec<undefined> = {
  name: 'overflow',
  machine: overflowMachine,
  inputs: OVERFLOW_INPUTS,
  initialAux: undefined,
  events: (s) => {
    if (!active(s)) return [];
    const offers = afterCancelFirst(overflowFallbackOffers(s, invokeOffers<undefined>(s, OVERFLOW_OFFERS)), s.context.cancelled);
    if (s.matches('deciding')) {
      // The world's generation advanced exactly when a prune or a commit wrote a replacement.
      const advanced = (s.context.prune?.count ?? 0) > 0 || s.context.transaction?.status === 'committed';
      const probe = activeInvokes(s).find((i) => i.src === 'probeLock')!;
      offers.unshift({
        outcome: advanced ? 'probeLock:advanced' : 'probeLock:unchanged',
        event: { type: `xstate.done.actor.${probe.id}`, output: { held: false, generation: advanced ? 1 : 0 }, actorId: probe.id },
      });
    }
    const cancellable = !s.context.fallback || s.matches('truncating');
    return [...offers, ...(cancellable ? [{ outcome: 'cancel', event: { type: 'cancel' } }] : [])];
  },
  project: (s) =>
    JSON.stringify([
      s.value,
      s.context.fallback,
      s.context.modelFree,
      s.context.auto,
      s.context.pruneEnabled,
      s.context.retriesUsed,
      s.context.cancelled,
      (s.context.prune?.count ?? 0) > 0,
      s.context.transaction?.status,
    ]),
  atRest: (s) => s.status === 'done',
  maxDepth: 10,
};

// ---------------------------------------------------------------------------
// manual

export const MANUAL_OFFERS: Record<string, Offer[]> = {
  checkAdmission: [
    { outcome: 'admitted', output: { openTurn: null, lockHeld: false } },
    { outcome: 'turn-open', output: { openTurn: 0, lockHeld: false } },
    { outcome: 'lock-held', output: { openTurn: null, lockHeld: true } },
    { outcome: 'throws', error: error('internal') },
  ],
  selectRange: [
    { outcome: 'range', output: RANGE },
    { outcome: 'nothing', output: null },
    { outcome: 'throws', error: error('internal') },
  ],
  transaction: [
    { outcome: 'committed', output: { ...TX_COMMITTED, trigger: 'manual' } },
    { outcome: 'failed', output: { ...TX_FAILED, trigger: 'manual' } },
    { outcome: 'chart-error', error: new TypeError('a transaction guard threw') },
    { outcome: 'cancelled', output: { ...TX_CANCELLED, trigger: 'manual' } },
  ],
};

export const MANUAL_INPUTS: Array<{ label: string; input: ManualInput }> = [
  { label: 'signal live', input: { aborted: false, abortReason: undefined, focus: undefined } },
  { label: 'signal aborted', input: { aborted: true, abortReason: 'stop right there', focus: undefined } },
];

/** A cancel the chart forwarded to its transaction (the chart keeps no note of it). */
export interface ManualAux {
  cancelled: boolean;
}

export const manualSpec: MachineSpec<ManualAux> = {
  name: 'manual',
  machine: manualMachine,
  inputs: MANUAL_INPUTS,
  initialAux: { cancelled: false },
  events: (s, aux) => {
    if (!active(s)) return [];
    // Without a cancel, the transaction's own `cancelled` is the host summarizer's: left to the others.
    const offers = invokeOffers<ManualAux>(s, MANUAL_OFFERS).filter((o) => aux.cancelled || o.outcome !== 'transaction:cancelled');
    return [...afterCancelFirst(offers, aux.cancelled), { outcome: 'cancel', event: { type: 'cancel' }, aux: { cancelled: s.matches('compacting') } }];
  },
  project: (s, aux) => JSON.stringify([s.value, aux.cancelled]),
  atRest: (s) => s.status === 'done',
  maxDepth: 8,
};

// ---------------------------------------------------------------------------
// fit (the request about to be sent against its window)

const WINDOW_READING = (totalTokens: number): WindowReading => ({
  provider: 'test',
  model: 'tiny',
  totalTokens,
  messageBudget: 3500,
  window: 4000,
  outputReservation: 500,
});

export const FIT_OFFERS: Record<string, Offer[]> = {
  measure: [
    { outcome: 'within', output: { kind: 'reading', reading: WINDOW_READING(3000) } },
    { outcome: 'over', output: { kind: 'reading', reading: WINDOW_READING(5000) }, states: ['measuring'] },
    // Still over after a cut that freed something: the cut aims past the need, so a real one brings it under.
    { outcome: 'over-after-cut', output: { kind: 'reading', reading: WINDOW_READING(3600) }, states: ['remeasuring'] },
    { outcome: 'unjudged', output: { kind: 'unjudged' }, states: ['measuring'] },
    // The route went away between two readings: only a cut writes in between, so it cannot; the chart still ends.
    { outcome: 'unjudged-after-cut', output: { kind: 'unjudged' }, states: ['remeasuring'] },
    { outcome: 'throws', error: error('internal') },
  ],
  cut: [
    { outcome: 'cut', output: { count: 2, tokensFreed: 1800, generation: 1 } },
    { outcome: 'nothing', output: { count: 0, tokensFreed: 0, generation: 0 } },
    { outcome: 'throws', error: error('store-closed') },
  ],
};

export const FIT_INPUTS: Array<{ label: string; input: FitInput }> = [
  { label: 'cut on', input: { cutEnabled: true, maxCuts: FIT_MAX_CUTS } },
  // config `prune.enabled: false` (or the engine's `pruner: false`): nothing is cut.
  { label: 'cut off', input: { cutEnabled: false, maxCuts: FIT_MAX_CUTS } },
];

export const fitSpec: MachineSpec<undefined> = {
  name: 'fit',
  machine: fitMachine,
  inputs: FIT_INPUTS,
  initialAux: undefined,
  events: (s) => (active(s) ? [...invokeOffers<undefined>(s, FIT_OFFERS), { outcome: 'cancel', event: { type: 'cancel' } }] : []),
  project: (s) => JSON.stringify([s.value, s.context.cutEnabled, s.context.cuts]),
  atRest: (s) => s.status === 'done',
  maxDepth: 2 + 2 * FIT_MAX_CUTS,
};

// ---------------------------------------------------------------------------
// engine: facade calls and job outcomes

export interface EngineAux {
  /** Requests made so far (ids r1, r2, …). */
  requests: number;
  /** The running job was cancelled: only its cancelled outcome can follow. */
  cancelled: boolean;
  /** Unknown models already warned about. */
  warned: number;
}

const pressureOut = (over: Partial<PressureOutput>): PressureOutput => ({ ...restingOutput('below', undefined), ...over });
const overflowFail = (over: Partial<Extract<OverflowOutput, { action: 'fail' }>>): OverflowOutput => ({
  action: 'fail',
  reason: 'not-overflow',
  classification: { kind: 'other', message: 'x' },
  prune: undefined,
  transaction: undefined,
  ...over,
});

const fitOut = (over: Partial<FitOutput>): FitOutput => ({ status: 'fits', before: undefined, after: undefined, cut: undefined, error: undefined, ...over });

/** Job outcomes by running job kind: [outcome, output]. */
export const JOB_OUTCOMES: Record<'pressure' | 'overflow' | 'manual' | 'fit', Array<[string, (aux: EngineAux) => unknown]>> = {
  pressure: [
    ['compacted', () => pressureOut({ status: 'compacted', transactions: [TX_COMMITTED] })],
    ['failed', () => pressureOut({ status: 'failed', transactions: [TX_FAILED], error: TX_FAILED.status === 'failed' ? TX_FAILED.error : undefined })],
    [
      'unknown-model',
      (aux) =>
        pressureOut({
          status: 'skipped',
          skipped: { kind: 'misconfigured', provider: 'nowhere', model: `mystery-${aux.warned + 1}`, code: 'budget-unknown-window', message: 'unknown window' },
        }),
    ],
  ],
  overflow: [
    [
      'retry',
      () =>
        ({
          action: 'retry',
          classification: { kind: 'context-overflow', provider: 'openai', message: 'x' },
          prune: undefined,
          transaction: TX_COMMITTED,
        }) satisfies OverflowOutput,
    ],
    [
      'failed',
      () => overflowFail({ reason: 'summary-failed', classification: { kind: 'context-overflow', provider: 'openai', message: 'x' }, transaction: TX_FAILED }),
    ],
    ['not-overflow', () => overflowFail({})],
  ],
  manual: [
    ['committed', () => ({ status: 'committed', transaction: TX_COMMITTED }) satisfies ManualOutput],
    ['failed', () => ({ status: 'failed', error: { code: 'summary', message: 'x' }, transaction: TX_FAILED }) satisfies ManualOutput],
  ],
  // Every answer of the fit chart settles the same way (its outcomes are the fit chart's own paths).
  fit: [['fits', () => fitOut({ status: 'fits', before: WINDOW_READING(3000), after: WINDOW_READING(3000) })]],
};

const TX_TRUNCATED_OVERFLOW: TransactionOutput = { ...TX_TRUNCATED, trigger: 'overflow' };
const RETRY: Extract<OverflowOutput, { action: 'retry' }> = {
  action: 'retry',
  classification: { kind: 'context-overflow', provider: 'openai', message: 'x' },
  prune: undefined,
  transaction: TX_COMMITTED,
};

/**
 * With truncationFallback on (input 'fallback'): a failed summary followed by a truncation (the
 * breaker counts the failure), or, with the breaker open, a truncation at once (model-free: it
 * counts as nothing).
 */
export const FALLBACK_OUTCOMES: Record<'closed' | 'open', Record<'pressure' | 'overflow', Array<[string, () => unknown]>>> = {
  closed: {
    pressure: [['truncated', () => pressureOut({ status: 'truncated', transactions: [TX_FAILED, TX_TRUNCATED] })]],
    overflow: [
      [
        'retry-truncated',
        () => ({ ...RETRY, transaction: TX_TRUNCATED_OVERFLOW, summaryFailure: { ...TX_FAILED, trigger: 'overflow' } }) satisfies OverflowOutput,
      ],
    ],
  },
  open: {
    pressure: [['truncated-model-free', () => pressureOut({ status: 'truncated', transactions: [TX_TRUNCATED], modelFree: true })]],
    overflow: [['retry-model-free', () => ({ ...RETRY, transaction: TX_TRUNCATED_OVERFLOW, modelFree: true }) satisfies OverflowOutput]],
  },
};

const CANCELLED_OUTPUT: Record<'pressure' | 'overflow' | 'manual', unknown> = {
  pressure: pressureOut({ status: 'cancelled' }),
  overflow: overflowFail({ reason: 'cancelled', classification: { kind: 'context-overflow', provider: 'openai', message: 'x' } }),
  manual: { status: 'failed', error: { code: 'cancelled', message: 'the compaction was cancelled' }, transaction: undefined } satisfies ManualOutput,
};

export const ENGINE_INPUT: EngineInput = {
  auto: true,
  pruneEnabled: true,
  maxAttempts: 2,
  maxOverflowRetries: 1,
  failureLimit: 2,
  cooldownMs: 1000,
  truncationFallback: false,
};

export const engineSpec: MachineSpec<EngineAux> = {
  name: 'engine',
  // The engine's quick check (a cheap measurement) stands here for the event's `quiet` mark.
  machine: compactionMachine.provide({
    guards: { 'pressure is below the threshold': ({ context, event }) => (event as { quiet?: boolean }).quiet === true && context.policy.auto },
  }),
  chart: compactionMachine,
  inputs: [
    { label: 'auto', input: ENGINE_INPUT },
    { label: 'auto off', input: { ...ENGINE_INPUT, auto: false } },
    { label: 'fallback', input: { ...ENGINE_INPUT, truncationFallback: true } },
  ],
  initialAux: { requests: 0, cancelled: false, warned: 0 },
  events: (s, aux) => {
    const out: Array<CatalogEvent<EngineAux>> = [];
    const id = `r${aux.requests + 1}`;
    const made = { ...aux, requests: aux.requests + 1 };
    const current = s.context.current as { id: string; kind: 'pressure' | 'overflow' | 'manual' | 'fit' } | undefined;
    if (s.context.truncationFallback) {
      // The fallback's paths: steps and overflow errors, each job relieved by a truncation.
      if (current) {
        const breaker = (s as unknown as { matches(value: unknown): boolean }).matches({ breaker: 'open' }) ? 'open' : 'closed';
        for (const [outcome, output] of FALLBACK_OUTCOMES[breaker][current.kind as 'pressure' | 'overflow']) {
          out.push({ outcome: `${current.kind}:${outcome}`, event: { type: 'xstate.done.actor.job', output: output(), actorId: 'job' }, aux });
        }
        return out;
      }
      out.push({ outcome: 'afterStep', event: { type: 'step.completed', id, turn: 0, aborted: false }, aux: made });
      out.push({
        outcome: 'onRequestError',
        event: { type: 'request.failed', id, error: new Error('overflow'), turn: 0, aborted: false, lastAssistantSeq: aux.requests },
        aux: made,
      });
      return out;
    }
    if (current) {
      const done = (outcome: string, output: unknown, next: EngineAux): CatalogEvent<EngineAux> => ({
        outcome: `${current.kind}:${outcome}`,
        event: { type: 'xstate.done.actor.job', output, actorId: 'job' },
        aux: next,
      });
      if (aux.cancelled) out.push(done('cancelled', CANCELLED_OUTPUT[current.kind as 'pressure' | 'overflow' | 'manual'], { ...aux, cancelled: false }));
      else {
        for (const [outcome, output] of JOB_OUTCOMES[current.kind]) {
          out.push(done(outcome, output(aux), outcome === 'unknown-model' ? { ...aux, warned: aux.warned + 1 } : aux));
        }
        out.push({
          outcome: `${current.kind}:chart-error`,
          event: { type: 'xstate.error.actor.job', error: new TypeError(`a ${current.kind} guard threw`), actorId: 'job' },
          aux,
        });
        // The fit chart is cancelled too (its own paths show it); here a job's cancel is taken with the jobs that wait on a model.
        if (current.kind !== 'fit') out.push({ outcome: 'cancel', event: { type: 'cancel', id: current.id }, aux: { ...aux, cancelled: true } });
      }
    }
    out.push({ outcome: 'afterStep', event: { type: 'step.completed', id, turn: 0, aborted: false }, aux: made });
    out.push({ outcome: 'afterStep below', event: { type: 'step.completed', id, turn: 0, aborted: false, quiet: true }, aux: made });
    out.push({
      outcome: 'onRequestError',
      event: { type: 'request.failed', id, error: new Error('overflow'), turn: 0, aborted: false, lastAssistantSeq: aux.requests },
      aux: made,
    });
    out.push({ outcome: 'compactNow', event: { type: 'compact.requested', id, aborted: false, abortReason: undefined, focus: undefined }, aux: made });
    out.push({ outcome: 'beforeRequest', event: { type: 'request.ready', id }, aux: made });
    for (const type of activeAfterEvents(s)) out.push({ outcome: 'cool-down elapses', event: { type } });
    // A running job's charts announce through the engine chart (the real ones do so whenever they
    // prune or compact: the runner produces nothing for this step).
    if (current)
      out.push({ outcome: 'notify', event: { type: 'xcompact.notify', notification: { type: 'pruned', trigger: current.kind, count: 1, tokensFreed: 100 } } });
    out.push({ outcome: 'stop', event: { type: 'shutdown' } });
    return out;
  },
  // Failures beyond the limit behave alike: the breaker's guard only asks whether the limit is reached.
  project: (s, aux) =>
    JSON.stringify([
      s.value,
      s.context.auto,
      s.context.truncationFallback,
      Math.min(s.context.consecutiveFailures, s.context.failureLimit),
      Math.min(s.context.overflowRetries, s.context.maxOverflowRetries + 1),
      (s.context.current as { kind?: string } | undefined)?.kind,
      aux.cancelled,
    ]),
  // A success resets the breaker's count and a later overflow the retries only when there is
  // something to reset: their paths come after a failure, or after a retry granted.
  witness: {
    'engine.breaker.closed breaker.success#0': (s) => s.context.consecutiveFailures > 0,
    'engine.work.idle request.failed#0': (s) => s.context.overflowRetries > 0,
  },
  atRest: (s) => s.status === 'done' || (s.value as { work: string }).work === 'idle',
  maxDepth: 8,
};

export const SPECS = [transactionSpec, pressureSpec, overflowSpec, manualSpec, fitSpec, engineSpec, backgroundSpec, gateSpec] as const;

const cached = new Map<string, Coverage>();

/** Generated paths and static coverage of one chart (computed once per process). */
export function coverageOf(name: string): Coverage {
  let c = cached.get(name);
  if (!c) {
    const spec = SPECS.find((s) => s.name === name);
    if (!spec) throw new Error(`no chart ${name}`);
    c = generatePaths(spec as MachineSpec<unknown>);
    cached.set(name, c);
  }
  return c;
}

/** Generated paths and static coverage of every chart. */
export function allCoverage(): Map<string, Coverage> {
  return new Map(SPECS.map((s) => [s.name, coverageOf(s.name)]));
}

/**
 * Outcomes the runtime suites force (a service replaced to give the result) because no real
 * condition produces them, with why; every other outcome is produced by arranging the world.
 */
export const FORCED_OUTCOMES: Record<string, Record<string, string>> = {
  transaction: {
    'revalidate:throws': 'revalidation is arithmetic over the surface; nothing makes it throw',
    'truncate:throws': 'the truncation only derives the span ledger from the log; nothing makes it throw',
  },
  pressure: {
    'measure:throws':
      'the meter throws only on a bug: a tokenizer that cannot load fails when the engine is created (TokenMeter resolves it then), not at a measurement',
    'transaction:chart-error': 'a bug inside the transaction chart (its guard throws)',
  },
  overflow: {
    'probeLock:throws': 'the lock probe only reads the session',
    'selectRange:throws': 'selection here only reads the session',
    'transaction:chart-error': 'a bug inside the transaction chart (its guard throws)',
  },
  manual: {
    'checkAdmission:throws': 'admission only reads the session',
    'selectRange:throws': 'selection here only reads the session',
    'transaction:chart-error': 'a bug inside the transaction chart (its guard throws)',
  },
  fit: {
    'measure:throws': 'the meter throws only on a bug (as in the pressure chart)',
    'measure:unjudged-after-cut': 'only a cut writes between two readings, and a cut changes no route',
    'measure:over-after-cut': 'a cut aims past what the request is over by (priced after it is written), so one that freed something brings it under',
    'cut:throws': 'the cut checks every write before the first (applyPrune); a store that fails refuses the engine before',
  },
  engine: {
    'fit:chart-error': 'a bug inside the fit chart',
    'pressure:chart-error': 'a bug inside the pressure chart',
    'overflow:chart-error': 'a bug inside the overflow chart',
    'manual:chart-error': 'a bug inside the manual chart',
  },
  background: {
    'cancel:unasked': 'a cancel with nothing running: only a waiting job cancels a run, and none waits',
    'revalidate:throws': 'revalidation is arithmetic over the surface; nothing makes it throw',
  },
  gate: { 'measure:throws': 'the meter throws only on a bug (as in the pressure chart)' },
};

/** Generated paths of a chart that force at least one outcome. */
export function forcedPaths(name: string, c: Coverage): number {
  const forced = FORCED_OUTCOMES[name] ?? {};
  return c.paths.filter((p) => p.steps.some((s) => s.outcome in forced)).length;
}
