/**
 * A small recorder of what the charts did: every microstep of every machine actor, and (given
 * a session) every event appended to the log, in the order they happened. The result is plain
 * JSON that the offline viewer (visualizer/index.html) replays step by step.
 *
 *   const recorder = createTraceRecorder(session);
 *   const engine = createCompactionEngine({ session, inspect: recorder.inspect });
 *   ...
 *   await recorder.save('compaction.trace.json');
 *
 * With `{ follow: 'trace.live.js' }` it also appends every step to a file as it happens, which
 * `visualizer/index.html?follow=…` loads again and again to follow the run live.
 *
 * No context and no event payloads are recorded: a trace stays small and holds no conversation text.
 */
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { InspectionEvent, StateValue } from 'xstate';
import type { Session } from './session/session';

export interface TraceActor {
  /** The actor's session id (`x:0`), unique within the actor system. */
  id: string;
  /** The id it was invoked under (`job`, `transaction`), or its session id for the root. */
  name: string;
  /** The machine it runs (`engine`, `pressure`, … — the names in visualizer/out/). */
  machine: string;
  systemId?: string;
  /** Session id of the actor that invoked it. */
  parent?: string;
}

export interface TraceTransition {
  /** State node ids, e.g. `transaction.summarizing`. */
  source: string;
  /** Empty for a transition that runs actions without changing state. */
  target: string[];
  event: string;
  guard?: string;
}

export interface TraceStateStep {
  kind: 'state';
  /** Milliseconds since the recorder was created. */
  t: number;
  /** A microstep (a transition taken) or a snapshot that shows a state no microstep did (an actor's first state). */
  cause: 'microstep' | 'snapshot';
  actor: string;
  machine: string;
  event: string;
  value: StateValue;
  status: string;
  transitions: TraceTransition[];
}

export interface TraceSessionStep {
  kind: 'session';
  t: number;
  seq: number;
  type: string;
  /** How the event changed the surface, if it did. */
  surfaceOp?: 'append' | 'replace';
  /** For a replace: the log seqs of the first and last surface nodes it shadowed. */
  replaces?: [number, number];
}

export type TraceStep = TraceStateStep | TraceSessionStep;

export interface Trace {
  format: 'xcompact-trace';
  version: 1;
  actors: TraceActor[];
  steps: TraceStep[];
}

export interface TraceRecorder {
  /** Pass as `createCompactionEngine({ inspect })` (or to any `createActor`). */
  inspect: (event: InspectionEvent) => void;
  toJSON(): Trace;
  /** Writes the trace as JSON; a path ending in `.js` writes `window.XCOMPACT_TRACE = …;` for `index.html?trace=`. */
  save(path: string): Promise<void>;
  /** Stops listening to the session. */
  stop(): void;
}

export interface TraceRecorderOptions {
  /** Clock in milliseconds (default `performance.now`). */
  now?: () => number;
  /**
   * A live trace file, written while the engine runs, for the viewer's follow mode
   * (`visualizer/index.html?follow=<path>`): one `xcompactTrace({...});` line per actor and per
   * step, appended as it happens, so a page that loads it again sees what was added. Created
   * (or emptied) when the recorder is made.
   */
  follow?: string;
}

/** The function each line of a live trace calls; the viewer defines it before loading the file. */
export const LIVE_TRACE_CALL = 'xcompactTrace';

/** One line of a live trace: its header, an actor, or a step. */
export type LiveTraceRecord = { format: 'xcompact-trace'; version: 1 } | { actor: TraceActor } | { step: TraceStep };

export function liveTraceLine(record: LiveTraceRecord): string {
  return `${LIVE_TRACE_CALL}(${JSON.stringify(record)});\n`;
}

interface ActorLike {
  id: string;
  sessionId: string;
  systemId?: string;
  _parent?: { sessionId: string };
}

interface MachineSnapshotLike {
  value: StateValue;
  status: string;
  machine?: { id: string };
}

/** A guard as text: its name, with and/or/not/stateIn helpers spelled out (`a & b`, `a | b`, `not a`, `in x`). */
export function describeGuard(guard: unknown): string | undefined {
  if (guard === undefined || guard === null) return undefined;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'object' && typeof (guard as { type?: unknown }).type === 'string') return (guard as { type: string }).type;
  const g = guard as { name?: string; guards?: unknown[]; stateValue?: unknown };
  const part = (x: unknown) => (typeof x === 'function' && (x as { guards?: unknown }).guards ? `(${describeGuard(x)})` : describeGuard(x));
  if (g.guards && g.name === 'not') return `not ${part(g.guards[0])}`;
  if (g.guards && (g.name === 'and' || g.name === 'or')) return g.guards.map(part).join(g.name === 'and' ? ' & ' : ' | ');
  if (g.stateValue !== undefined) return `in ${typeof g.stateValue === 'string' ? g.stateValue : JSON.stringify(g.stateValue)}`;
  return 'inline guard';
}

export function createTraceRecorder(session?: Session, options: TraceRecorderOptions = {}): TraceRecorder {
  const now = options.now ?? (() => performance.now());
  const start = now();
  const at = () => Math.round((now() - start) * 100) / 100;
  const actors = new Map<string, TraceActor>();
  const steps: TraceStep[] = [];
  const last = new Map<string, string>();
  const follow = options.follow;
  if (follow !== undefined) {
    mkdirSync(dirname(follow), { recursive: true });
    writeFileSync(follow, liveTraceLine({ format: 'xcompact-trace', version: 1 }));
  }
  const live = (record: LiveTraceRecord) => {
    if (follow !== undefined) appendFileSync(follow, liveTraceLine(record));
  };

  const machineOf = (snapshot: unknown): MachineSnapshotLike | undefined => {
    const s = snapshot as MachineSnapshotLike | undefined;
    return s && s.machine && s.value !== undefined ? s : undefined;
  };

  const noteActor = (ref: ActorLike, machine: string) => {
    if (actors.has(ref.sessionId)) return;
    const actor: TraceActor = { id: ref.sessionId, name: ref.id, machine };
    if (ref.systemId !== undefined) actor.systemId = ref.systemId;
    if (ref._parent) actor.parent = ref._parent.sessionId;
    actors.set(ref.sessionId, actor);
    live({ actor });
  };

  const record = (ev: InspectionEvent, cause: TraceStateStep['cause'], transitions: TraceTransition[]) => {
    const snapshot = machineOf((ev as { snapshot?: unknown }).snapshot);
    if (!snapshot) return;
    const ref = ev.actorRef as unknown as ActorLike;
    const key = JSON.stringify([snapshot.value, snapshot.status]);
    // A snapshot only repeats what the microsteps of its macrostep showed, except an actor's first state.
    if (cause === 'snapshot' && last.get(ref.sessionId) === key) return;
    last.set(ref.sessionId, key);
    const machine = snapshot.machine!.id;
    noteActor(ref, machine);
    const step: TraceStateStep = {
      kind: 'state',
      t: at(),
      cause,
      actor: ref.sessionId,
      machine,
      event: (ev as { event?: { type?: string } }).event?.type ?? '',
      value: snapshot.value,
      status: snapshot.status,
      transitions,
    };
    steps.push(step);
    live({ step });
  };

  const inspect = (ev: InspectionEvent) => {
    if (ev.type === '@xstate.microstep') {
      // An event the state ignores still makes a microstep, with no transition: nothing to show.
      if (ev._transitions.length === 0) return;
      const transitions = ev._transitions.map((t) => {
        const tr: TraceTransition = {
          source: t.source.id,
          target: (t.target ?? []).map((n) => n.id),
          event: t.eventType as string,
        };
        const g = describeGuard(t.guard);
        if (g !== undefined) tr.guard = g;
        return tr;
      });
      record(ev, 'microstep', transitions);
    } else if (ev.type === '@xstate.snapshot') {
      record(ev, 'snapshot', []);
    }
  };

  const unsubscribe = session?.subscribe((event) => {
    const step: TraceSessionStep = { kind: 'session', t: at(), seq: event.seq, type: event.type };
    const op = event.surfaceOp;
    if (op === 'append') step.surfaceOp = 'append';
    else if (op && typeof op === 'object') {
      step.surfaceOp = 'replace';
      step.replaces = [op.start, op.end];
    }
    steps.push(step);
    live({ step });
  });

  const toJSON = (): Trace => ({
    format: 'xcompact-trace',
    version: 1,
    actors: [...actors.values()],
    steps: JSON.parse(JSON.stringify(steps)) as TraceStep[],
  });

  return {
    inspect,
    toJSON,
    async save(path) {
      const json = JSON.stringify(toJSON());
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, path.endsWith('.js') ? `window.XCOMPACT_TRACE = ${json};\n` : `${json}\n`);
    },
    stop() {
      unsubscribe?.();
    },
  };
}
