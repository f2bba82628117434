/**
 * The charts as data: every transition definition of a machine, a stable key and a readable
 * name for each, and a pure step function that reports which definitions a macrostep took.
 *
 * Definitions are enumerated from each state node's `transitions` map (own `on` events,
 * invoke onDone/onError as `xstate.done.actor.<id>` / `xstate.error.actor.<id>`, `after`
 * delays as `xstate.after.<delay>.<stateId>`) plus `stateNode.always`, which the static
 * `getTransitionData` never returns. A guarded list yields one definition per candidate,
 * the final unguarded else-branch included.
 *
 * Which definitions a step takes is read from the `@xstate.microstep` inspection events of
 * the pure macrostep (`machine.transition` with an inert actor scope: no action runs, no
 * actor starts). That covers raised events and `always` chains inside one macrostep, and it
 * is the same record the runtime coverage reads from the real actor.
 */
import { createActor, type AnyActorScope, type AnyEventObject, type AnyMachineSnapshot, type AnyStateMachine, type InspectionEvent } from 'xstate';

/** A transition definition as xstate holds it (the fields read here). */
export interface TransitionDefLike {
  source: StateNodeLike;
  eventType: string;
  guard?: unknown;
  target?: ReadonlyArray<StateNodeLike> | undefined;
}

interface StateNodeLike {
  id: string;
  key: string;
  machine: { id: string };
  parent?: StateNodeLike | undefined;
  states: Record<string, StateNodeLike>;
  transitions: Map<string, TransitionDefLike[]>;
  always?: TransitionDefLike[] | undefined;
}

export interface TransitionInfo {
  /** `<sourceId> <eventType>#<candidate index>`; `always` has the event type `always`. */
  key: string;
  machine: string;
  source: string;
  event: string;
  index: number;
  guard: string | undefined;
  targets: string[];
  /** `machine: state --event [guard]--> target` */
  name: string;
}

const ALWAYS = 'always';

function guardName(guard: unknown): string | undefined {
  if (guard === undefined) return undefined;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'function') {
    // Higher-order guards (and/or/not) are functions carrying their operands.
    const g = guard as { name?: string; guards?: unknown[]; check?: unknown };
    if (Array.isArray(g.guards)) return g.guards.map((x) => guardName(x)).join(' & ');
    return g.name || 'inline guard';
  }
  if (typeof guard === 'object' && guard !== null && 'type' in guard) return String((guard as { type: unknown }).type);
  return 'guard';
}

/** `pressure.measuring` → `measuring`; the root is `(root)`. */
function localName(node: StateNodeLike): string {
  const root = node.machine.id;
  if (node.id === root) return '(root)';
  return node.id.startsWith(`${root}.`) ? node.id.slice(root.length + 1) : node.id;
}

function shortEvent(eventType: string): string {
  if (eventType === ALWAYS) return 'always';
  const done = /^xstate\.done\.actor\.(?:0\.[^.]+\.)?(.+)$/.exec(eventType);
  if (done) return `done(${done[1]})`;
  const err = /^xstate\.error\.actor\.(?:0\.[^.]+\.)?(.+)$/.exec(eventType);
  if (err) return `error(${err[1]})`;
  const after = /^xstate\.after\.([^.]+)\./.exec(eventType);
  if (after) return `after(${after[1]})`;
  return eventType;
}

function infoOf(def: TransitionDefLike, eventType: string, index: number): TransitionInfo {
  const source = def.source;
  const machine = source.machine.id;
  const targets = (def.target ?? []).map((t) => localName(t));
  const guard = guardName(def.guard);
  const key = `${source.id} ${eventType}#${index}`;
  const arrow = targets.length === 0 ? '(stays)' : targets.join(', ');
  return {
    key,
    machine,
    source: localName(source),
    event: eventType,
    index,
    guard,
    targets,
    name: `${machine}: ${localName(source)} --${shortEvent(eventType)}${guard ? ` [${guard}]` : ''}--> ${arrow}`,
  };
}

/** Every transition definition of `machine`, in document order. */
export function transitionDefs(machine: AnyStateMachine): TransitionInfo[] {
  const out: TransitionInfo[] = [];
  const walk = (node: StateNodeLike) => {
    for (const [eventType, defs] of node.transitions) defs.forEach((d, i) => out.push(infoOf(d, eventType, i)));
    (node.always ?? []).forEach((d, i) => out.push(infoOf(d, ALWAYS, i)));
    for (const child of Object.values(node.states)) walk(child);
  };
  walk(machine.root as unknown as StateNodeLike);
  return out;
}

/**
 * The key of a definition object met at run time (an inspection event's `_transitions`).
 * The engine's charts are `provide()`d copies with their own state node objects, so the
 * candidate index is looked up in the definition's own source node.
 */
export function keyOfDef(def: TransitionDefLike): TransitionInfo {
  const source = def.source;
  const own = source.transitions.get(def.eventType);
  const i = own ? own.indexOf(def) : -1;
  if (i >= 0) return infoOf(def, def.eventType, i);
  const a = (source.always ?? []).indexOf(def);
  if (a >= 0) return infoOf(def, ALWAYS, a);
  throw new Error(`a transition of ${source.id} on ${def.eventType} is not one of its definitions`);
}

export function transitionsOfMicrostep(event: InspectionEvent): TransitionInfo[] {
  if (event.type !== '@xstate.microstep') return [];
  return (event._transitions as unknown as TransitionDefLike[]).map(keyOfDef);
}

// ---------------------------------------------------------------------------
// Pure stepping

export interface Stepped {
  snapshot: AnyMachineSnapshot;
  /** Keys of the definitions taken by this machine (not by its children), in order. */
  fired: string[];
}

function inertScope(machine: AnyStateMachine, onMicrostep: (t: TransitionInfo[]) => void, input: unknown): AnyActorScope {
  // An actor that is never started only lends its system; the inspection hook is swapped in.
  const self = createActor(machine, { input } as never);
  const system = {
    ...self.system,
    _sendInspectionEvent: (e: InspectionEvent) => {
      if (e.type === '@xstate.microstep') onMicrostep(transitionsOfMicrostep(e).filter((t) => t.machine === machine.id));
    },
  };
  return {
    self,
    defer: () => {},
    id: '',
    logger: () => {},
    sessionId: '',
    stopChild: () => {},
    system,
    emit: () => {},
    actionExecutor: () => {},
  } as unknown as AnyActorScope;
}

export function initialStep(machine: AnyStateMachine, input: unknown): Stepped {
  const fired: string[] = [];
  const scope = inertScope(machine, (ts) => fired.push(...ts.map((t) => t.key)), input);
  const snapshot = machine.getInitialSnapshot(scope, input) as AnyMachineSnapshot;
  return { snapshot, fired };
}

export function pureStep(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, event: AnyEventObject): Stepped {
  const fired: string[] = [];
  const scope = inertScope(machine, (ts) => fired.push(...ts.map((t) => t.key)), undefined);
  const next = machine.transition(snapshot, event, scope) as AnyMachineSnapshot;
  return { snapshot: next, fired };
}

/** The invoke definitions of the states active in `snapshot` (id and src name). */
export function activeInvokes(snapshot: AnyMachineSnapshot): Array<{ id: string; src: string; state: string }> {
  const out: Array<{ id: string; src: string; state: string }> = [];
  for (const node of snapshot._nodes as unknown as Array<StateNodeLike & { invoke: Array<{ id: string; src: unknown }> }>) {
    for (const inv of node.invoke) out.push({ id: inv.id, src: typeof inv.src === 'string' ? inv.src : inv.id, state: localName(node) });
  }
  return out;
}

/** `xstate.after.*` events of the active states. */
export function activeAfterEvents(snapshot: AnyMachineSnapshot): string[] {
  const out: string[] = [];
  for (const node of snapshot._nodes as unknown as StateNodeLike[]) {
    for (const type of node.transitions.keys()) if (type.startsWith('xstate.after.')) out.push(type);
  }
  return out;
}

export function stateKey(snapshot: AnyMachineSnapshot): string {
  return JSON.stringify(snapshot.value);
}
