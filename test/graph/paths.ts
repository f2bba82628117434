/**
 * Transition-coverage path generator.
 *
 * Shortest or simple paths over a chart's states miss transitions (a guard's else-branch,
 * a second edge between the same two states). This generator targets transition
 * *definitions* instead:
 *
 * 1. Walk the chart breadth-first with the pure step function, from each input variant,
 *    applying every event the machine's outcome catalog offers in each abstract state
 *    (invoke done/error events built with the payload that makes one specific guard the
 *    first to pass, external events, `after` events). The abstract state is the catalog's
 *    projection of the snapshot (state value plus the context its guards read), so each
 *    abstract state is reached by a shortest prefix.
 * 2. For every definition not yet covered, take the shortest prefix to a state where some
 *    catalog event fires it, that one edge, then the shortest suffix to a state at rest
 *    (final, or idle for the engine), so the path is also a complete run for the real engine.
 * 3. Every definition fired anywhere along a path counts as covered; a path is added only
 *    for a definition no earlier path covered.
 *
 * Static coverage = definitions fired by the generated paths ÷ all definitions.
 */
import type { AnyEventObject, AnyMachineSnapshot, AnyStateMachine } from 'xstate';
import { getShortestPaths } from 'xstate/graph';
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
  /** Short readable form: `input: outcome → outcome …`. */
  title: string;
}

export interface Coverage {
  machine: string;
  all: TransitionInfo[];
  covered: Set<string>;
  missing: TransitionInfo[];
  paths: GeneratedPath[];
}

interface Node<Aux> {
  snapshot: AnyMachineSnapshot;
  aux: Aux;
  input: string;
  initFired: string[];
  steps: PathStep[];
}

function expand<Aux>(spec: MachineSpec<Aux>, node: Node<Aux>): Array<{ next: Node<Aux>; step: PathStep }> {
  if (node.snapshot.status !== 'active') return [];
  const out: Array<{ next: Node<Aux>; step: PathStep }> = [];
  for (const c of spec.events(node.snapshot, node.aux)) {
    const { snapshot, fired } = pureStep(spec.machine, node.snapshot, c.event);
    if (fired.length === 0) continue; // ignored in this state: not an edge
    const step: PathStep = { outcome: c.outcome, event: c.event, from: node.snapshot.value, fired };
    out.push({ step, next: { snapshot, aux: c.aux ?? node.aux, input: node.input, initFired: node.initFired, steps: [...node.steps, step] } });
  }
  return out;
}

function shortestToRest<Aux>(spec: MachineSpec<Aux>, start: Node<Aux>): Node<Aux> {
  if (spec.atRest(start.snapshot, start.aux)) return start;
  const seen = new Set([spec.project(start.snapshot, start.aux)]);
  let frontier = [start];
  for (let depth = 0; depth < spec.maxDepth && frontier.length > 0; depth++) {
    const next: Array<Node<Aux>> = [];
    for (const n of frontier) {
      for (const { next: m } of expand(spec, n)) {
        if (spec.atRest(m.snapshot, m.aux)) return m;
        const k = spec.project(m.snapshot, m.aux);
        if (seen.has(k)) continue;
        seen.add(k);
        next.push(m);
      }
    }
    frontier = next;
  }
  throw new Error(`${spec.name}: no way to rest from ${JSON.stringify(start.snapshot.value)} within ${spec.maxDepth} steps`);
}

function toPath<Aux>(spec: MachineSpec<Aux>, target: TransitionInfo, node: Node<Aux>): GeneratedPath {
  const fired = [...node.initFired, ...node.steps.flatMap((s) => s.fired)];
  return {
    machine: spec.name,
    target,
    input: node.input,
    initFired: node.initFired,
    steps: node.steps,
    fired,
    finalValue: node.snapshot.value,
    title: `${node.input}: ${node.steps.map((s) => s.outcome).join(' → ') || '(initial)'}`,
  };
}

export function generatePaths<Aux>(spec: MachineSpec<Aux>): Coverage {
  const all = transitionDefs(spec.machine);
  const byKey = new Map(all.map((t) => [t.key, t]));

  // 1. Breadth-first: shortest prefix to each abstract state, and the first edge firing each definition.
  const firstEdge = new Map<string, Node<Aux>>();
  const seen = new Set<string>();
  let frontier: Array<Node<Aux>> = [];
  for (const { label, input } of spec.inputs) {
    const { snapshot, fired } = initialStep(spec.machine, input);
    const node: Node<Aux> = { snapshot, aux: spec.initialAux, input: label, initFired: fired, steps: [] };
    for (const k of fired) if (!firstEdge.has(k)) firstEdge.set(k, node);
    const key = `${spec.project(snapshot, spec.initialAux)}`;
    if (seen.has(key)) continue;
    seen.add(key);
    frontier.push(node);
  }
  for (let depth = 0; depth < spec.maxDepth && frontier.length > 0; depth++) {
    const next: Array<Node<Aux>> = [];
    for (const n of frontier) {
      for (const { next: m, step } of expand(spec, n)) {
        for (const k of step.fired) if (!firstEdge.has(k)) firstEdge.set(k, m);
        const key = spec.project(m.snapshot, m.aux);
        if (seen.has(key)) continue;
        seen.add(key);
        next.push(m);
      }
    }
    frontier = next;
  }

  // 2. One path per definition not covered yet, in document order.
  const covered = new Set<string>();
  const paths: GeneratedPath[] = [];
  for (const t of all) {
    if (covered.has(t.key)) continue;
    const edge = firstEdge.get(t.key);
    if (!edge) continue;
    const path = toPath(spec, t, shortestToRest(spec, edge));
    for (const k of path.fired) {
      if (!byKey.has(k)) throw new Error(`${spec.name}: fired ${k}, which is not a definition of the machine`);
      covered.add(k);
    }
    paths.push(path);
  }
  return { machine: spec.name, all, covered, missing: all.filter((t) => !covered.has(t.key)), paths };
}

/**
 * Baseline: what xstate/graph's `getShortestPaths` covers with the same catalogs (one path to
 * each abstract state, replayed with the pure step). It misses guard else-branches and
 * second edges into an already reached state, which is why the generator above exists.
 */
export function shortestPathsBaseline<Aux>(spec: MachineSpec<Aux>): { covered: Set<string>; paths: number } {
  const covered = new Set<string>();
  let paths = 0;
  for (const { input } of spec.inputs) {
    const outcomes = new WeakMap<object, string>();
    const found = getShortestPaths(spec.machine, {
      input,
      // A chart that ended takes no events (xstate/graph would still step it).
      events: (s: AnyMachineSnapshot) =>
        (s.status === 'active' ? spec.events(s, spec.initialAux) : []).map((c) => {
          outcomes.set(c.event, c.outcome);
          return c.event;
        }),
      serializeState: (s: AnyMachineSnapshot) => spec.project(s, spec.initialAux),
      serializeEvent: (e: AnyEventObject) => outcomes.get(e) ?? e.type,
    } as never);
    for (const p of found) {
      paths++;
      let { snapshot, fired } = initialStep(spec.machine, input);
      for (const k of fired) covered.add(k);
      for (const step of p.steps) {
        if (step.event.type === 'xstate.init') continue;
        ({ snapshot, fired } = pureStep(spec.machine, snapshot, step.event as AnyEventObject));
        for (const k of fired) covered.add(k);
      }
    }
  }
  return { covered, paths };
}
