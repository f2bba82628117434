/**
 * Which transitions of the engine's charts a user's loop exercised: every microstep of every
 * actor in the engine's system (watched with XState's `system.inspect`), matched against the
 * transitions the seven charts define.
 */
import type { AnyActorRef, AnyStateMachine, AnyStateNode, InspectionEvent } from 'xstate';
import { backgroundMachine } from '../../machines/background';
import { compactionMachine } from '../../machines/compaction';
import { gateMachine } from '../../machines/gate';
import { manualMachine } from '../../machines/manual';
import { overflowMachine } from '../../machines/overflow';
import { pressureMachine } from '../../machines/pressure';
import { transactionMachine } from '../../machines/transaction';

export interface TransitionLog {
  /** Per chart (its machine id), the transitions taken: `source --event--> target`. */
  taken: Map<string, Set<string>>;
}

const CHARTS: readonly AnyStateMachine[] = [
  compactionMachine,
  pressureMachine,
  backgroundMachine,
  transactionMachine,
  overflowMachine,
  gateMachine,
  manualMachine,
];

interface TransitionLike {
  source: { id: string };
  eventType: string;
  target?: ReadonlyArray<{ id: string }> | undefined;
}

function keyOf(t: TransitionLike): string {
  const target = t.target && t.target.length > 0 ? t.target.map((n) => n.id).join(',') : '(self)';
  return `${t.source.id} --${t.eventType}--> ${target}`;
}

function chartOf(t: TransitionLike): string {
  return t.source.id.split('.')[0]!;
}

/** Starts recording the microsteps of `actor`'s whole system into `log`. */
export function collectTransitions(actor: AnyActorRef, log: TransitionLog): void {
  actor.system.inspect((event: InspectionEvent) => {
    if (event.type !== '@xstate.microstep') return;
    for (const t of event._transitions as unknown as TransitionLike[]) {
      const chart = chartOf(t);
      if (!log.taken.has(chart)) log.taken.set(chart, new Set());
      log.taken.get(chart)!.add(keyOf(t));
    }
  });
}

/** Every transition the charts define, per chart id. */
export function chartTransitions(): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const visit = (node: AnyStateNode, into: Set<string>) => {
    for (const list of node.transitions.values()) for (const t of list) into.add(keyOf(t));
    for (const t of node.always ?? []) into.add(keyOf(t));
    for (const child of Object.values(node.states)) visit(child as AnyStateNode, into);
  };
  for (const machine of CHARTS) {
    const set = new Set<string>();
    visit(machine.root, set);
    out.set(machine.id, set);
  }
  return out;
}

export interface ChartCoverage {
  chart: string;
  taken: number;
  total: number;
  /** Transitions no run took. */
  missing: string[];
}

/** The charts' transitions the loop took over several runs (e.g. every scenario's report). */
export function loopCoverage(logs: ReadonlyArray<TransitionLog | { transitions: TransitionLog }>): ChartCoverage[] {
  const all = chartTransitions();
  const taken = new Map<string, Set<string>>();
  for (const item of logs) {
    const log = 'taken' in item ? item : item.transitions;
    for (const [chart, set] of log.taken) {
      if (!taken.has(chart)) taken.set(chart, new Set());
      for (const k of set) taken.get(chart)!.add(k);
    }
  }
  return [...all].map(([chart, defined]) => {
    const seen = taken.get(chart) ?? new Set<string>();
    return { chart, taken: [...defined].filter((k) => seen.has(k)).length, total: defined.size, missing: [...defined].filter((k) => !seen.has(k)) };
  });
}
