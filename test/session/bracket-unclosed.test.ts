/**
 * A compaction abandoned mid-way (here: the engine stopped while its summary was being
 * written) is closed by the engine with `compaction/end {error}`. When the store fails at that
 * moment, the host hears of it (`compaction.unclosed` on `engine.on`) instead of nothing: the
 * session refused the close (the lock stays until `session.recover()`), or the store could not
 * persist it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { StoreError } from '../../src/session/errors';
import type { SessionEvent } from '../../src/session/events';
import { Session } from '../../src/session/session';
import type { LogWriter, SessionStore, StoredLog } from '../../src/session/store';
import { MemoryStore } from '../../src/session/stores/memory';
import type { JsonlStore } from '../../src/session/stores/jsonl';
import { attachEngine, cleanupWorlds, endTurn, startServer, toolStep, type Server, type World } from '../machines/runner';

/** A memory store whose writer fails on demand: `failure` refuses appends, `flushError` fails flushes. */
class FaultyStore implements SessionStore {
  private readonly inner = new MemoryStore();
  failure: Error | undefined;
  flushError: Error | undefined;
  async open(id: string): Promise<StoredLog> {
    const log = await this.inner.open(id);
    const store = this;
    const writer: LogWriter = {
      get failure() {
        return store.failure;
      },
      append: (event: SessionEvent) => log.writer.append(event),
      flush: async () => {
        if (store.flushError) throw store.flushError;
        await log.writer.flush();
      },
      close: () => log.writer.close(),
    };
    return { ...log, writer };
  }
  dump(id: string): string[] {
    return this.inner.dump(id);
  }
  /** Where the test world says the log is (nothing is written there). */
  pathOf(id: string): string {
    return join(dir, `${id}.jsonl`);
  }
}

let srv: Server;
let dir: string;
beforeAll(async () => {
  srv = await startServer();
  dir = mkdtempSync(join(tmpdir(), 'xcompact-unclosed-'));
});
afterAll(() => {
  srv.close();
  rmSync(dir, { recursive: true, force: true });
});
afterEach(cleanupWorlds);

/** An engine over a FaultyStore session, stopped while its manual compaction waits for the summary. */
async function stoppedMidSummary(fail: (store: FaultyStore) => void): Promise<{ w: World; store: FaultyStore; startSeq: number }> {
  const store = new FaultyStore();
  const session = await Session.open(store, 'faulty');
  const w = attachEngine(srv, { dir, store: store as unknown as JsonlStore, id: 'faulty', session }, { pruner: false });
  w.ctl.setAuto();
  toolStep(w);
  toolStep(w);
  toolStep(w);
  endTurn(w);
  await session.flush();
  w.ctl.hold();
  const running = w.engine.compactNow().catch((e: unknown) => e);
  for (const s of ['checkAdmission', 'selectRange', 'validateSpan', 'openBracket'] as const) await (await w.ctl.take(s, running)).runReal();
  await w.ctl.take('summarize', running); // never answered: the engine stops under it
  const lock = session.lock;
  if (!lock.held) throw new Error('the compaction should hold the lock');
  fail(store);
  w.engine.stop();
  await running;
  return { w, store, startSeq: lock.startSeq };
}

describe('closing an abandoned compaction when the store fails', () => {
  it('the session refuses the close: compaction.unclosed (append) with the store error, and the lock stays', async () => {
    const { w, startSeq } = await stoppedMidSummary((store) => (store.failure = new StoreError('store-io', 'the disk went away')));
    const unclosed = w.notes.filter((n) => n.type === 'compaction.unclosed');
    expect(unclosed).toHaveLength(1);
    expect(unclosed[0]).toMatchObject({ type: 'compaction.unclosed', stage: 'append', startSeq });
    expect((unclosed[0] as { error: Error }).error.message).toMatch(/the disk went away/);
    expect(w.session.lock.held).toBe(true);
  });

  it('the store cannot persist the close: compaction.unclosed (flush) with the store error', async () => {
    const flushError = new StoreError('store-io', 'no space left on device');
    const { w, store, startSeq } = await stoppedMidSummary((s) => (s.flushError = flushError));
    await vi.waitFor(() => expect(w.notes.some((n) => n.type === 'compaction.unclosed')).toBe(true));
    const unclosed = w.notes.filter((n) => n.type === 'compaction.unclosed');
    expect(unclosed).toEqual([{ type: 'compaction.unclosed', stage: 'flush', startSeq, error: flushError }]);
    // Closed in memory (the lock is free), the end not persisted by this store.
    expect(w.session.lock.held).toBe(false);
    expect(store.dump('faulty').some((line) => line.includes('"compaction/end"'))).toBe(true);
  });

  it('a store that works: closed with compaction/end {cancelled}, nothing announced', async () => {
    const { w } = await stoppedMidSummary(() => undefined);
    await w.session.flush();
    expect(w.notes.filter((n) => n.type === 'compaction.unclosed')).toEqual([]);
    expect(w.session.lock.held).toBe(false);
    const end = w.session
      .events()
      .filter((e) => e.type === 'compaction/end')
      .at(-1)!;
    expect(end.type === 'compaction/end' && end.data.error?.code).toBe('cancelled');
  });
});
