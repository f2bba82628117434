/**
 * Chart mutants: copies of a chart's config object with one change each — a transition deleted,
 * retargeted (to a sibling of its target), its guard dropped or negated, one of its actions
 * dropped. Each is checked by building it (`createMachine(mutated, machine.implementations)`)
 * and installed for a run by pointing the chart's exported machine at the mutated config:
 * `buildCompactionMachine` builds the engine with `<chart>Machine.provide(...)`, which makes a
 * new machine from the chart's `config`, so the real engine runs the mutant with nothing else
 * changed. `install` returns the function that puts the original back.
 */
import { createMachine, not, type AnyStateMachine } from 'xstate';
import { transitionDefs, type TransitionInfo } from './model';

export interface Mutant {
  /** Stable id: `<transition key> <operator>`. */
  id: string;
  transition: TransitionInfo;
  config: Record<string, unknown>;
}

type Obj = Record<string, unknown>;
const isPlain = (x: unknown): x is Obj => typeof x === 'object' && x !== null && Object.getPrototypeOf(x) === Object.prototype;

/** Copies plain objects and arrays; functions and other objects are shared. */
function clone<T>(x: T): T {
  if (Array.isArray(x)) return x.map(clone) as T;
  if (isPlain(x)) return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, clone(v)])) as T;
  return x;
}

const toList = (x: unknown): unknown[] => (x === undefined ? [] : Array.isArray(x) ? x : [x]);

/** The state config of a state id (`transaction.summarizing`) in a config tree. */
function stateAt(config: Obj, machineId: string, id: string): Obj {
  if (id === machineId) return config;
  let node = config;
  for (const key of id.slice(machineId.length + 1).split('.')) node = (node.states as Record<string, Obj>)[key]!;
  return node;
}

/** The candidate list holding transition `t` in `config` (made an array in place), and its holder. */
function listOf(config: Obj, machineId: string, t: TransitionInfo): { holder: Obj; prop: string; list: unknown[] } {
  const node = stateAt(config, machineId, t.key.slice(0, t.key.indexOf(' ')));
  const label = t.event;
  const at = (holder: Obj, prop: string) => {
    const list = toList(holder[prop]);
    holder[prop] = list;
    return { holder, prop, list };
  };
  if (label === 'always') return at(node, 'always');
  const inv = /^(done|error)\((.+)\)$/.exec(label);
  if (inv) {
    const invokes = toList(node.invoke) as Obj[];
    const one = invokes.find((i) => (i.id ?? i.src) === inv[2])!;
    return at(one, inv[1] === 'done' ? 'onDone' : 'onError');
  }
  const after = /^after\((.+)\)$/.exec(label);
  if (after) return at(node.after as Obj, after[1]!);
  return at(node.on as Obj, label);
}

function candidate(list: unknown[], i: number): Obj {
  const c = list[i];
  const obj = typeof c === 'string' ? { target: c } : { ...(c as Obj) };
  list[i] = obj;
  return obj;
}

/** Sibling states of the transition's first target (or of the source's children for a targetless one), by id. */
function retargets(machine: AnyStateMachine, t: TransitionInfo): string[] {
  const id = (local: string) => (local === '(root)' ? machine.id : `${machine.id}.${local}`);
  if (t.targets.length === 0) return [];
  const target = id(t.targets[0]!);
  const parent = target.slice(0, target.lastIndexOf('.'));
  const node = machine.getStateNodeById(parent);
  return Object.values(node.states)
    .map((s) => s.id)
    .filter((s) => s !== target && s !== id(t.source));
}

export function mutantsOf(machine: AnyStateMachine): Mutant[] {
  const out: Mutant[] = [];
  const base = machine.config as Obj;
  const make = (t: TransitionInfo, op: string, edit: (list: unknown[], holder: Obj, prop: string) => void) => {
    const config = clone(base);
    const { list, holder, prop } = listOf(config, machine.id, t);
    edit(list, holder, prop);
    if (list.length === 0) delete holder[prop];
    out.push({ id: `${t.key} ${op}`, transition: t, config });
  };
  for (const t of transitionDefs(machine)) {
    make(t, 'delete', (list) => list.splice(t.index, 1));
    const [first] = retargets(machine, t);
    if (first) make(t, `retarget → ${first.slice(machine.id.length + 1)}`, (list) => void (candidate(list, t.index).target = `#${first}`));
    if (t.guard !== undefined) {
      make(t, 'drop guard', (list) => void delete candidate(list, t.index).guard);
      make(t, 'negate guard', (list) => {
        const c = candidate(list, t.index);
        c.guard = not(c.guard as never);
      });
    }
    t.actions.forEach((name, j) =>
      make(t, `drop action ${name}${t.actions.indexOf(name) === j ? '' : `#${j}`}`, (list) => {
        const c = candidate(list, t.index);
        const actions = toList(c.actions);
        actions.splice(j, 1);
        c.actions = actions;
      }),
    );
  }
  return out;
}

/** Checks the mutant builds, then makes `machine` build from it; returns the undo. */
export function install(machine: AnyStateMachine, mutant: Mutant): () => void {
  createMachine(mutant.config as never, machine.implementations as never);
  const original = machine.config;
  (machine as { config: unknown }).config = mutant.config;
  return () => {
    (machine as { config: unknown }).config = original;
  };
}
