/**
 * Shared test utilities for the session model: event builders, a full observable snapshot of
 * a session, a harness that runs the same test on a MemoryStore or a JsonlStore session, and
 * the "rejected append changes nothing" assertion.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import {
  JsonlStore,
  MemoryStore,
  Session,
  SessionRuleError,
  type AppendInput,
  type ImageBlock,
  type SessionEvent,
  type TextBlock,
  type Usage,
} from '../../src/session/index';

// ---------------------------------------------------------------------------
// Builders

export const textBlocks = (text: string): TextBlock[] => [{ type: 'text', text }];

export function user(text: string, source?: string): AppendInput<'user/message'> {
  return { type: 'user/message', data: source ? { content: textBlocks(text), source } : { content: textBlocks(text) }, surfaceOp: 'append' };
}

export function userParts(content: Array<TextBlock | ImageBlock>): AppendInput<'user/message'> {
  return { type: 'user/message', data: { content }, surfaceOp: 'append' };
}

export function system(text: string): AppendInput<'system/message'> {
  return { type: 'system/message', data: { text }, surfaceOp: 'append' };
}

export function assistant(text: string, callIds: readonly string[] = [], usage?: Usage): AppendInput<'assistant/message'> {
  const content: AppendInput<'assistant/message'>['data']['content'] = [];
  if (text !== '') content.push({ type: 'text', text });
  for (const id of callIds) content.push({ type: 'tool-call', id, name: `tool_${id}`, arguments: JSON.stringify({ id }) });
  return { type: 'assistant/message', data: usage ? { content, usage } : { content }, surfaceOp: 'append' };
}

export function result(callId: string, text = `result of ${callId}`, extra: { toolName?: string; isError?: boolean } = {}): AppendInput<'tool/result'> {
  return { type: 'tool/result', data: { callId, content: textBlocks(text), ...extra }, surfaceOp: 'append' };
}

export function replace<T extends AppendInput>(input: T, start: number, end: number, sourceEventSeqs: readonly number[]): T {
  return { ...input, surfaceOp: { op: 'replace', start, end }, sourceEventSeqs };
}

/**
 * A user/message replacing [start..end] (seqs, surface order) that is no compaction checkpoint:
 * the surface rules of a replace without the bracket a checkpoint needs.
 */
export function condense(start: number, end: number, sourceEventSeqs: readonly number[], summary = 'summary'): AppendInput<'user/message'> {
  return replace(user(`<condensed>\n${summary}\n</condensed>`), start, end, sourceEventSeqs);
}

/** A compaction checkpoint user/message replacing [start..end] (seqs, surface order); it belongs inside an open compaction. */
export function checkpoint(start: number, end: number, sourceEventSeqs: readonly number[], summary = 'summary'): AppendInput<'user/message'> {
  return replace(user(`<compacted-summary>\n${summary}\n</compacted-summary>`, 'compaction-checkpoint'), start, end, sourceEventSeqs);
}

export const turnStart = (turn: number): AppendInput<'turn/start'> => ({ type: 'turn/start', data: { turn } });
export const turnEnd = (turn: number): AppendInput<'turn/end'> => ({ type: 'turn/end', data: { turn } });
export const stepStart = (turn: number, step: number): AppendInput<'step/start'> => ({ type: 'step/start', data: { turn, step } });
export const stepEnd = (turn: number, step: number): AppendInput<'step/end'> => ({ type: 'step/end', data: { turn, step } });
export const header = (model = 'm1'): AppendInput<'request/header'> => ({
  type: 'request/header',
  data: { provider: 'p', model, tools: [{ type: 'function', function: { name: 'read', parameters: { type: 'object' } } }], maxTokens: 1024 },
});

// ---------------------------------------------------------------------------
// Observation

/** Everything a user of a Session can observe, as plain comparable values. */
export function snapshot(session: Session) {
  const surface = session.surface;
  const seqs = surface.slice(0);
  return {
    length: session.length,
    events: JSON.stringify(session.events()),
    surface: seqs,
    messages: JSON.stringify(session.deriveMessages()),
    cuts: session.balancedCuts(),
    pending: surface.pendingCalls(),
    replaceGeneration: surface.replaceGeneration,
    lock: JSON.stringify(session.lock),
    openTurn: session.openTurn,
    lastTurn: session.lastTurn,
    openStep: session.openStep,
    lastStep: session.lastStep,
    latestHeader: session.latestHeader?.seq,
    latestUsage: session.latestUsage?.seq,
    latestReply: session.latestReply?.seq,
    needsRecovery: session.needsRecovery,
    shadowed: seqs.map((s) => surface.shadowedBy(s) ?? null),
  };
}

/** The snapshot minus what legitimately differs between the writing and a reopened Session. */
export function durableSnapshot(session: Session) {
  const s = snapshot(session);
  const lock = JSON.parse(s.lock) as Record<string, unknown>;
  delete lock.orphan;
  return { ...s, lock };
}

export function appendAll(session: Session, inputs: readonly AppendInput[]): SessionEvent[] {
  return inputs.map((i) => session.append(i));
}

/** Runs `fn`, expects a SessionRuleError for `rule`, returns it. */
export function expectRule(fn: () => unknown, rule: string): SessionRuleError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected rule "${rule}" to be broken`).toBeInstanceOf(SessionRuleError);
  const err = caught as SessionRuleError;
  expect(err.rule).toBe(rule);
  expect(err.code).toBe('session-rule');
  expect(err.message).toContain(`[rule: ${rule}]`);
  return err;
}

// ---------------------------------------------------------------------------
// Temp dirs

const dirs: string[] = [];

export function tempDir(prefix = 'xcompact-test-'): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

export function removeTempDirs(): void {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------
// Harness: one session on a chosen backend

export type Backend = 'memory' | 'jsonl';
export const BACKENDS: readonly Backend[] = ['memory', 'jsonl'];

export interface Harness {
  readonly backend: Backend;
  session: Session;
  /** The store's bytes for this session after a flush (JSONL file / memory lines). */
  bytes(): Promise<string>;
  /** Closes the current session and opens it again from the store. */
  reopen(): Promise<Session>;
  dispose(): Promise<void>;
}

let harnessCounter = 0;

export async function openHarness(backend: Backend): Promise<Harness> {
  const id = `h${++harnessCounter}`;
  const store = backend === 'memory' ? new MemoryStore() : new JsonlStore(tempDir(), { sync: false });
  const h: Harness = {
    backend,
    session: await Session.open(store, id),
    async bytes() {
      await h.session.flush();
      if (store instanceof MemoryStore) return store.dump(id).join('\n');
      try {
        return await readFile(store.pathOf(id), 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return '';
        throw err;
      }
    },
    async reopen() {
      await h.session.close();
      h.session = await Session.open(store, id);
      return h.session;
    },
    async dispose() {
      await h.session.close().catch(() => undefined);
    },
  };
  return h;
}

/**
 * Appends `input` to the harness session, expects it to break `rule`, and checks that nothing
 * a user can observe changed: every projection, no observer notified, and the stored bytes.
 */
export async function expectRejected(h: Harness, input: AppendInput | (() => unknown), rule: string): Promise<SessionRuleError> {
  const session = h.session;
  const bytesBefore = await h.bytes();
  const before = snapshot(session);
  let notified = 0;
  const unsubscribe = session.subscribe(() => notified++);
  const err = expectRule(typeof input === 'function' ? input : () => session.append(input), rule);
  unsubscribe();
  expect(notified, 'a rejected append must not notify observers').toBe(0);
  expect(snapshot(session)).toEqual(before);
  expect(await h.bytes()).toBe(bytesBefore);
  return err;
}
