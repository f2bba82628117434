/**
 * The charts as data, through xstate's public API only.
 *
 * - Transitions are read from the machine's config object (`machine.config`): the ground truth a
 *   mutant edits. Each `on` event, `always`, invoke `onDone`/`onError` and `after` delay gives one
 *   definition per candidate (a guarded list's unguarded else-branch included).
 * - Which definitions a step takes: `getMicrosteps` / `getInitialMicrosteps` (pure, no action runs,
 *   no actor starts) give the microsteps; the first microstep of an event is the set
 *   `machine.getTransitionData(snapshot, event)` selects; a later one is either an eventless
 *   (`always`) transition, whose candidates come from `getNextTransitions` and whose named guard is
 *   evaluated with `machine.implementations.guards`, or a raised event (`xstate.raise` among the
 *   earlier microsteps' actions), again through `getTransitionData`.
 *
 * Where the library cannot express it: the public inspection API has no record of the transitions
 * an actor took (`@xstate.microstep` carries them only in `_transitions`, marked internal), so the
 * runtime coverage re-derives them the same way from each `@xstate.snapshot` event (the event and
 * the actor's previous snapshot). An `always` guard that is not a named guard (an inline function,
 * `and`/`or`/`not`) cannot be evaluated through the public API: `identify` throws on one.
 */
import {
  getInitialMicrosteps,
  getMicrosteps,
  getNextTransitions,
  type AnyEventObject,
  type AnyMachineSnapshot,
  type AnyStateMachine,
  type AnyTransitionDefinition,
} from 'xstate';

export interface TransitionInfo {
  /** `<sourceId> <label>#<candidate index>`, label `always`, `done(src)`, `error(src)`, `after(delay)` or the event type. */
  key: string;
  machine: string;
  source: string;
  /** The event label (see `key`). */
  event: string;
  index: number;
  guard: string | undefined;
  targets: string[];
  actions: string[];
  /** `machine: state --event [guard]--> target` */
  name: string;
}

type TransitionConfig = { target?: string | string[]; guard?: unknown; actions?: unknown; reenter?: boolean } | string | undefined;
interface StateConfig {
  id?: string;
  states?: Record<string, StateConfig>;
  on?: Record<string, TransitionConfig | TransitionConfig[]>;
  always?: TransitionConfig | TransitionConfig[];
  after?: Record<string, TransitionConfig | TransitionConfig[]>;
  invoke?: InvokeConfig | InvokeConfig[];
}
interface InvokeConfig {
  id?: string;
  src: unknown;
  onDone?: TransitionConfig | TransitionConfig[];
  onError?: TransitionConfig | TransitionConfig[];
}

const list = <T>(x: T | T[] | undefined): T[] => (x === undefined ? [] : Array.isArray(x) ? x : [x]);

export function guardName(guard: unknown): string | undefined {
  if (guard === undefined) return undefined;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'function') {
    // Higher-order guards (and/or/not) are functions carrying their operands.
    const g = guard as { name?: string; guards?: unknown[] };
    if (Array.isArray(g.guards)) return g.guards.map((x) => guardName(x)).join(' & ');
    return g.name || 'inline guard';
  }
  if (typeof guard === 'object' && guard !== null && 'type' in guard) return String(guard.type);
  return 'guard';
}

function actionName(a: unknown): string {
  if (typeof a === 'string') return a;
  if (typeof a === 'object' && a !== null && 'type' in a) return String(a.type);
  return 'inline action';
}

function local(machineId: string, id: string): string {
  if (id === machineId) return '(root)';
  return id.startsWith(`${machineId}.`) ? id.slice(machineId.length + 1) : id;
}

/** A target as written in the config (`.child`, `sibling`, `#id`) resolved to a state id. */
function resolveTarget(machineId: string, sourceId: string, target: string): string {
  if (target.startsWith('#')) return target.slice(1);
  if (target.startsWith('.')) return `${sourceId}${target}`;
  const parent = sourceId === machineId ? machineId : sourceId.slice(0, sourceId.lastIndexOf('.'));
  return `${parent}.${target}`;
}

function infoOf(machineId: string, sourceId: string, label: string, index: number, t: TransitionConfig): TransitionInfo {
  const cfg = typeof t === 'string' ? { target: t } : (t ?? {});
  const targets = list(cfg.target).map((x) => local(machineId, resolveTarget(machineId, sourceId, x)));
  const guard = guardName(cfg.guard);
  const source = local(machineId, sourceId);
  const arrow = targets.length === 0 ? '(stays)' : targets.join(', ');
  return {
    key: `${sourceId} ${label}#${index}`,
    machine: machineId,
    source,
    event: label,
    index,
    guard,
    targets,
    actions: list(cfg.actions).map(actionName),
    name: `${machineId}: ${source} --${label}${guard ? ` [${guard}]` : ''}--> ${arrow}`,
  };
}

/** An invoke is named by its id when the chart gives one (`job`), else by its src. */
const srcName = (inv: InvokeConfig): string => inv.id ?? (typeof inv.src === 'string' ? inv.src : 'actor');

/** Every transition definition written in `config` (a machine's config object), in document order. */
export function transitionsOfConfig(config: StateConfig & { id?: string }): TransitionInfo[] {
  const machineId = config.id ?? '(machine)';
  const out: TransitionInfo[] = [];
  const add = (sourceId: string, label: string, ts: TransitionConfig | TransitionConfig[] | undefined) =>
    list(ts).forEach((t, i) => out.push(infoOf(machineId, sourceId, label, i, t)));
  const walk = (node: StateConfig, id: string) => {
    for (const [event, ts] of Object.entries(node.on ?? {})) add(id, event, ts);
    add(id, 'always', node.always);
    for (const inv of list(node.invoke)) {
      add(id, `done(${srcName(inv)})`, inv.onDone);
      add(id, `error(${srcName(inv)})`, inv.onError);
    }
    for (const [delay, ts] of Object.entries(node.after ?? {})) add(id, `after(${delay})`, ts);
    for (const [key, child] of Object.entries(node.states ?? {})) walk(child, child.id ?? `${id}.${key}`);
  };
  walk(config, machineId);
  return out;
}

export function transitionDefs(machine: AnyStateMachine): TransitionInfo[] {
  return transitionsOfConfig(machine.config as StateConfig);
}

/** Every state of a machine's config, by local name (`(root)` excluded). */
export function statesOfConfig(config: StateConfig & { id?: string }): Array<{ name: string; invokes: string[]; final: boolean }> {
  const machineId = config.id ?? '(machine)';
  const out: Array<{ name: string; invokes: string[]; final: boolean }> = [];
  const walk = (node: StateConfig, id: string) => {
    if (id !== machineId)
      out.push({ name: local(machineId, id), invokes: list(node.invoke).map(srcName), final: (node as { type?: string }).type === 'final' });
    for (const [key, child] of Object.entries(node.states ?? {})) walk(child, child.id ?? `${id}.${key}`);
  };
  walk(config, machineId);
  return out;
}

/** The config key of a definition met in a step (works for `provide()`d copies too). */
export function keyOfDef(def: AnyTransitionDefinition): string {
  const source = def.source;
  const always = source.always ?? [];
  const a = always.indexOf(def);
  if (a >= 0) return `${source.id} always#${a}`;
  const own = source.transitions.get(def.eventType) ?? [];
  const i = own.indexOf(def);
  if (i < 0) throw new Error(`a transition of ${source.id} on ${def.eventType} is not one of its definitions`);
  return `${source.id} ${labelOf(source, def.eventType)}#${i}`;
}

function labelOf(source: AnyTransitionDefinition['source'], eventType: string): string {
  const m = /^xstate\.(done|error)\.actor\.(.+)$/.exec(eventType);
  if (m) {
    const inv = source.invoke.find((x) => x.id === m[2]);
    // xstate gives an invoke without an id one of the form `0.<machine>.<state path>`.
    const src = inv && /^\d+\./.test(inv.id) && typeof inv.src === 'string' ? inv.src : m[2];
    return `${m[1]}(${src})`;
  }
  const after = /^xstate\.after\.([^.]+)\./.exec(eventType);
  if (after) return `after(${after[1]})`;
  return eventType;
}

// ---------------------------------------------------------------------------
// Pure stepping

type Microsteps = Array<[AnyMachineSnapshot, Array<{ type: string; params?: unknown }>]>;

/** The `always` transitions enabled in `s`: per source state, its first candidate whose guard passes. */
function enabledAlways(machine: AnyStateMachine, s: AnyMachineSnapshot, next: AnyMachineSnapshot, event: AnyEventObject): AnyTransitionDefinition[] {
  const out: AnyTransitionDefinition[] = [];
  const done = new Set<string>();
  for (const def of getNextTransitions(s)) {
    if (!(def.source.always ?? []).includes(def) || done.has(def.source.id)) continue;
    const g = def.guard as unknown;
    let pass: boolean;
    if (g === undefined) pass = true;
    else {
      const name = typeof g === 'string' ? g : typeof g === 'object' && g !== null && 'type' in g ? String(g.type) : undefined;
      const impl = name ? (machine.implementations.guards as Record<string, unknown>)[name] : undefined;
      // `stateIn(value)` is a built-in guard: it carries its value, checked with the public `matches`.
      const stateValue = typeof impl === 'function' ? (impl as { stateValue?: unknown }).stateValue : undefined;
      if (typeof impl !== 'function' || (stateValue === undefined && 'check' in impl) || typeof stateValue === 'string') {
        // Not evaluable through the public API (inline, and/or/not, a built-in): the candidate passed
        // if the microstep went where it leads.
        pass = def.target ? def.target.every((t) => valueIn(next.value, t.path)) : true;
      } else if (stateValue !== undefined) pass = s.matches(stateValue);
      else pass = Boolean((impl as (a: unknown, p: unknown) => boolean)({ context: s.context, event }, (g as { params?: unknown }).params));
    }
    if (pass) {
      out.push(def);
      done.add(def.source.id);
    }
  }
  return out;
}

function identify(machine: AnyStateMachine, before: AnyMachineSnapshot, event: AnyEventObject, micro: Microsteps, init: boolean): string[] {
  const fired: string[] = [];
  const raised: AnyEventObject[] = [];
  let prev = before;
  micro.forEach(([next, actions], i) => {
    let defs: AnyTransitionDefinition[] = [];
    if (i === 0 && !init) defs = machine.getTransitionData(prev, event);
    else if (i > 0) {
      defs = enabledAlways(machine, prev, next, event);
      if (defs.length === 0) {
        const r = raised.shift();
        if (r) defs = machine.getTransitionData(prev, r);
      }
    }
    for (const d of defs) fired.push(keyOfDef(d));
    for (const a of actions) {
      const p = a.params as { event?: AnyEventObject; delay?: unknown } | undefined;
      if (a.type === 'xstate.raise' && p?.event && p.delay === undefined) raised.push(p.event);
    }
    prev = next;
  });
  return fired;
}

/** `['work', 'pressure']` is in `{ work: 'pressure', breaker: 'closed' }`. */
function valueIn(value: unknown, path: readonly string[]): boolean {
  let v = value;
  for (const part of path) {
    if (v === part) return true;
    if (typeof v !== 'object' || v === null || !(part in v)) return false;
    v = (v as Record<string, unknown>)[part];
  }
  return true;
}

export interface Stepped {
  snapshot: AnyMachineSnapshot;
  /** Keys of the definitions taken by this machine (not by its children), in order. */
  fired: string[];
}

export function initialStep(machine: AnyStateMachine, input: unknown): Stepped {
  const micro = getInitialMicrosteps(machine, input as never) as unknown as Microsteps;
  const snapshot = micro.at(-1)![0];
  return { snapshot, fired: identify(machine, snapshot, { type: 'xstate.init', input }, micro, true) };
}

export function pureStep(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, event: AnyEventObject): Stepped {
  const micro = getMicrosteps(machine, snapshot, event as never) as unknown as Microsteps;
  return { snapshot: micro.at(-1)?.[0] ?? snapshot, fired: identify(machine, snapshot, event, micro, false) };
}

/** The invokes of the states active in `snapshot` (id, src name, state), from `getNextTransitions`. */
export function activeInvokes(snapshot: AnyMachineSnapshot): Array<{ id: string; src: string; state: string }> {
  const out: Array<{ id: string; src: string; state: string }> = [];
  const seen = new Set<string>();
  for (const def of getNextTransitions(snapshot)) {
    const node = def.source;
    if (seen.has(node.id)) continue;
    seen.add(node.id);
    for (const inv of node.invoke) out.push({ id: inv.id, src: typeof inv.src === 'string' ? inv.src : inv.id, state: local(node.machine.id, node.id) });
  }
  return out;
}

/** `xstate.after.*` events of the active states. */
export function activeAfterEvents(snapshot: AnyMachineSnapshot): string[] {
  return [
    ...new Set(
      getNextTransitions(snapshot)
        .map((d) => d.eventType)
        .filter((t) => t.startsWith('xstate.after.')),
    ),
  ];
}
