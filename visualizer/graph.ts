/**
 * XState v5 machine → the graph the offline viewer lays out (with ELK, in the page) and draws.
 *
 * What makes a chart read at a glance is decided here, not in the layout:
 * - a transition without a target (actions only, the state does not change) is not an arrow: it
 *   is a line inside its state's box, `event [guard] / actions`, as UML draws internal transitions;
 * - the transitions between one source and one target are one arrow whose label has one line per
 *   transition, so a dozen outcomes of one invoke do not end in a dozen arrowheads;
 * - a transition of a compound state into one of its own states leaves from a small "from any
 *   state" marker inside it (an arrow cannot leave a box into itself);
 * - guards and actions are listed once per chart in a legend, with how often each is used.
 *
 * Every record keeps what the trace of a run names (source, target, event, guard), so the viewer
 * can light up the transition a step took.
 */
import type { AnyStateMachine } from 'xstate';
import { describeGuard } from '../src/trace';
import { transitionLabel } from './mermaid';

interface Node {
  id: string;
  key: string;
  type: 'atomic' | 'compound' | 'parallel' | 'final' | 'history';
  states: Record<string, Node>;
  parent?: Node;
  initial?: { target: Node[] };
  transitions: Map<string, Transition[]>;
  always?: Transition[];
  invoke: { id: string; src: unknown }[];
  entry: unknown[];
  exit: unknown[];
}

interface Transition {
  eventType: string;
  source: Node;
  target?: Node[];
  guard?: unknown;
  delay?: string | number;
  actions: unknown[];
}

export interface ViewerState {
  /** State node id, e.g. `engine.work.idle`; the root's is the machine id. */
  id: string;
  key: string;
  type: Node['type'];
  /** Parent state node id; absent on the root. */
  parent?: string;
  /** The child entered first (compound states). */
  initial?: string;
  /** `invoke name` lines, then `entry / …` and `exit / …`. */
  notes: string[];
  /** Has a "from any state" marker: some transition of this state targets a state inside it. */
  anyMarker: boolean;
}

export interface ViewerTransition {
  /** The state node that owns the transition (what the trace's `source` names). */
  source: string;
  /** The state node entered; equal to `source` for an internal transition (no target). */
  target: string;
  /** The XState event type (`''` for always). */
  event: string;
  guard?: string;
  actions: string[];
  /** `event [guard]`, as the Mermaid export spells it. */
  label: string;
  /** No target: drawn as a line inside the source's box. */
  internal: boolean;
  /** Drawn from the source's "from any state" marker. */
  fromAny: boolean;
}

export interface LegendEntry {
  name: string;
  /** Transitions (guards) or transitions and entry/exit lists (actions) that use it. */
  uses: number;
}

export interface ViewerGraph {
  states: ViewerState[];
  transitions: ViewerTransition[];
  legend: { guards: LegendEntry[]; actions: LegendEntry[]; actors: LegendEntry[] };
}

function srcName(src: unknown): string {
  if (typeof src === 'string') return src;
  const id = (src as { id?: unknown } | null)?.id;
  return typeof id === 'string' ? id : 'inline actor';
}

/** An action as its name (`setup({ actions })` key), inline ones as `(inline xstate.assign)`. */
export function actionName(action: unknown): string {
  if (typeof action === 'string') return action;
  const type = (action as { type?: unknown } | null)?.type;
  if (typeof action === 'object' && typeof type === 'string') return type;
  return `(inline ${typeof type === 'string' ? type : 'action'})`;
}

function isInside(target: Node, node: Node): boolean {
  for (let p = target.parent; p; p = p.parent) if (p === node) return true;
  return false;
}

function ownTransitions(node: Node): Transition[] {
  return [...node.transitions.values()].flat().concat(node.always ?? []);
}

export function toViewerGraph(machine: AnyStateMachine): ViewerGraph {
  const states: ViewerState[] = [];
  const transitions: ViewerTransition[] = [];
  const guards = new Map<string, number>();
  const actions = new Map<string, number>();
  const actors = new Map<string, number>();
  const count = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);

  const walk = (node: Node) => {
    const notes: string[] = [];
    for (const inv of node.invoke) {
      notes.push(`invoke ${srcName(inv.src)}`);
      count(actors, srcName(inv.src));
    }
    for (const [kind, list] of [
      ['entry', node.entry],
      ['exit', node.exit],
    ] as const) {
      const names = (list ?? []).map(actionName);
      if (names.length === 0) continue;
      notes.push(`${kind} / ${names.join(', ')}`);
      names.forEach((n) => count(actions, n));
    }
    let anyMarker = false;
    for (const t of ownTransitions(node)) {
      const guard = describeGuard(t.guard);
      if (guard !== undefined) count(guards, guard);
      const names = (t.actions ?? []).map(actionName);
      names.forEach((n) => count(actions, n));
      const targets = t.target && t.target.length > 0 ? t.target : null;
      for (const target of targets ?? [node]) {
        const fromAny = targets !== null && isInside(target, node);
        anyMarker ||= fromAny;
        transitions.push({
          source: node.id,
          target: target.id,
          event: t.eventType,
          ...(guard === undefined ? {} : { guard }),
          actions: names,
          label: transitionLabel(t),
          internal: targets === null,
          fromAny,
        });
      }
    }
    const initial = node.initial?.target[0]?.id;
    states.push({
      id: node.id,
      key: node.key,
      type: node.type,
      ...(node.parent ? { parent: node.parent.id } : {}),
      ...(initial === undefined ? {} : { initial }),
      notes,
      anyMarker,
    });
    for (const child of Object.values(node.states)) walk(child);
  };
  walk(machine.root as unknown as Node);

  const entries = (m: Map<string, number>): LegendEntry[] => [...m].map(([name, uses]) => ({ name, uses })).sort((a, b) => a.name.localeCompare(b.name));
  return { states, transitions, legend: { guards: entries(guards), actions: entries(actions), actors: entries(actors) } };
}
