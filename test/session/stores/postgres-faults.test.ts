/**
 * PostgresStore against a server that misbehaves (docs/reliability.md#the-stores-at-their-edges): a server that stops
 * answering (frozen: a TCP proxy that stops forwarding) or a lock that is never released
 * cannot make `flush()` wait without limit (the store's statement timeout), and a server that
 * is shutting down or starting up (SQLSTATE 57P01 / 57P03) is the retryable
 * `store-unreachable`, not `store-io`.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { Session, StoreError } from '../../../src/session/index';
import { storeErrorOf } from '../../../src/session/stores/postgres-connect';
import { closePgStores, pgStore, pgUrl } from '../../helpers/pg';
import { turnStart, user } from '../../helpers/session';

afterAll(closePgStores);

async function sql(text: string, values: unknown[] = []): Promise<pg.QueryResult> {
  const c = new pg.Client({ connectionString: pgUrl() });
  await c.connect();
  try {
    return await c.query(text, values);
  } finally {
    await c.end();
  }
}

/** A TCP proxy to the test server that can stop forwarding (a frozen server, as the client sees it). */
async function freezableProxy(): Promise<{ url: string; freeze(): void; close(): Promise<void> }> {
  const target = new URL(pgUrl());
  const sockets: Socket[] = [];
  let frozen = false;
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    sockets.push(client, upstream);
    client.on('data', (d) => void (frozen || upstream.write(d)));
    upstream.on('data', (d) => void (frozen || client.write(d)));
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const url = new URL(pgUrl());
  url.port = String(port);
  return {
    url: url.toString(),
    freeze: () => void (frozen = true),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  );
}

describe('PostgresStore: a server that stops answering', () => {
  it('flush() fails with store-unreachable within the statement timeout, not never', async () => {
    const proxy = await freezableProxy();
    try {
      const store = pgStore({ url: proxy.url, statementTimeoutMs: 400 });
      const s = await Session.open(store, 'frozen');
      s.append(turnStart(0));
      await s.flush();
      proxy.freeze();
      s.append(user('into the void'));
      const err = await rejection(s.flush());
      expect(err).toBeInstanceOf(StoreError);
      expect((err as StoreError).code).toBe('store-unreachable');
      // It came back at all: the frozen server never answers, so the store's own limit ended the wait.
      expect((err as Error).message).toMatch(/no answer .* within 1400 ms/);
      await s.close().catch(() => undefined);
    } finally {
      await proxy.close();
    }
  });

  it('a lease row locked by someone else fails the flush after the lock timeout (store-unreachable), nothing stored', async () => {
    const store = pgStore({ statementTimeoutMs: 500 });
    const schema = (store as unknown as { names: { schema: string } }).names.schema;
    const s = await Session.open(store, 'locked');
    s.append(turnStart(0));
    await s.flush();
    const admin = new pg.Client({ connectionString: pgUrl() });
    await admin.connect();
    try {
      await admin.query('BEGIN');
      await admin.query(`SELECT * FROM ${schema}.leases WHERE session_id = 'locked' FOR UPDATE`);
      s.append(user('blocked'));
      const err = await rejection(s.flush());
      expect((err as StoreError).code).toBe('store-unreachable');
      await admin.query('ROLLBACK');
      const rows = await sql(`SELECT count(*)::int AS n FROM ${schema}.events WHERE session_id = 'locked'`);
      expect(rows.rows[0].n).toBe(1);
    } finally {
      await admin.end();
      await s.close().catch(() => undefined);
    }
  });
});

describe('PostgresStore: a server shutting down or starting up is retryable', () => {
  it('a backend terminated mid-flush (SQLSTATE 57P01) is store-unreachable', async () => {
    const app = `xc57p01_${process.pid}`;
    const url = new URL(pgUrl());
    url.searchParams.set('application_name', app);
    const store = pgStore({ url: url.toString(), statementTimeoutMs: 20_000 });
    const schema = (store as unknown as { names: { schema: string } }).names.schema;
    const s = await Session.open(store, 'terminated');
    s.append(turnStart(0));
    await s.flush();
    const admin = new pg.Client({ connectionString: pgUrl() });
    await admin.connect();
    try {
      await admin.query('BEGIN');
      await admin.query(`SELECT * FROM ${schema}.leases WHERE session_id = 'terminated' FOR UPDATE`);
      s.append(user('cut off'));
      const flushed = rejection(s.flush());
      // Wait until the writer's statement is blocked on the lock, then terminate its backend.
      for (let i = 0; i < 100; i++) {
        const r = await sql(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, [app]);
        if (r.rows.length > 0) {
          await sql('SELECT pg_terminate_backend($1)', [r.rows[0].pid]);
          break;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      const err = await flushed;
      expect(err).toBeInstanceOf(StoreError);
      expect((err as StoreError).code).toBe('store-unreachable');
      expect((err as Error).message).toContain('57P01');
    } finally {
      await admin.query('ROLLBACK').catch(() => undefined);
      await admin.end();
      await s.close().catch(() => undefined);
    }
  });

  it('the server errors of starting up and shutting down map to store-unreachable; others stay store-io', () => {
    const dbError = (code: string, message: string) => Object.assign(new pg.DatabaseError(message, message.length, 'error'), { code });
    for (const [code, message] of [
      ['57P03', 'the database system is starting up'],
      ['57P01', 'terminating connection due to administrator command'],
      ['57P02', 'terminating connection due to crash of another server process'],
      ['08006', 'connection failure'],
    ] as const) {
      const e = storeErrorOf(dbError(code, message), 'postgres://x', 'appending events');
      expect(e.code, code).toBe('store-unreachable');
      expect(e.message).toContain(code);
    }
    expect(storeErrorOf(dbError('22P02', 'invalid input syntax'), 'postgres://x', 'appending events').code).toBe('store-io');
  });
});
