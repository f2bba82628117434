/**
 * Observing a world's run: where it started, the transitions its charts took, what the log,
 * the request and the store hold afterwards.
 */
import { expect } from 'vitest';
import type { SessionEvent } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { openAIMessageProblems } from '../helpers/openai-validator';
import type { TransitionInfo } from './model';
import type { GeneratedPath } from './paths';
import type { World } from './runner';

/** Marks where the run under test starts (transitions and log). */
export function markRun(w: World): void {
  w.mark = w.recorded.length;
  w.firstRequest = w.srv.server.requests.length;
  w.logMark = w.session.events().map((e) => JSON.stringify(e));
}

/** Transitions the first actor of `machine` took since the mark. */
export function firedSinceMark(w: World, machine: string): TransitionInfo[] {
  const since = w.recorded.slice(w.mark).filter((r) => r.machine === machine);
  const actor = since[0]?.actor;
  return since.filter((r) => r.actor === actor).flatMap((r) => r.transitions);
}

/** The real chart took exactly the generated path's transitions. */
/**
 * The chart took the path's transitions, in order. Relayed notifications (`xcompact.notify`)
 * are left out of both: real charts announce as often as they prune or compact.
 */
export function expectPathTaken(w: World, path: GeneratedPath, byKey: Map<string, TransitionInfo>): void {
  const relay = (name: string) => name.includes('--xcompact.notify-->');
  const got = firedSinceMark(w, path.machine)
    .map((t) => t.name)
    .filter((n) => !relay(n));
  const want = path.fired.map((k) => byKey.get(k)?.name ?? k).filter((n) => !relay(n));
  expect(got, `the ${path.machine} chart's transitions at run time`).toEqual(want);
}

/** Event types appended since the mark. */
export function newTypes(w: World): string[] {
  return w.session
    .events()
    .slice(w.logMark.length)
    .map((e) => e.type);
}

export function newEvents(w: World): readonly SessionEvent[] {
  return w.session.events().slice(w.logMark.length);
}

/** Nothing logged before the mark was changed or removed. */
export function expectLogOnlyGrew(w: World): void {
  const now = w.session.events();
  expect(now.length).toBeGreaterThanOrEqual(w.logMark.length);
  expect(now.slice(0, w.logMark.length).map((e) => JSON.stringify(e))).toEqual(w.logMark);
}

export function expectValidRequest(w: World): void {
  expect(openAIMessageProblems(w.session.deriveMessages())).toEqual([]);
}

/** Summary requests the server received during this world's run. */
export function summaryRequests(w: World) {
  return w.srv.server.requests.slice(w.firstRequest).filter((r) => r.path === '/v1/chat/completions');
}

/**
 * Stops the engine (gracefully), closes the session and reopens it from the store: the
 * replayed log must equal the live one as it was before the stop. (A graceful stop closes a
 * bracket this engine left open with a compaction/end {cancelled}; at the end of a run none
 * may be open, so the stop must write nothing. A crash is `w.engine.actor.stop()`.)
 */
export async function expectReplays(w: World): Promise<Session> {
  const events = w.session.events().map((e) => JSON.stringify(e));
  const messages = JSON.stringify(w.session.deriveMessages());
  w.engine.stop();
  await w.session.close();
  const reopened = await Session.open(w.store, w.id);
  expect(reopened.events().map((e) => JSON.stringify(e))).toEqual(events);
  expect(JSON.stringify(reopened.deriveMessages())).toBe(messages);
  return reopened;
}
