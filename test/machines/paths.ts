/**
 * Transition-coverage paths, generated with @xstate/graph's public API.
 *
 * Each chart is traversed as an actor logic whose events are the chart's outcome catalog (see
 * catalogs.ts): a snapshot carries the chart's snapshot, the model state outside the chart the
 * catalog needs (`aux`), and the definitions the last step took (from model.ts's pure stepping).
 * @xstate/graph cannot traverse the chart itself with these events: its `events` option replaces
 * the auto-discovered done/error/after events, so their payloads (which decide the guards) would
 * have to be written into the chart's own traversal; and a chart's snapshot cannot carry `aux`.
 *
 * 1. `getAdjacencyMap` over the abstract states (the catalog's projection: state value plus the
 *    context its guards read) gives every (state, event) edge and what it fires.
 * 2. `getShortestPaths` gives the shortest path to each abstract state.
 * 3. For every definition, in document order, that no earlier path took: the shortest path to the
 *    source of the first edge firing it, `joinPaths` with that edge, `joinPaths` with the shortest
 *    path from there to a state at rest (`getShortestPaths` with `fromState` and `toState`), so the
 *    path is also a complete run for the real engine.
 * 4. The joined path's events are replayed from the initial snapshot (a lossy projection may hand
 *    back a different snapshot with the same key), which gives each step's exact fired set.
 */
import { getAdjacencyMap, getShortestPaths, joinPaths, type StatePath } from '@xstate/graph';
import type { ActorLogic, AnyEventObject, AnyMachineSnapshot, AnyStateMachine, EventObject, Snapshot } from 'xstate';
import { initialStep, pureStep, transitionDefs, type TransitionInfo } from './model';

export interface CatalogEvent<Aux> {
  /** Names the outcome; the runtime runner knows how to produce each one in the real engine. */
  outcome: string;
  event: AnyEventObject;
  /** Model state outside the chart's context that the next offers depend on. */
  aux?: Aux;
}

export interface MachineSpec<Aux = undefined> {
  name: string;
  machine: AnyStateMachine;
  inputs: ReadonlyArray<{ label: string; input: unknown }>;
  initialAux: Aux;
  /** Events offered in a snapshot, happy outcomes first (suffixes prefer them). */
  events(snapshot: AnyMachineSnapshot, aux: Aux): Array<CatalogEvent<Aux>>;
  /** Abstract state: the state value and the context the guards read. */
  project(snapshot: AnyMachineSnapshot, aux: Aux): string;
  /** A path may end here. */
  atRest(snapshot: AnyMachineSnapshot, aux: Aux): boolean;
  maxDepth: number;
  /**
   * Transitions whose effect shows only when taken from some states (a reset of a count that is
   * already 0 changes nothing): the path generated for one must take it from a state `witness`
   * accepts, and taking it elsewhere does not cover it. The projection must tell those states apart.
   */
  witness?: Record<string, (snapshot: AnyMachineSnapshot, aux: Aux, event: AnyEventObject) => boolean>;
  /**
   * The exported chart the engine builds from, when `machine` is a `provide()`d copy of it: a
   * mutant is installed there (see mutants.ts).
   */
  chart?: AnyStateMachine;
}

export interface PathStep {
  outcome: string;
  event: AnyEventObject;
  /** State value before the event. */
  from: unknown;
  /** Definitions taken, in order (raised and eventless ones included). */
  fired: string[];
}

export interface GeneratedPath {
  machine: string;
  /** The definition this path was generated for. */
  target: TransitionInfo;
  input: string;
  initFired: string[];
  steps: PathStep[];
  /** Every definition taken along the path, in order. */
  fired: string[];
  finalValue: unknown;
  /** The chart's context at the end of the path (from the catalog's payloads, not the world's). */
  finalContext: unknown;
  /** The chart's output, when the path ends in a final state (from the catalog's payloads too). */
  finalOutput: unknown;
  /** Short readable form: `input: outcome → outcome …`. */
  title: string;
  /** Definitions taken here from a state that shows their effect (all but `witness` ones taken elsewhere). */
  witnessed: Set<string>;
}

export interface Coverage {
  machine: string;
  all: TransitionInfo[];
  covered: Set<string>;
  missing: TransitionInfo[];
  paths: GeneratedPath[];
}

/** A snapshot of the catalog logic. */
type CatSnap<Aux> = Snapshot<undefined> & {
  m: AnyMachineSnapshot;
  aux: Aux;
  fired: string[];
};
/** An event of the catalog logic: `type` is unique within a state. */
interface CatEvent<Aux> extends EventObject {
  outcome: string;
  event: AnyEventObject;
  aux?: Aux;
}

function catalogLogic<Aux>(spec: MachineSpec<Aux>, input: unknown): ActorLogic<CatSnap<Aux>, CatEvent<Aux>> {
  return {
    config: spec.machine,
    getInitialSnapshot: () => {
      const { snapshot, fired } = initialStep(spec.machine, input);
      return { status: 'active', output: undefined, error: undefined, m: snapshot, aux: spec.initialAux, fired };
    },
    transition: (s: CatSnap<Aux>, e: CatEvent<Aux>) => {
      const { snapshot, fired } = pureStep(spec.machine, s.m, e.event);
      return { ...s, m: snapshot, aux: e.aux ?? s.aux, fired };
    },
    getPersistedSnapshot: (s: CatSnap<Aux>) => s,
  };
}

function traversal<Aux>(spec: MachineSpec<Aux>) {
  return {
    events: (s: CatSnap<Aux>): Array<CatEvent<Aux>> => {
      if (s.m.status !== 'active') return [];
      const seen = new Map<string, number>();
      return spec.events(s.m, s.aux).map((c) => {
        const n = seen.get(c.outcome) ?? 0;
        seen.set(c.outcome, n + 1);
        return { type: n === 0 ? c.outcome : `${c.outcome}#${n}`, outcome: c.outcome, event: c.event, ...(c.aux !== undefined ? { aux: c.aux } : {}) };
      });
    },
    serializeState: (s: CatSnap<Aux>) => spec.project(s.m, s.aux),
    serializeEvent: (e: CatEvent<Aux>) => e.type,
    stopWhen: (s: CatSnap<Aux>) => s.m.status !== 'active',
    limit: 200_000,
  };
}

const INIT = { type: 'xstate.init' } as unknown as CatEvent<never>;

/** A one-step path from `from` (a path's end, the same object) to the state after `event`. */
function edgePath<Aux>(logic: ActorLogic<CatSnap<Aux>, CatEvent<Aux>>, from: CatSnap<Aux>, event: CatEvent<Aux>): StatePath<CatSnap<Aux>, CatEvent<Aux>> {
  const next = logic.transition(from, event, undefined as never);
  return {
    state: next,
    steps: [
      { state: from, event: INIT },
      { state: next, event },
    ],
    weight: 1,
  };
}

function toGenerated<Aux>(
  spec: MachineSpec<Aux>,
  logic: ActorLogic<CatSnap<Aux>, CatEvent<Aux>>,
  label: string,
  target: TransitionInfo,
  events: Array<CatEvent<Aux>>,
): GeneratedPath {
  // Replay: the exact snapshots and fired sets of this sequence of events.
  let s = logic.getInitialSnapshot(undefined as never, undefined);
  const initFired = s.fired;
  const steps: PathStep[] = [];
  const witnessed = new Set<string>();
  for (const e of events) {
    const next = logic.transition(s, e, undefined as never);
    if (next.fired.length === 0) throw new Error(`${spec.name}: ${e.outcome} takes no transition in ${JSON.stringify(s.m.value)} on replay`);
    for (const k of next.fired) if (!spec.witness?.[k] || spec.witness[k](s.m, s.aux, e.event)) witnessed.add(k);
    steps.push({ outcome: e.outcome, event: e.event, from: s.m.value, fired: next.fired });
    s = next;
  }
  for (const k of initFired) witnessed.add(k);
  return {
    machine: spec.name,
    target,
    input: label,
    initFired,
    steps,
    fired: [...initFired, ...steps.flatMap((x) => x.fired)],
    finalValue: s.m.value,
    finalContext: s.m.context,
    finalOutput: s.m.output,
    title: `${label}: ${steps.map((x) => x.outcome).join(' → ') || '(initial)'}`,
    witnessed,
  };
}

export function generatePaths<Aux>(spec: MachineSpec<Aux>): Coverage {
  const all = transitionDefs(spec.machine);
  const byKey = new Map(all.map((t) => [t.key, t]));
  const options = traversal(spec);

  // 1.–2. Per input: every edge and what it fires; the shortest path to every abstract state.
  interface Edge {
    input: number;
    state: string;
    event: CatEvent<Aux> | undefined;
    depth: number;
  }
  const firstEdge = new Map<string, Edge>();
  const perInput = spec.inputs.map(({ input }, i) => {
    const logic = catalogLogic(spec, input);
    const adjacency = getAdjacencyMap(logic, options as never) as unknown as Record<
      string,
      { state: CatSnap<Aux>; transitions: Record<string, { event: CatEvent<Aux>; state: CatSnap<Aux> }> }
    >;
    const shortest = new Map<string, StatePath<CatSnap<Aux>, CatEvent<Aux>>>();
    for (const p of getShortestPaths(logic, options as never) as Array<StatePath<CatSnap<Aux>, CatEvent<Aux>>>)
      shortest.set(options.serializeState(p.state), p);
    // The edge with the shortest prefix wins (across inputs; ties: the earlier input, BFS order).
    const offer = (k: string, edge: Edge) => {
      const depth = (shortest.get(edge.state)?.weight ?? Infinity) + (edge.event ? 1 : 0);
      const had = firstEdge.get(k);
      if (!had || depth < had.depth) firstEdge.set(k, edge.depth === depth ? edge : { ...edge, depth });
    };
    const initial = logic.getInitialSnapshot(undefined as never, undefined);
    for (const k of initial.fired) offer(k, { input: i, state: options.serializeState(initial), event: undefined, depth: 0 });
    for (const [state, { state: from, transitions }] of Object.entries(adjacency)) {
      for (const { event, state: next } of Object.values(transitions)) {
        for (const k of next.fired) if (!spec.witness?.[k] || spec.witness[k](from.m, from.aux, event.event)) offer(k, { input: i, state, event, depth: 0 });
      }
    }
    return { logic, shortest };
  });

  // 3. One path per definition not covered yet, in document order.
  const covered = new Set<string>();
  const paths: GeneratedPath[] = [];
  const toRest = new Map<string, StatePath<CatSnap<Aux>, CatEvent<Aux>> | undefined>();
  for (const t of all) {
    if (covered.has(t.key)) continue;
    const edge = firstEdge.get(t.key);
    if (!edge) continue;
    const { logic, shortest } = perInput[edge.input]!;
    const head = shortest.get(edge.state);
    if (!head) throw new Error(`${spec.name}: no shortest path to ${edge.state}`);
    let path = edge.event ? joinPaths(head, edgePath(logic, head.state, edge.event)) : head;
    const end = path.state;
    if (!spec.atRest(end.m, end.aux)) {
      const endKey = `${edge.input} ${options.serializeState(end)}`;
      if (!toRest.has(endKey)) {
        const found = (
          getShortestPaths(logic, { ...options, fromState: end, toState: (s: CatSnap<Aux>) => spec.atRest(s.m, s.aux) }) as Array<
            StatePath<CatSnap<Aux>, CatEvent<Aux>>
          >
        ).filter((p) => spec.atRest(p.state.m, p.state.aux));
        found.sort((a, b) => a.weight - b.weight);
        toRest.set(endKey, found[0]);
      }
      const rest = toRest.get(endKey);
      if (!rest) throw new Error(`${spec.name}: no way to rest from ${JSON.stringify(end.m.value)}`);
      // The suffix starts at a snapshot equal to `end` by projection: re-rooted on `end` itself.
      const tail = { ...rest, steps: [{ state: end, event: INIT as CatEvent<Aux> }, ...rest.steps.slice(1)] };
      path = joinPaths(path, tail);
    }
    if (path.steps.length - 1 > spec.maxDepth * 2) throw new Error(`${spec.name}: a path of ${path.steps.length - 1} steps for ${t.name}`);
    const generated = toGenerated(
      spec,
      logic,
      spec.inputs[edge.input]!.label,
      t,
      path.steps.slice(1).map((s) => s.event),
    );
    for (const k of generated.fired) {
      if (!byKey.has(k)) throw new Error(`${spec.name}: fired ${k}, which is not a definition of the machine`);
    }
    for (const k of generated.witnessed) covered.add(k);
    if (!covered.has(t.key)) throw new Error(`${spec.name}: the path for ${t.name} does not take it on replay`);
    paths.push(generated);
  }
  return { machine: spec.name, all, covered, missing: all.filter((t) => !covered.has(t.key)), paths };
}

/**
 * Baseline: what `getShortestPaths` alone covers with the same catalogs (one path to each
 * abstract state). It misses guard else-branches and second edges into an already reached state.
 */
export function shortestPathsBaseline<Aux>(spec: MachineSpec<Aux>): { covered: Set<string>; paths: number } {
  const covered = new Set<string>();
  let paths = 0;
  const options = traversal(spec);
  for (const { input } of spec.inputs) {
    const logic = catalogLogic(spec, input);
    for (const p of getShortestPaths(logic, options as never) as Array<StatePath<CatSnap<Aux>, CatEvent<Aux>>>) {
      paths++;
      let s = logic.getInitialSnapshot(undefined as never, undefined);
      for (const k of s.fired) covered.add(k);
      for (const step of p.steps.slice(1)) {
        s = logic.transition(s, step.event, undefined as never);
        for (const k of s.fired) covered.add(k);
      }
    }
  }
  return { covered, paths };
}
