/**
 * Transitions the charts must have, written down from SPEC.md and DESIGN.md, independent of what
 * the charts hold today: a required transition deleted from a chart shows as missing, instead
 * of leaving both sides of the coverage figure.
 *
 * Three kinds:
 * - general rules: every waiting (invoking) state handles `cancel` (its own handler or an
 *   ancestor's; DESIGN "cancellation from every waiting state"); every invoked service has its
 *   error transition;
 * - the decisions SPEC.md names (a guard and where it leads), listed below per chart;
 * - a crash path for every state a chart can rest in (checked at run time by crash.test.ts): an
 *   eventless state is left in the macrostep that enters it, so no crash can happen there.
 *
 * Coverage = covered ÷ (required ∪ present): the union holds every transition written in the
 * chart plus every required one that matches none of them.
 */
import type { AnyStateMachine } from 'xstate';
import { statesOfConfig, transitionDefs, type TransitionInfo } from './model';

export interface RequiredTransition {
  source: string;
  /** Event label as in model.ts: `cancel`, `done(src)`, `error(src)`, `always`, `after(delay)`. */
  event: string;
  /** The candidate's guard; omitted: the unguarded candidate. */
  guard?: string;
  /** Where it leads (local state name); omitted: anywhere. `null`: it stays (targetless). */
  target?: string | null;
  /** `cancel`: satisfied by a handler on the state or on an ancestor. */
  inherited?: boolean;
  why: string;
}

const S5 = 'docs/spec.md#5-the-transaction transaction';
const S4 = 'docs/spec.md#4-pressure-compaction pressure';
const S6 = 'docs/spec.md#6-overflow-recovery overflow recovery';
const S9 = 'docs/spec.md#9-manual-compaction-compact manual compaction';
const CANCEL = 'DESIGN: cancellation from every waiting state; docs/spec.md#5-the-transaction: a summary finished after cancel is never committed';
const BREAKER = 'docs/spec.md#10-where-the-usual-way-falls-short-and-what-xcompact-does-instead/§14: circuit breaker for repeated failures';
const S13 = 'docs/spec.md#13-background-compaction background compaction';
const S19 = 'docs/spec.md#19-the-request-fits the request fits';

/** The decisions SPEC.md names, per chart. */
export const SPEC_DECISIONS: Record<string, RequiredTransition[]> = {
  transaction: [
    { source: 'validating', event: 'done(validateSpan)', guard: 'lock is held', target: 'rejected', why: `${S5}: an unmatched compaction/start is busy` },
    { source: 'validating', event: 'done(validateSpan)', guard: 'cancel was requested', target: 'rejected', why: CANCEL },
    { source: 'validating', event: 'done(validateSpan)', target: 'opening', why: S5 },
    { source: 'opening', event: 'done(openBracket)', guard: 'cancel was requested', target: 'closing', why: CANCEL },
    { source: 'opening', event: 'done(openBracket)', target: 'summarizing', why: S5 },
    { source: 'summarizing', event: 'cancel', target: 'closing', why: `${S5}: summarize (cancellable)` },
    { source: 'summarizing', event: 'done(summarize)', target: 'revalidating', why: S5 },
    { source: 'revalidating', event: 'cancel', target: 'closing', why: CANCEL },
    { source: 'revalidating', event: 'done(revalidate)', guard: 'surface changed', target: 'closing', why: `${S5}: stability check` },
    { source: 'revalidating', event: 'done(revalidate)', guard: 'checkpoint does not shrink the span', target: 'closing', why: `${S5}: shrink check` },
    {
      source: 'revalidating',
      event: 'done(revalidate)',
      guard: 'too little progress',
      target: 'closing',
      why: 'docs/spec.md#10-where-the-usual-way-falls-short-and-what-xcompact-does-instead: skip a pass that frees too little (minProgressRatio)',
    },
    { source: 'revalidating', event: 'done(revalidate)', target: 'committing', why: S5 },
    { source: 'committing', event: 'done(commit)', target: 'flushing', why: `${S5}/§9: flush the store before resolving` },
    { source: 'flushing', event: 'done(flush)', target: 'committed', why: S5 },
    { source: 'flushing', event: 'error(flush)', target: 'persistenceFailed', why: `${S9}: errors carry persistence` },
    { source: 'closing', event: 'error(closeWithError)', target: 'failed', why: `${S5}: exactly one compaction/end {error} attempt; an orphan start remains` },
  ],
  pressure: [
    { source: 'checkingSignal', event: 'always', guard: 'signal already aborted', target: 'cancelled', why: CANCEL },
    { source: '(root)', event: 'cancel', target: 'cancelled', why: CANCEL },
    { source: 'measuring', event: 'done(measure)', guard: 'below threshold', target: 'below', why: `${S4}: below threshold, nothing` },
    { source: 'measuring', event: 'done(measure)', guard: 'pruning is enabled', target: 'pruning', why: `${S4}: prune first` },
    {
      source: 'remeasuringAfterPrune',
      event: 'done(measure)',
      guard: 'below threshold',
      target: 'relievedByPruning',
      why: `${S4}: below after pruning, no summary call`,
    },
    { source: 'selecting', event: 'done(selectRange)', guard: 'nothing to compact', target: 'failed', why: `${S4}: nothing to compact, nothing written` },
    { source: 'remeasuring', event: 'done(measure)', guard: 'below threshold', target: 'compacted', why: `${S4}: stop when below threshold` },
    { source: 'remeasuring', event: 'done(measure)', guard: 'attempts left', target: 'selecting', why: `${S4}: up to 1 + compactionRetries attempts` },
    { source: 'remeasuring', event: 'done(measure)', target: 'failed', why: `${S4}: still above threshold after N attempts` },
  ],
  overflow: [
    { source: 'classifying', event: 'done(classify)', guard: 'not a context overflow', target: 'declined', why: `${S6}: any other error keeps the original` },
    { source: 'classifying', event: 'done(classify)', guard: 'retries are used up', target: 'declined', why: `${S6}: under maxOverflowRetries` },
    { source: 'classifying', event: 'done(classify)', guard: 'cancelled', target: 'declined', why: `${S6}: if not cancelled` },
    { source: 'probingLock', event: 'done(probeLock)', guard: 'lock is held', target: 'declined', why: `${S6}: check the lock before pruning` },
    { source: 'deciding', event: 'done(probeLock)', guard: 'generation advanced', target: 'retry', why: `${S6}: retry only if replaceGeneration advanced` },
    { source: 'deciding', event: 'done(probeLock)', target: 'declined', why: S6 },
  ],
  fit: [
    { source: 'measuring', event: 'done(measure)', guard: 'within the budget', target: 'fits', why: `${S19}: a request within its window is sent as it is` },
    {
      source: 'measuring',
      event: 'done(measure)',
      guard: 'over the budget, cutting on',
      target: 'cutting',
      why: `${S19}: over the window, the largest tool results are cut`,
    },
    { source: 'measuring', event: 'done(measure)', guard: 'over the budget, cutting off', target: 'over', why: `${S19}: pruning off, nothing is cut: refused` },
    { source: 'cutting', event: 'done(cut)', guard: 'the cut freed nothing', target: 'over', why: `${S19}: refused only when no cut brings it under` },
    { source: 'remeasuring', event: 'done(measure)', guard: 'within the budget', target: 'fits', why: `${S19}: the cut brought it under` },
    { source: 'remeasuring', event: 'done(measure)', guard: 'over the budget, no cuts left', target: 'over', why: `${S19}: refused after the last cut` },
  ],
  manual: [
    {
      source: 'checkingSignal',
      event: 'always',
      guard: 'signal already aborted',
      target: 'cancelled',
      why: `${S9}: a pre-aborted signal fails at once, writes nothing`,
    },
    { source: 'admitting', event: 'done(checkAdmission)', guard: 'a turn is open', target: 'busy', why: `${S9}: only when no turn is open` },
    { source: 'admitting', event: 'done(checkAdmission)', guard: 'lock is held', target: 'busy', why: `${S9}: busy` },
    { source: 'selecting', event: 'done(selectRange)', guard: 'nothing to compact', target: 'nothing', why: `${S9}: nothing to compact → null` },
    { source: 'admitting', event: 'cancel', target: 'cancelled', why: CANCEL },
    { source: 'selecting', event: 'cancel', target: 'cancelled', why: CANCEL },
  ],
  engine: [
    {
      source: 'work.admitting',
      event: 'always',
      guard: 'automatic compaction is off',
      target: 'work.idle',
      why: 'docs/spec.md#14-many-workers-one-session-the-postgresql-store: per-model policy auto off',
    },
    {
      source: 'work.admitting',
      event: 'always',
      guard: 'breaker is open & the fallback is off',
      target: 'work.idle',
      why: `${BREAKER} (truncationFallback: false)`,
    },
    // docs/reliability.md: with the breaker open the job still runs, model-free (a prune, then a truncation checkpoint).
    { source: 'work.admitting', event: 'always', target: 'work.pressure', why: 'DESIGN: the model-free fallback when summaries cannot help' },
    { source: 'work.pressure', event: 'done(job)', guard: 'automatic compaction failed', target: 'work.idle', why: BREAKER },
    { source: 'breaker.closed', event: 'breaker.failure', guard: 'this failure reaches the limit', target: 'breaker.open', why: BREAKER },
    { source: 'breaker.open', event: 'after(cooldown)', target: 'breaker.closed', why: BREAKER },
    { source: 'breaker.open', event: 'breaker.success', target: 'breaker.closed', why: BREAKER },
    { source: 'work', event: 'cancel', guard: 'is the running request', target: null, why: CANCEL },
    { source: 'work', event: 'shutdown', target: 'work.stopped', why: 'engine.stop(): leaving the job stops it' },
  ],
  background: [
    {
      source: 'idle',
      event: 'step',
      guard: 'the prepare point is reached',
      target: 'selecting',
      why: `${S13}: from the prepare point, select the span and start summarizing`,
    },
    { source: 'idle', event: 'step', target: null, why: `${S13}: nothing running, below the prepare point: the job runs as usual` },
    {
      source: '(root)',
      event: 'step',
      guard: 'the step must wait',
      why: `${S13}: the wait point (halfway from the threshold to the message budget) reached while the summary runs: afterStep waits (the only wait); below it the request still fits and the agent goes on`,
    },
    {
      source: 'held',
      event: 'step',
      guard: 'the step reached the threshold',
      why: `${S13}: a summary ready and held is committed from the threshold: the step waits for the commit, not for a model`,
    },
    { source: '(root)', event: 'await', target: null, why: `${S13}: overflow and compactNow wait for a running summary` },
    { source: 'selecting', event: 'done(selectRange)', guard: 'nothing to compact', target: 'idle', why: `${S4}: nothing to compact, nothing written` },
    { source: 'validating', event: 'done(validateSpan)', guard: 'lock is held', target: 'idle', why: `${S13}: one bracket at a time (busy)` },
    { source: 'summarizing', event: 'cancel', target: 'cancelled', why: `${S13}: cancellation behaves as in the foreground path` },
    { source: 'ready', event: 'done(revalidate)', guard: 'span changed', target: 'closing', why: `${S13}: stability for a background commit` },
    { source: 'ready', event: 'done(revalidate)', guard: 'checkpoint does not shrink the span', target: 'closing', why: `${S5}: shrink check` },
    {
      source: 'ready',
      event: 'done(revalidate)',
      guard: 'too little progress',
      target: 'closing',
      why: 'docs/spec.md#10-where-the-usual-way-falls-short-and-what-xcompact-does-instead: skip a pass that frees too little (minProgressRatio)',
    },
    {
      source: 'ready',
      event: 'done(revalidate)',
      guard: 'the commit is due',
      target: 'committing',
      why: `${S13}: committed at once when a job waits, the cost model started the run, or backgroundCommit is 'ready'`,
    },
    {
      source: 'ready',
      event: 'done(revalidate)',
      target: 'held',
      why: 'docs/spec.md#13-background-compaction: held below the threshold: nothing is shadowed before the threshold says so',
    },
    {
      source: 'held',
      event: 'always',
      guard: 'a job is waiting',
      target: 'ready',
      why: 'docs/spec.md#13-background-compaction: a job that must wait commits the held summary, checked again first',
    },
    { source: 'flushing', event: 'done(flush)', target: 'idle', why: `${S13}/§9: flush the store before the run ends` },
    {
      source: 'opening',
      event: 'done(openBracket)',
      guard: 'the server has one slot',
      target: 'awaitingSlot',
      why: 'docs/local-models.md#one-server-slot-background-summaries-while-the-tools-run: one server slot: not while the agent waits for its reply',
    },
    {
      source: 'awaitingSlot',
      event: 'agent.working',
      target: 'summarizing',
      why: "docs/local-models.md#one-server-slot-background-summaries-while-the-tools-run: one server slot: the summary runs while the agent's tools run",
    },
  ],
  gate: [
    {
      source: 'start',
      event: 'always',
      guard: 'the job is cancelled',
      target: 'running',
      why: `${S13}: cancellation behaves as in the foreground path (nothing prepared for a caller that gave up)`,
    },
    {
      source: 'measuring',
      event: 'done(measure)',
      guard: 'the job is cancelled',
      target: 'running',
      why: `${S13}: cancellation behaves as in the foreground path`,
    },
    { source: 'start', event: 'always', guard: 'the job is pressure', target: 'measuring', why: `${S13}: a step is judged by its reading` },
    {
      source: 'start',
      event: 'always',
      guard: 'the error is no overflow',
      target: 'running',
      why: 'the agent is not kept waiting: a request error that is no overflow waits for no background summary (nor commits a held one)',
    },
    { source: 'consulting', event: 'background.preparing', target: 'preparing', why: `${S13}: afterStep returns at once ('preparing')` },
    { source: 'consulting', event: 'background.proceed', target: 'running', why: `${S13}: nothing running: the job runs as usual` },
    { source: 'consulting', event: 'background.waiting', target: 'waiting', why: `${S13}: the only wait` },
    { source: 'waiting', event: 'background.settled', target: 'running', why: `${S13}: then decide as §4, §6, §9` },
    { source: 'waiting', event: 'cancel', target: null, why: `${S13}: the wait is cancellable` },
  ],
};

/**
 * Invokes whose failure a chart leaves to its parent on purpose (no error transition of its
 * own): the parent's error transition, itself required, handles it.
 */
export const ESCALATED: Record<string, Record<string, string>> = {
  gate: {
    job: "a job chart that fails (a bug) fails the gate with it: the engine's error(job) transition, required on the engine, reports it as the job's chart error",
  },
};

function ancestors(state: string): string[] {
  if (state === '(root)') return ['(root)'];
  const parts = state.split('.');
  return [...parts.map((_, i) => parts.slice(0, parts.length - i).join('.')), '(root)'];
}

/** The required transitions of a chart: the general rules over its states, then SPEC's decisions. */
export function requiredTransitions(name: string, machine: AnyStateMachine): RequiredTransition[] {
  const out: RequiredTransition[] = [];
  for (const s of statesOfConfig(machine.config as never)) {
    if (s.invokes.length === 0) continue;
    out.push({ source: s.name, event: 'cancel', inherited: true, why: CANCEL });
    for (const src of s.invokes) {
      if (ESCALATED[name]?.[src]) continue;
      out.push({ source: s.name, event: `error(${src})`, why: `every invoked service has its error transition (${src})` });
    }
  }
  return [...out, ...(SPEC_DECISIONS[name] ?? [])];
}

export function describeRequired(machine: string, r: RequiredTransition): string {
  const arrow = r.target === undefined ? '…' : r.target === null ? '(stays)' : r.target;
  return `${machine}: ${r.source} --${r.event}${r.guard ? ` [${r.guard}]` : ''}--> ${arrow}${r.inherited ? ' (or an ancestor handles it)' : ''}`;
}

/** The present transition that satisfies `r`, if any. */
export function matchRequired(r: RequiredTransition, present: readonly TransitionInfo[]): TransitionInfo | undefined {
  const sources = r.inherited ? ancestors(r.source) : [r.source];
  for (const source of sources) {
    const found = present.find(
      (t) =>
        t.source === source &&
        t.event === r.event &&
        (r.inherited || t.guard === r.guard) &&
        (r.target === undefined || (r.target === null ? t.targets.length === 0 : t.targets[0] === r.target)),
    );
    if (found) return found;
    // The nearest handler decides: an ancestor's does not count when the state has its own.
    if (present.some((t) => t.source === source && t.event === r.event)) return undefined;
  }
  return undefined;
}

/** States a crash can happen in: every atomic state but an eventless one (left in the macrostep entering it). */
export function crashStates(machine: AnyStateMachine): { states: string[]; transient: string[] } {
  const all = statesOfConfig(machine.config as never);
  const defs = transitionDefs(machine);
  const compound = new Set(all.filter((s) => all.some((c) => c.name.startsWith(`${s.name}.`))).map((s) => s.name));
  const transient = all.filter((s) => defs.some((t) => t.source === s.name && t.event === 'always' && t.guard === undefined)).map((s) => s.name);
  return { states: all.map((s) => s.name).filter((n) => !compound.has(n) && !transient.includes(n)), transient };
}

export interface RequiredCoverage {
  machine: string;
  required: RequiredTransition[];
  /** Required transitions no present transition satisfies. */
  missingRequired: RequiredTransition[];
  present: TransitionInfo[];
  /** |required ∪ present| */
  union: number;
  covered: number;
  uncovered: string[];
}

export function requiredCoverage(name: string, machine: AnyStateMachine, coveredKeys: ReadonlySet<string>): RequiredCoverage {
  const present = transitionDefs(machine);
  const required = requiredTransitions(name, machine);
  const missingRequired = required.filter((r) => !matchRequired(r, present));
  const uncoveredPresent = present.filter((t) => !coveredKeys.has(t.key)).map((t) => t.name);
  return {
    machine: name,
    required,
    missingRequired,
    present,
    union: present.length + missingRequired.length,
    covered: present.length - uncoveredPresent.length,
    uncovered: [...missingRequired.map((r) => `missing: ${describeRequired(name, r)} (${r.why})`), ...uncoveredPresent.map((n) => `not covered: ${n}`)],
  };
}
