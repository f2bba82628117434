/**
 * XState v5 machine → Mermaid `stateDiagram-v2`.
 *
 * Layout rules that Mermaid imposes (see shared notes on Mermaid):
 * - the root is drawn as a composite state named after the machine, because `--` (parallel
 *   regions) and edges leaving the root (e.g. a root-level `cancel`) need a box to live in;
 * - `[*] -->` and `--> [*]` are scoped to the composite they are written in, so they stay inside
 *   their block, while every other edge is written at top level: an edge written inside a block
 *   that names a state declared in another block makes Mermaid draw a second copy of that state.
 *
 * Ids are the state node ids with `.` → `__` and anything else unsafe → `_`, so they never
 * collide with Mermaid's own `<parent>_start` / `<parent>_end` pseudo-states.
 */
import type { AnyStateMachine } from 'xstate';
import { describeGuard } from '../src/trace';

// StateNode's public typing hides the fields a diagram needs; this is the part we read.
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
}

interface Transition {
  eventType: string;
  source: Node;
  target?: Node[];
  guard?: unknown;
  delay?: string | number;
}

/** One `-->` line; `null` is Mermaid's `[*]` (initial or final pseudo-state). */
export interface MermaidEdge {
  source: string | null;
  target: string | null;
  /** The XState event type (`''` for always); absent on `[*]` edges. */
  event?: string;
  guard?: string;
  /** The edge's label as drawn. */
  label?: string;
}

export interface MermaidChart {
  /** The `stateDiagram-v2` text. */
  text: string;
  /** State node id (e.g. `pressure.measuring`) → Mermaid id, for every state node, root included. */
  ids: Record<string, string>;
  /** Every `-->` line in text order, which is the order Mermaid numbers its edges (`<svgId>-edge<n>`). */
  edges: MermaidEdge[];
}

export function mermaidId(stateNodeId: string): string {
  return stateNodeId.replace(/\./g, '__').replace(/[^A-Za-z0-9_]/g, '_');
}

function srcName(src: unknown): string {
  if (typeof src === 'string') return src;
  const id = (src as { id?: unknown } | null)?.id;
  return typeof id === 'string' ? id : 'inline actor';
}

/** `event [guard]`, with invoked actors' done/error edges as `done: src`, delays as `after name`. */
export function transitionLabel(t: Transition): string {
  const e = t.eventType;
  let label: string;
  const actor = /^xstate\.(done|error)\.actor\.(.+)$/.exec(e);
  if (e === '') label = 'always';
  else if (actor) {
    const inv = t.source.invoke.find((i) => i.id === actor[2]);
    label = `${actor[1]}: ${inv ? srcName(inv.src) : actor[2]}`;
  } else if (e.startsWith('xstate.after.')) label = typeof t.delay === 'number' ? `after ${t.delay}ms` : `after ${t.delay}`;
  else if (e.startsWith('xstate.done.state.')) label = 'done';
  else if (e === '*') label = 'any event';
  else label = e;
  const guard = describeGuard(t.guard);
  if (guard !== undefined) label += ` [${guard}]`;
  return label.replace(/[;\n]/g, ' ');
}

function children(node: Node): Node[] {
  return Object.values(node.states);
}

function ownTransitions(node: Node): Transition[] {
  return [...node.transitions.values()].flat().concat(node.always ?? []);
}

/** `target` is a state strictly inside `node`. */
function isInside(target: Node, node: Node): boolean {
  for (let p = target.parent; p; p = p.parent) if (p === node) return true;
  return false;
}

/** The marker an edge from a composite to one of its own states leaves from (`__` never ends a state id's segment). */
function anyStateId(id: string): string {
  return `${id}___any`;
}

export function toMermaid(machine: AnyStateMachine): MermaidChart {
  const root = machine.root as unknown as Node;
  const ids: Record<string, string> = {};
  const seen = new Map<string, string>();
  const lines = [`%% ${machine.id}: generated from the machine by \`npm run visualize\` (visualizer/mermaid.ts). Do not edit.`, 'stateDiagram-v2'];
  const edges: string[] = [];
  const pseudoEdges: MermaidEdge[] = [];
  const edgeRecords: MermaidEdge[] = [];

  const declare = (node: Node, depth: number): void => {
    const id = mermaidId(node.id);
    const clash = seen.get(id) ?? (/_(start|end)$/.test(id) ? seen.get(id.replace(/_(start|end)$/, '')) : undefined);
    if (clash !== undefined) throw new Error(`visualizer: states '${clash}' and '${node.id}' map to the same Mermaid id '${id}'; rename one`);
    seen.set(id, node.id);
    ids[node.id] = id;
    const pad = '  '.repeat(depth);
    const kids = children(node);
    if (kids.length === 0) {
      lines.push(`${pad}state "${node.key}" as ${id}`);
      for (const inv of node.invoke) lines.push(`${pad}${id} : invoke ${srcName(inv.src)}`);
    } else {
      lines.push(`${pad}state "${node.key}" as ${id} {`);
      for (const target of node.initial?.target ?? []) {
        lines.push(`${pad}  [*] --> ${mermaidId(target.id)}`);
        pseudoEdges.push({ source: null, target: target.id });
      }
      kids.forEach((child, i) => {
        if (node.type === 'parallel' && i > 0) lines.push(`${pad}  --`);
        declare(child, depth + 1);
      });
      for (const child of kids.filter((k) => k.type === 'final')) {
        lines.push(`${pad}  ${mermaidId(child.id)} --> [*]`);
        pseudoEdges.push({ source: child.id, target: null });
      }
      // An edge from a composite to a state inside it ("from any state here", e.g. a region's
      // shutdown) cannot be laid out across the block's border: it leaves from an "any state"
      // marker drawn inside the block instead.
      if (ownTransitions(node).some((t) => (t.target ?? []).some((target) => isInside(target, node)))) {
        lines.push(`${pad}  state "any state" as ${anyStateId(id)}`);
      }
      lines.push(`${pad}}`);
    }
    for (const t of ownTransitions(node)) {
      const targets = t.target && t.target.length > 0 ? t.target : [node];
      for (const target of targets) {
        const from = isInside(target, node) ? anyStateId(id) : id;
        const edge = `  ${from} --> ${mermaidId(target.id)} : ${transitionLabel(t)}`;
        if (edges.includes(edge)) continue;
        edges.push(edge);
        const guard = describeGuard(t.guard);
        edgeRecords.push({ source: node.id, target: target.id, event: t.eventType, ...(guard === undefined ? {} : { guard }), label: transitionLabel(t) });
      }
    }
  };

  declare(root, 1);
  return { text: [...lines, ...edges, ''].join('\n'), ids, edges: [...pseudoEdges, ...edgeRecords] };
}
