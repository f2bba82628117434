/**
 * A machine from createCompactionMachine holds no session listener beyond the brackets it has
 * open: a host creates and stops machines freely (one per agent run) over one long-lived
 * session, and nothing accumulates on the session.
 */
import { createActor } from 'xstate';
import { describe, expect, it } from 'vitest';
import { createCompactionMachine } from '../../src/engine/assembly';
import { Session, SessionWriter } from '../../src/session/index';

/** The session, counting its live listeners through its public subscribe. */
function countedSession(): { session: Session; live: () => number } {
  const session = Session.inMemory();
  let live = 0;
  const subscribe = session.subscribe.bind(session);
  session.subscribe = (listener) => {
    live++;
    const off = subscribe(listener);
    let done = false;
    return () => {
      if (!done) live--;
      done = true;
      return off();
    };
  };
  return { session, live: () => live };
}

function conversation(session: Session, steps: number): void {
  const w = new SessionWriter(session);
  w.system('You are a coding agent.');
  w.startTurn();
  w.user('Refactor the module.');
  for (let i = 0; i < steps; i++) {
    w.startStep();
    w.request({ provider: 'test', model: 'small', tools: [] });
    w.assistant({ text: `Step ${i}: ` + 'I looked at the file and changed a function. '.repeat(20) });
    w.endStep();
  }
  w.endTurn();
}

const MODELS = { 'test/small': { contextWindow: 6000, maxOutputTokens: 500 } };

describe('createCompactionMachine and session listeners', () => {
  it('creating, starting and stopping many machines leaves the listener count unchanged', () => {
    const { session, live } = countedSession();
    conversation(session, 2);
    const before = live();
    for (let i = 0; i < 50; i++) {
      const actor = createActor(createCompactionMachine({ session, models: MODELS }), { input: undefined }).start();
      actor.stop();
    }
    expect(live()).toBe(before);
  });

  it('a machine that compacted holds no listener once its bracket is closed', async () => {
    const { session, live } = countedSession();
    conversation(session, 12);
    const before = live();
    const actor = createActor(createCompactionMachine({ session, models: MODELS, config: { headroomTokens: 500, maxTokens: 400 } }), {
      input: undefined,
    }).start();
    const settled = new Promise<unknown>((resolve) => actor.on('request.settled', resolve));
    actor.send({ type: 'compact.requested', id: 'c1', aborted: false, abortReason: undefined, focus: undefined });
    expect(await settled).toMatchObject({ id: 'c1', result: { kind: 'manual', output: { status: 'committed' } } });
    expect(session.events().map((e) => e.type)).toEqual(expect.arrayContaining(['compaction/start', 'compaction/end']));
    expect(session.lock.held).toBe(false);
    actor.stop();
    expect(live()).toBe(before);
  });
});
