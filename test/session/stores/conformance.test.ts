/**
 * One conformance suite for every SessionStore: MemoryStore, JsonlStore and PostgresStore
 * (against the run's real PostgreSQL server) must behave alike for append, reopen, close,
 * the one-writer rule, recover(), and damaged stored data where the store can have it.
 */
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { JsonlStore, MemoryStore, PostgresStore, Session, StoreError, type SessionStore } from '../../../src/session/index';
import { closePgStores, pgStore, pgUrl } from '../../helpers/pg';
import {
  appendAll,
  assistant,
  checkpoint,
  durableSnapshot,
  header,
  removeTempDirs,
  result,
  stepEnd,
  stepStart,
  system,
  tempDir,
  turnEnd,
  turnStart,
  user,
} from '../../helpers/session';

afterAll(async () => {
  removeTempDirs();
  await closePgStores();
});

interface Backend {
  name: string;
  store: SessionStore;
  /** Everything stored for a session, as the store holds it (for "nothing was written"). */
  raw(id: string): Promise<string>;
  /** Replaces the stored event at `seq` with `value` (a bad line / row), where the store can have one. */
  damage?: (id: string, seq: number, value: unknown) => Promise<void>;
  /** A crash mid-write: a partial last record, where the store can have one. */
  tear?: (id: string) => Promise<void>;
}

const backends: Array<[string, () => Backend]> = [
  [
    'MemoryStore',
    () => {
      const store = new MemoryStore();
      return { name: 'memory', store, raw: async (id) => store.dump(id).join('\n') };
    },
  ],
  [
    'JsonlStore',
    () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      const read = (id: string) => {
        try {
          return readFileSync(store.pathOf(id), 'utf8');
        } catch {
          return '';
        }
      };
      return {
        name: 'jsonl',
        store,
        raw: async (id) => read(id),
        damage: async (id, seq, value) => {
          const lines = read(id).split('\n');
          lines[seq] = typeof value === 'string' ? value : JSON.stringify(value);
          writeFileSync(store.pathOf(id), lines.join('\n'));
        },
        tear: async (id) => appendFileSync(store.pathOf(id), '{"seq":99,"type":"user/mes'),
      };
    },
  ],
  [
    'PostgresStore',
    () => {
      const store = pgStore();
      const schema = (store as unknown as { names: { schema: string } }).names.schema;
      const sql = async (text: string, values: unknown[]) => {
        const c = new pg.Client({ connectionString: pgUrl() });
        await c.connect();
        try {
          return await c.query(text, values);
        } finally {
          await c.end();
        }
      };
      return {
        name: 'postgres',
        store,
        raw: async (id) => {
          const r = await sql(`SELECT seq, event::text AS e FROM ${schema}.events WHERE session_id = $1 ORDER BY seq`, [id]).catch(() => ({ rows: [] }));
          return (r.rows as { seq: number; e: string }[]).map((x) => `${x.seq} ${x.e}`).join('\n');
        },
        damage: async (id, seq, value) => {
          await sql(`UPDATE ${schema}.events SET event = $3::jsonb WHERE session_id = $1 AND seq = $2`, [id, seq, JSON.stringify(value)]);
        },
        // A statement is atomic: a crash mid-write leaves no partial row, so there is nothing to tear.
      };
    },
  ],
];

/** A session touching every projection, left mid-flight (open turn and step, a pending call, a live lock). */
function writeMidFlight(s: Session): { startSeq: number } {
  appendAll(s, [system('sys'), turnStart(0), stepStart(0, 0), header('m1'), user('u1')]);
  appendAll(s, [assistant('', ['a', 'b'], { promptTokens: 100, completionTokens: 10 }), result('a'), result('b')]);
  s.append(stepEnd(0, 0));
  const start = s.append({ type: 'compaction/start', data: { turn: 0, trigger: 'pressure' } });
  const summary = s.append({ type: 'compaction/summary', data: { summary: 'S', range: { start: 4, end: 7 }, shadowedSeqs: [4, 5, 6, 7], shadowedTokens: 50 } });
  s.append(checkpoint(4, 7, [start.seq, summary.seq, 4, 5, 6, 7]));
  s.append({ type: 'compaction/end', data: { turn: 0 } });
  s.append(stepStart(0, 1));
  s.append(assistant('', ['c']));
  const open = s.append({ type: 'compaction/start', data: { turn: 0, trigger: 'overflow' } });
  return { startSeq: open.seq };
}

async function rejectsWith(p: Promise<unknown>, code: string): Promise<StoreError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, `expected StoreError ${code}`).toBeInstanceOf(StoreError);
  expect((err as StoreError).code).toBe(code);
  return err as StoreError;
}

describe.each(backends)('%s conformance', (_name, make) => {
  it('appends, flushes and reopens with every projection rebuilt', async () => {
    const b = make();
    const s = await Session.open(b.store, 'rt');
    writeMidFlight(s);
    await s.flush();
    const live = durableSnapshot(s);
    await s.close();
    const r = await Session.open(b.store, 'rt');
    expect(durableSnapshot(r)).toEqual(live);
    expect(r.openedLength).toBe(r.length);
    expect(r.loadReport).toEqual({});
    await r.close();
  });

  it('a new session opens empty, and a batch of synchronous appends is stored whole and in order', async () => {
    const b = make();
    const s = await Session.open(b.store, 'batch');
    expect(s.length).toBe(0);
    for (let i = 0; i < 200; i++) s.append(user(`m${i}`));
    await s.close();
    const r = await Session.open(b.store, 'batch');
    expect(r.events().map((e) => (e.data as { content: { text: string }[] }).content[0]!.text)).toEqual(Array.from({ length: 200 }, (_, i) => `m${i}`));
    await r.close();
  });

  it('close() flushes, refuses later appends, is idempotent, and releases the session', async () => {
    const b = make();
    const s = await Session.open(b.store, 'closing');
    s.append(user('before close'));
    await s.close();
    await s.close();
    expect(() => s.append(user('after close'))).toThrow(expect.objectContaining({ code: 'store-closed' }));
    const r = await Session.open(b.store, 'closing');
    expect(r.length).toBe(1);
    await r.close();
  });

  it('a second writer is refused while the first is open, and nothing it tried is stored', async () => {
    const b = make();
    const s = await Session.open(b.store, 'one');
    s.append(user('first writer'));
    await s.flush();
    const before = await b.raw('one');
    await rejectsWith(Session.open(b.store, 'one'), 'store-locked');
    expect(await b.raw('one')).toBe(before);
    s.append(user('still the writer'));
    await s.close();
    const again = await Session.open(b.store, 'one');
    expect(again.length).toBe(2);
    await again.close();
  });

  it('recover() closes what a stopped writer left open, durably', async () => {
    const b = make();
    const s = await Session.open(b.store, 'rec');
    const { startSeq } = writeMidFlight(s);
    await s.close();
    const r = await Session.open(b.store, 'rec');
    expect(r.needsRecovery).toBe(true);
    expect(r.lock).toMatchObject({ held: true, orphan: true, startSeq });
    const report = r.recover();
    expect(report).toEqual({ closedCalls: ['c'], closedStep: true, closedTurn: true, clearedLock: startSeq });
    const after = durableSnapshot(r);
    await r.close();
    const r2 = await Session.open(b.store, 'rec');
    expect(r2.needsRecovery).toBe(false);
    expect(durableSnapshot(r2)).toEqual(after);
    await r2.close();
  });

  it('a stored event that breaks the log rules is a store-corrupt error naming where; nothing is written', async (ctx) => {
    const b = make();
    if (!b.damage) return ctx.skip();
    const s = await Session.open(b.store, 'bad');
    appendAll(s, [user('u0'), turnStart(0), user('u2'), turnEnd(0)]);
    await s.close();
    // Valid JSON, wrong shape: turn/start with a string turn number.
    await b.damage('bad', 1, { seq: 1, type: 'turn/start', time: new Date().toISOString(), data: { turn: 'zero' } });
    const before = await b.raw('bad');
    const err = await rejectsWith(Session.open(b.store, 'bad'), 'store-corrupt');
    expect(err.line).toBe(2);
    expect(err.message).toMatch(/bad/);
    expect(err.message).toMatch(/turn/);
    expect(await b.raw('bad')).toBe(before);
    // The failed open released the session: the next open fails the same way, not as locked.
    await rejectsWith(Session.open(b.store, 'bad'), 'store-corrupt');
  });

  it('refuses Windows-reserved device names as session ids (any case, with or without extension), creating nothing', async () => {
    const b = make();
    const reserved = ['CON', 'con', 'Prn', 'aux', 'NUL', 'nul.jsonl', 'COM1', 'com9.txt', 'LPT1', 'lpt9', 'Aux.tar.gz', 'CON.'];
    for (const id of reserved) {
      const err = await Session.open(b.store, id).then(
        () => new Error(`${id} was accepted`),
        (e: unknown) => e,
      );
      expect((err as { code?: string }).code, id).toBe('invalid-session-id');
      expect(await b.raw(id).catch(() => '')).toBe('');
    }
    // Names that only start like a device are ordinary ids.
    for (const id of ['console', 'com10', 'lpt0', 'nullable', 'aux-1', 'prn_x']) {
      const s = await Session.open(b.store, id);
      await s.close();
    }
  });

  it('a torn last record (a crash mid-write) is reported and dropped, never merged', async (ctx) => {
    const b = make();
    if (!b.tear) return ctx.skip();
    const s = await Session.open(b.store, 'torn');
    appendAll(s, [user('a'), user('b')]);
    await s.close();
    await b.tear('torn');
    const r = await Session.open(b.store, 'torn');
    expect(r.length).toBe(2);
    expect(r.loadReport.tornTail).toMatchObject({ line: 3 });
    r.append(user('c'));
    await r.close();
    const r2 = await Session.open(b.store, 'torn');
    expect(r2.length).toBe(3);
    await r2.close();
  });
});

describe('PostgresStore is a SessionStore like the others', () => {
  it('is exported from the package root', async () => {
    const root = await import('../../../src/index');
    expect(root.PostgresStore).toBe(PostgresStore);
  });
});
