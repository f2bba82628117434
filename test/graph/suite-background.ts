/**
 * Background chart and gate paths (SPEC §13) on real actors: the chart runs as an actor with
 * each invoked service replaced by a call the path settles (its output or error, as the
 * catalog gives it), and the gate's messages to the background chart are answered by the path.
 * The charts' behaviour over the real services and the real engine is tested in
 * test/background.test.ts and test/background-crash.test.ts; these paths make every
 * transition of both charts run at least once on a real actor.
 */
import { expect } from 'vitest';
import { createActor, fromCallback, fromPromise, type AnyActorRef, type AnyStateMachine, type InspectionEvent } from 'xstate';
import { backgroundMachine } from '../../src/machines/background';
import { gateMachine } from '../../src/machines/gate';
import { GATE_INPUTS } from './catalogs-background';
import { transitionsOfMicrostep, type TransitionInfo } from './model';
import type { GeneratedPath } from './paths';
import { runtimeCovered, type Server } from './runner';

type Pending = Map<string, { resolve(v: unknown): void; reject(e: unknown): void }>;

const tick = () => new Promise<void>((r) => setTimeout(r, 0));
async function until(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !ok(); i++) await tick();
  expect(ok()).toBe(true);
}

/** One scripted actor per service name: a call that waits for the path to settle it. */
function scripted(pending: Pending, names: string[]) {
  return Object.fromEntries(
    names.map((name) => [
      name,
      fromPromise<unknown, unknown>(
        ({ signal }) =>
          new Promise((resolve, reject) => {
            const entry = { resolve, reject };
            pending.set(name, entry);
            // A call its state left (a cancel) is gone: the next call of the same service is a new one.
            signal.addEventListener('abort', () => pending.get(name) === entry && pending.delete(name));
          }),
      ),
    ]),
  );
}

async function runPath(machine: AnyStateMachine, input: unknown, path: GeneratedPath, pending: Pending): Promise<{ fired: Set<string>; actor: AnyActorRef; replies: unknown[] }> {
  const fired = new Set<string>();
  const inspect = (e: InspectionEvent) => {
    if (e.type !== '@xstate.microstep') return;
    for (const t of transitionsOfMicrostep(e)) {
      runtimeCovered.add(t.key);
      fired.add(t.key);
    }
  };
  const replies: unknown[] = [];
  const replyTo = createActor(fromCallback(({ receive }) => receive((e) => replies.push(e)))).start();
  const actor = createActor(machine, { input, inspect });
  actor.start();
  for (const step of path.steps) {
    const type = step.event.type;
    if (type.startsWith('xstate.done.actor.') || type.startsWith('xstate.error.actor.')) {
      const src = step.outcome.split(':')[0]!;
      await until(() => pending.has(src));
      const call = pending.get(src)!;
      pending.delete(src);
      if (type.startsWith('xstate.done.actor.')) call.resolve((step.event as { output?: unknown }).output);
      else call.reject((step.event as { error?: unknown }).error);
    } else {
      actor.send('replyTo' in step.event ? { ...step.event, replyTo } : step.event);
    }
    await tick();
    await tick();
  }
  for (const key of path.fired) expect(fired.has(key), `transition ${key} was not taken by the real actor`).toBe(true);
  expect(actor.getSnapshot().value).toEqual(path.finalValue);
  return { fired, actor, replies };
}

export async function runBackgroundPath(_srv: Server, path: GeneratedPath, _byKey: Map<string, TransitionInfo>): Promise<void> {
  const pending: Pending = new Map();
  const services = ['selectRange', 'validateSpan', 'openBracket', 'summarize', 'revalidate', 'commit', 'flush', 'closeWithError'];
  const machine = backgroundMachine.provide({ actors: scripted(pending, services) as never });
  const { actor, replies } = await runPath(machine, undefined, path, pending);
  // Every step and await was answered; a job that waited was released when its run ended.
  const asked = path.steps.filter((s) => s.outcome.startsWith('step:') || s.outcome === 'await').length;
  const answers = replies.filter((r) => (r as { type: string }).type !== 'background.settled').length;
  expect(answers).toBe(asked);
  const waited = replies.filter((r) => (r as { type: string }).type === 'background.waiting').length;
  expect(replies.filter((r) => (r as { type: string }).type === 'background.settled')).toHaveLength(actor.getSnapshot().value === 'idle' ? waited : 0);
  actor.stop();
}

export async function runGatePath(_srv: Server, path: GeneratedPath, _byKey: Map<string, TransitionInfo>): Promise<void> {
  const pending: Pending = new Map();
  const consulted: string[] = [];
  const machine = gateMachine.provide({
    actors: scripted(pending, ['measure', 'pressure', 'overflow', 'manual']) as never,
    // The background chart is played by the path: what the gate sends it is only recorded.
    actions: { consult: () => void consulted.push('consult'), 'cancel background': () => void consulted.push('cancel') },
  });
  const input = GATE_INPUTS.find((i) => i.label === path.input)!.input;
  const { actor } = await runPath(machine, input, path, pending);
  const snap = actor.getSnapshot();
  expect(snap.status).toBe('done');
  const out = snap.output as { background: { waited: boolean; preparing: boolean } };
  expect(out.background.waited).toBe(path.steps.some((s) => s.outcome === 'background:waiting'));
  expect(out.background.preparing).toBe(path.steps.some((s) => s.outcome === 'background:preparing'));
  expect(consulted.filter((c) => c === 'consult').length).toBe(path.steps.some((s) => s.outcome.startsWith('background:')) ? 1 : consulted.filter((c) => c === 'consult').length);
}
