/**
 * PostgresStore: the session log in PostgreSQL, for many workers on one session.
 *
 * - One row per event (session id, seq, event as jsonb; primary key (session id, seq)); the
 *   schema is in postgres-schema.ts and is created on the first writer open (or `migrate()`).
 * - A writer holds a lease row with an expiry, renewed while the session is open. A second
 *   writer is refused (`store-locked`) until the lease is released by close() or expires;
 *   a takeover of an expired lease is one INSERT … ON CONFLICT DO UPDATE … WHERE expired, so
 *   two takers can never both win.
 * - An append flush is one statement: it renews the lease (fencing: a writer whose lease was
 *   taken over stores nothing) and inserts the whole batch at the expected seqs, only if the
 *   log ends right before them. Anything else is a `store-conflict`: nothing of the batch is
 *   stored and the writer stops, so the caller reopens (reloads) the session.
 * - A flush is acknowledged exactly when its rows are durable. When the answer never comes
 *   (the connection breaks, or the server stops answering, after the statement was sent) the
 *   rows may or may not have landed: the flush fails with `store-unreachable`, the writer stops
 *   and keeps them. Each row carries the event's id (a hash of its JSON), so the outcome can be
 *   read back: a later `flush()` or `close()`, once the server is back, skips the rows that
 *   landed and writes the others (a re-append of the same event is a no-op), and `close()`
 *   succeeds; or a reopen by the same store says which landed (`loadReport.unresolvedFlush`)
 *   and the old writer stands down.
 * - `readOnly: true` opens sessions without a lease (inspect, dashboards, a standby): appends
 *   are refused with `store-read-only` and nothing is created in the database.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { XcompactError } from '../../errors';
import { StoreError } from '../errors';
import { checkSessionId, type LoadReport, type LogWriter, type SessionStore, type StoredLog } from '../store';
import { PostgresWriter } from './postgres-writer';
import { createPool, describeUrl, storeErrorOf, withDeadline } from './postgres-connect';
import type { PgPool } from './postgres-connect';
export type { PgPool };
import { migrate, schemaNames, storedVersion, type Queryable, type SchemaNames } from './postgres-schema';

type Pool = PgPool;

export interface PostgresStoreOptions {
  /** `postgres://user:password@host:port/database`. Either this or `pool`. */
  url?: string;
  /** A `pg` Pool of your own (not ended by `close()`). */
  pool?: Pool;
  /** PostgreSQL schema holding the tables (default `xcompact`). */
  schema?: string;
  /** Writer lease length in ms (default 30 000); renewed every third of it while open. */
  leaseMs?: number;
  /** Open sessions without a writer lease; appends are refused. */
  readOnly?: boolean;
  /**
   * How long one statement may take, in ms (default 30 000). On the store's own pool it is the
   * server's `statement_timeout` and `lock_timeout`; on any pool, a statement with no answer
   * within it plus a second (a frozen server sends no error) fails with `store-unreachable`,
   * so `flush()` never waits without limit.
   */
  statementTimeoutMs?: number;
}

/** Time past the server's own timeouts before the client stops waiting for their error. */
const GRACE_MS = 1_000;

export class PostgresStore implements SessionStore {
  readonly readOnly: boolean;
  readonly leaseMs: number;
  readonly statementTimeoutMs: number;
  /** Where the store points, without the password (for messages). */
  readonly where: string;
  private readonly names: SchemaNames;
  private readonly url: string | undefined;
  private poolP: Promise<Pool> | undefined;
  private readonly ownsPool: boolean;
  private schemaReady: Promise<void> | undefined;
  /** Writers of this store whose last flush has an unknown outcome, by session id: a reopen resolves it. */
  private readonly unresolved = new Map<string, PostgresWriter>();

  constructor(options: PostgresStoreOptions) {
    if (!options.url && !options.pool)
      throw new StoreError('store-unreachable', 'PostgresStore needs a `url` (postgres://user:password@host:port/database) or a `pool`.');
    this.names = schemaNames(options.schema ?? 'xcompact');
    this.readOnly = options.readOnly ?? false;
    this.leaseMs = options.leaseMs ?? 30_000;
    if (!Number.isInteger(this.leaseMs) || this.leaseMs < 100) {
      // A bad option, not a store failure: nothing was tried, and retrying cannot help.
      throw new XcompactError('config', `PostgresStore option leaseMs must be an integer number of milliseconds ≥ 100; got ${String(options.leaseMs)}.`);
    }
    this.statementTimeoutMs = options.statementTimeoutMs ?? 30_000;
    if (!Number.isInteger(this.statementTimeoutMs) || this.statementTimeoutMs < 1) {
      throw new XcompactError(
        'config',
        `PostgresStore option statementTimeoutMs must be a whole number of milliseconds ≥ 1; got ${String(options.statementTimeoutMs)}.`,
      );
    }
    this.url = options.url;
    this.ownsPool = !options.pool;
    if (options.pool) this.poolP = Promise.resolve(options.pool);
    this.where = options.url ? describeUrl(options.url) : 'postgres (pool)';
  }

  /** Creates the schema if it is missing; a schema newer than this code is a `store-schema` error. */
  async migrate(): Promise<void> {
    this.schemaReady ??= this.withClient('creating the schema', (c) => migrate(c, this.names, this.where)).catch((err: unknown) => {
      this.schemaReady = undefined;
      throw err;
    });
    return this.schemaReady;
  }

  async open(id: string): Promise<StoredLog> {
    checkSessionId(id);
    const location = `${this.where}#${id}`;
    const pool = await this.pool();
    if (this.readOnly) {
      const version = await this.run('checking the schema', () => storedVersion(pool, this.names, this.where));
      const records = version === undefined ? [] : await this.load(pool, id);
      return { records, report: {}, location, writer: readOnlyWriter(id, location) };
    }
    await this.migrate();
    const holder = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    const report: LoadReport = {};
    // A writer of ours whose flush never got its answer: say which of its rows landed, and let
    // this open take its place (its lease is ours to end; it writes nothing more).
    const previous = this.unresolved.get(id);
    if (previous) {
      report.unresolvedFlush = await this.run('reading which rows of the unanswered flush landed', () => previous.standDown());
      this.unresolved.delete(id);
    }
    const took = await this.run('taking the writer lease', () => this.acquire(pool, id, holder));
    if (took) report.leaseTakenOver = took;
    try {
      const records = await this.load(pool, id);
      const writer = new PostgresWriter(pool, this.names, id, holder, location, records.length, this.leaseMs, this.statementTimeoutMs + GRACE_MS, {
        unresolved: (w) => (w.hasUnresolved() ? this.unresolved.set(id, w) : this.unresolved.get(id) === w && this.unresolved.delete(id)),
      });
      return { records, report, location, writer };
    } catch (err) {
      await this.deadline(pool.query(`DELETE FROM ${this.names.leases} WHERE session_id = $1 AND holder = $2`, [id, holder]), 'releasing the lease').catch(
        () => undefined,
      );
      throw err;
    }
  }

  /** Ends the store's own pool (a pool passed in is left to its owner). */
  async close(): Promise<void> {
    const p = this.poolP;
    this.poolP = undefined;
    // A pool whose server froze never finishes ending (its clients are stuck): stop waiting.
    if (p && this.ownsPool) await this.deadline((async () => (await p).end())(), 'closing the pool').catch(() => undefined);
  }

  private pool(): Promise<Pool> {
    const ms = this.statementTimeoutMs;
    this.poolP ??= createPool(this.url!, { statement_timeout: ms, lock_timeout: ms });
    return this.poolP;
  }

  private deadline<T>(work: Promise<T>, doing: string): Promise<T> {
    return withDeadline(work, this.statementTimeoutMs + GRACE_MS, this.where, doing);
  }

  private async run<T>(doing: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await this.deadline(fn(), doing);
    } catch (err) {
      throw storeErrorOf(err, this.where, doing);
    }
  }

  private async withClient<T>(doing: string, fn: (c: Queryable) => Promise<T>): Promise<T> {
    const pool = await this.pool();
    return this.run(doing, async () => {
      const client = await pool.connect();
      try {
        return await fn(client);
      } finally {
        client.release();
      }
    });
  }

  /** Takes the lease: a new row, or an expired one in the same statement. Returns the takeover, if it was one. */
  private async acquire(pool: Pool, id: string, holder: string): Promise<LoadReport['leaseTakenOver']> {
    const L = this.names.leases;
    const r = await pool.query(
      `WITH prev AS (SELECT holder, expires_at FROM ${L} WHERE session_id = $1)
       INSERT INTO ${L} AS l (session_id, holder, expires_at)
       VALUES ($1, $2, clock_timestamp() + $3 * interval '1 millisecond')
       ON CONFLICT (session_id) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
         WHERE l.expires_at < clock_timestamp()
       RETURNING (SELECT holder FROM prev) AS prev_holder, (SELECT expires_at FROM prev) AS prev_expires`,
      [id, holder, this.leaseMs],
    );
    if (r.rowCount === 1) {
      const row = r.rows[0] as { prev_holder: string | null; prev_expires: Date | null };
      return row.prev_holder ? { from: row.prev_holder, expiredAt: new Date(row.prev_expires!).toISOString() } : undefined;
    }
    const cur = await pool.query(`SELECT holder, expires_at FROM ${L} WHERE session_id = $1`, [id]);
    const c = cur.rows[0] as { holder: string; expires_at: Date } | undefined;
    throw new StoreError(
      'store-locked',
      `session "${id}" at ${this.where} has a live writer (${c ? `${c.holder}, lease until ${new Date(c.expires_at).toISOString()}` : 'lease just changed hands'}): ` +
        'only one writer may append to a session. Open it read-only, or wait for that writer to close or its lease to expire.',
      { file: `${this.where}#${id}` },
    );
  }

  private async load(pool: Pool, id: string): Promise<{ line: number; value: unknown }[]> {
    const r = await this.run('loading the session', () => pool.query(`SELECT seq, event FROM ${this.names.events} WHERE session_id = $1 ORDER BY seq`, [id]));
    const rows = r.rows as { seq: number; event: unknown }[];
    // The seq column is what appends are fenced on, the event's own seq what replay checks: a
    // row written around the store (a gap, a mismatch) would pass one check and break the other.
    rows.forEach((row, i) => {
      const claimed = (row.event as { seq?: unknown } | null)?.seq;
      const why =
        row.seq !== i
          ? `seqs ${i}..${row.seq - 1} are missing (the rows jump from seq ${i - 1} to ${row.seq})`
          : claimed !== row.seq
            ? `its event says seq ${JSON.stringify(claimed ?? null)}`
            : undefined;
      if (why) {
        const location = `${this.where}#${id}`;
        throw new StoreError(
          'store-corrupt',
          `${location}: the row with seq ${row.seq} (row ${i + 1}) is corrupt: ${why}. The session was not changed; fix or remove that row.`,
          {
            file: location,
            line: i + 1,
          },
        );
      }
    });
    return rows.map((row) => ({ line: row.seq + 1, value: row.event }));
  }
}

function readOnlyWriter(id: string, location: string): LogWriter {
  return {
    failure: new StoreError(
      'store-read-only',
      `session "${id}" was opened read-only (no writer lease) from ${location}: open it with a writer store to append.`,
      { file: location },
    ),
    append() {
      throw this.failure!;
    },
    flush: async () => undefined,
    close: async () => undefined,
  };
}
