/**
 * The work the charts invoke, one function per invoked actor, built over one session from the
 * service modules. `createCompactionMachine` turns each into an actor; the `services` option
 * can wrap or replace any of them (tests drive every chart transition this way, a host can
 * plug in its own range policy).
 */
import type { TransactionActorInputs } from '../machines/transaction';
import type {
  CommitRecord,
  LockProbe,
  OpenedBracket,
  PruneInput,
  PruneSummary,
  ReadingResult,
  SelectInput,
  SpanCheck,
  SummaryOutcome,
  Verdict,
} from '../machines/types';
import { BracketWriter } from '../services/transaction';
import type { ServiceDeps } from '../services/core';
import { measurePressure, measureWindow, type WindowResult } from '../services/pressure';
import { classifyRequestError, type RequestErrorClass } from '../services/overflow';
import { cutToFit, pruneSurface } from '../services/pruning';
import type { RangeSelection } from '../services/selection';
import { selectSpan, type OverflowCount } from '../services/selection';
import { revalidateSpan, truncateSpan, validateSpan } from '../services/transaction';
import { SummarizerError, type Summarizer } from '../services/summarizing';
import { buildSummaryRequest } from '../services/transaction';

export interface EngineServices {
  measure(input: { phase: 'initial' | 'after-prune' | 'after-compaction' }): ReadingResult;
  prune(input: PruneInput): PruneSummary;
  /** The request about to be sent against its window (the fit chart's reading). */
  measureWindow(): WindowResult;
  /** Cuts the largest tool results so the request is `need` provider tokens smaller (the fit chart's cut). */
  cut(input: { need: number }): PruneSummary;
  selectRange(input: SelectInput): RangeSelection | null;
  validateSpan(input: TransactionActorInputs['validateSpan']): SpanCheck;
  openBracket(input: TransactionActorInputs['openBracket']): OpenedBracket;
  summarize(input: TransactionActorInputs['summarize'], signal: AbortSignal): Promise<SummaryOutcome>;
  /** The truncation checkpoint (the model-free last resort): the span's ledger alone. */
  truncate(input: TransactionActorInputs['truncate']): SummaryOutcome;
  revalidate(input: TransactionActorInputs['revalidate']): Verdict;
  commit(input: TransactionActorInputs['commit']): CommitRecord;
  flush(input: TransactionActorInputs['flush']): Promise<void>;
  closeWithError(input: TransactionActorInputs['closeWithError']): Promise<void>;
  classify(input: { error: unknown }): RequestErrorClass;
  probeLock(input: { purpose: 'admit' | 'decide' }): LockProbe;
  checkAdmission(input: { purpose: 'manual' }): { openTurn: number | null; lockHeld: boolean };
}

/** Lock and admission probes: plain reads of the session. */
export function probeLock({ session }: Pick<ServiceDeps, 'session'>): LockProbe {
  return { held: session.lock.held, generation: session.surface.replaceGeneration };
}

export function checkAdmission({ session }: Pick<ServiceDeps, 'session'>): { openTurn: number | null; lockHeld: boolean } {
  return { openTurn: session.openTurn, lockHeld: session.lock.held };
}

/** Runs the summarizer on a span; a SummarizerError carries the chart code it maps to. */
export async function summarizeSpan(
  deps: Pick<ServiceDeps, 'session' | 'config' | 'tokenizerName'> & Partial<Pick<ServiceDeps, 'meter' | 'tokenizerFor'>>,
  summarizer: Summarizer,
  input: TransactionActorInputs['summarize'],
  signal: AbortSignal,
): Promise<SummaryOutcome> {
  try {
    const r = await summarizer.summarize(buildSummaryRequest(deps, input.range, input.focus), signal);
    const out: SummaryOutcome = { text: r.text, requests: r.requests };
    if (r.provider) out.provider = r.provider;
    if (r.model) out.model = r.model;
    if (r.usage) out.usage = r.usage;
    return out;
  } catch (err) {
    if (err instanceof SummarizerError) {
      throw Object.assign(err, { chartCode: err.code === 'summary-cancelled' ? 'cancelled' : 'summary' });
    }
    throw err;
  }
}

export interface BuiltServices {
  services: EngineServices;
  brackets: BracketWriter;
  /** The summarizer's own error of the latest transaction (the cause a CompactionError carries). */
  lastSummaryError(): unknown;
}

/** An overflow error's count more than this many times off our calibrated estimate is not this request's. */
const PLAUSIBLE_COUNT_FACTOR = 4;

export function createEngineServices(deps: ServiceDeps, summarizer: Summarizer): BuiltServices {
  const brackets = new BracketWriter(deps);
  let lastSummaryError: unknown;
  /** What the latest overflow error said (its window, and how our figure compared), for the recovery that follows it. */
  let overflowSeen: OverflowCount | undefined;
  const services: EngineServices = {
    measure: () => measurePressure(deps),
    prune: (input) => pruneSurface(deps, input),
    measureWindow: () => measureWindow(deps),
    cut: (input) => cutToFit(deps, input),
    selectRange: (input) => selectSpan(deps, input, input.purpose === 'overflow' ? overflowSeen : undefined),
    validateSpan: (input) => validateSpan(deps.session, input),
    openBracket: (input) => {
      const opened = brackets.open(input);
      lastSummaryError = undefined;
      return opened;
    },
    summarize: async (input, signal) => {
      try {
        return await summarizeSpan(deps, summarizer, input, signal);
      } catch (err) {
        lastSummaryError = err;
        throw err;
      }
    },
    truncate: (input) => truncateSpan(deps, input),
    revalidate: (input) => revalidateSpan(deps, input),
    commit: (input) => brackets.commit(input),
    flush: () => brackets.flush(),
    closeWithError: (input) => brackets.closeWithError(input),
    classify: ({ error }) => {
      const c = classifyRequestError(error);
      // The provider counted the refused request: anchor and calibrate on it at once (docs/local-models.md#counts-the-tokenizer-is-not-ours).
      overflowSeen = undefined;
      const before = c.kind === 'context-overflow' && c.promptTokens !== undefined ? deps.meter.measure() : undefined;
      // A count far from anything our estimate allows describes another request (a gateway's
      // canned error, a misrouted model): it neither anchors nor decides.
      if (
        before &&
        c.promptTokens! <= before.calibratedTokens * PLAUSIBLE_COUNT_FACTOR &&
        c.promptTokens! * PLAUSIBLE_COUNT_FACTOR >= before.calibratedTokens
      ) {
        deps.meter.observePromptCount(c.promptTokens!);
        if (c.limitTokens !== undefined) overflowSeen = { limitTokens: c.limitTokens, promptTokens: c.promptTokens!, before };
      } else if (c.kind === 'context-overflow' && c.promptTokens === undefined && c.limitTokens !== undefined) {
        // A window without a count (OpenRouter's "about N"): the model's own server priced every
        // node (tokenizer 'server', nothing left to the fallback), so our figure is the count.
        const m = deps.meter.measure();
        if (m.tokenizer === 'server' && m.fallbackNodes === 0) overflowSeen = { limitTokens: c.limitTokens, promptTokens: m.totalTokens, before: m };
      }
      return c;
    },
    probeLock: () => probeLock(deps),
    checkAdmission: () => checkAdmission(deps),
  };
  return { services, brackets, lastSummaryError: () => lastSummaryError };
}
