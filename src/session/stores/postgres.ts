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
import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { XcompactError } from '../../errors';
import { StoreError } from '../errors';
import type { SessionEvent } from '../events';
import { checkSessionId, type LoadReport, type LogWriter, type SessionStore, type StoredLog } from '../store';
import { QueuedWriter } from './queued-writer';
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

/** A queued event: its seq (what the batch is fenced on), its JSON, encoded at append, and its id (a hash of that JSON). */
interface Encoded {
  seq: number;
  json: string;
  id: string;
}

/** The id a row carries: the same event (the same JSON, seq included) always gets the same one. */
function eventId(json: string): string {
  return createHash('sha256').update(json).digest('base64url').slice(0, 24);
}

/**
 * A failure after which the rows may have landed: the statement was sent (or may have been) and
 * no answer came. An error the server answered with (a SQLSTATE) means the statement failed and
 * rolled back; a connection that could not be made means it was never sent.
 */
function outcomeUnknown(err: unknown): boolean {
  if (err instanceof NotSent) return false;
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return false;
  return !(err instanceof StoreError) || err.code === 'store-unreachable';
}

/** The connection for a statement could not be had: nothing was sent. */
class NotSent extends Error {
  constructor(readonly reason: unknown) {
    super(reason instanceof Error ? reason.message : String(reason), { cause: reason });
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

class PostgresWriter extends QueuedWriter<Encoded> {
  private readonly renewTimer: NodeJS.Timeout;
  /** Appended, not yet acknowledged: the rows a retry must account for, in order. */
  private pending: Encoded[] = [];
  /** The last write may have landed without an answer: the next write first reads what is stored. */
  private uncertain = false;
  /** The writer stopped on an unanswered write (not a refusal): a flush once the server is back can still make everything durable. */
  private recoverable = false;
  /** A reopen by the same store took this writer's place: it writes nothing more. */
  private retired = false;

  constructor(
    private readonly pool: Pool,
    private readonly n: SchemaNames,
    private readonly id: string,
    private readonly holder: string,
    location: string,
    /** Events stored so far: the seq the next batch must start at. */
    private stored: number,
    private readonly leaseMs: number,
    /** No answer within this many ms is `store-unreachable`. */
    private readonly answerMs: number,
    private readonly registry: { unresolved(w: PostgresWriter): void },
  ) {
    super(location);
    this.renewTimer = setInterval(() => void this.renew(), Math.max(50, Math.floor(leaseMs / 3)));
    this.renewTimer.unref();
  }

  hasUnresolved(): boolean {
    return this.uncertain && this.pending.length > 0 && !this.retired;
  }

  protected encode(event: SessionEvent): Encoded {
    const json = this.json(event);
    const encoded = { seq: event.seq, json, id: eventId(json) };
    this.pending.push(encoded);
    return encoded;
  }

  protected asFailure(err: unknown): StoreError {
    const failure =
      err instanceof StoreError && err.code === 'store-conflict'
        ? err
        : storeErrorOf(err instanceof NotSent ? err.reason : err, this.location, 'appending events');
    if (outcomeUnknown(err) && this.pending.length > 0) {
      this.uncertain = true;
      this.recoverable = true;
      this.registry.unresolved(this);
      const first = this.pending[0]!.seq;
      const last = this.pending[this.pending.length - 1]!.seq;
      return new StoreError(
        'store-unreachable',
        `${failure.message.replace(/\.$/, '')}. Events ${first}..${last} may or may not be stored (no answer came): ` +
          'flush() or close() again once the server is back writes those that did not land (and only those), or a reopen of the session by this store says which landed.',
        { file: this.location, cause: failure },
      );
    }
    return failure;
  }

  /**
   * flush(): the writes, acknowledged only once durable. After a failure whose outcome is
   * unknown, it reads which rows landed and writes the rest (the writer stays stopped: reopen
   * to append more); it rejects again while the server is still away.
   */
  override async flush(): Promise<void> {
    try {
      await super.flush();
    } catch (err) {
      if (this.retired) return;
      if (!this.recoverable || this.failure !== err) throw err;
      try {
        await this.settle();
      } catch (again) {
        throw this.asFailure(again);
      }
    }
  }

  /** The pending rows made durable: those that landed are skipped (same seq, same id), the others written. */
  private async settle(): Promise<void> {
    if (this.pending.length === 0) return;
    const failure = this.failure;
    try {
      await this.writeBatch([...this.pending]);
    } catch (err) {
      // A refusal now (another writer took the session) is final; no answer again stays recoverable.
      if (!outcomeUnknown(err)) this.recoverable = false;
      throw err;
    } finally {
      this.failure = failure;
    }
    this.uncertain = false;
    this.registry.unresolved(this);
  }

  /** A reopen takes this writer's place: which of its pending rows landed; it writes nothing more and its lease ends. */
  async standDown(): Promise<{ first: number; last: number; landed: number[]; missing: number[] }> {
    const rows = this.pending;
    const stored = await this.storedIds(rows[0]!.seq, rows[rows.length - 1]!.seq);
    const landed: number[] = [];
    const missing: number[] = [];
    for (const e of rows) (stored.get(e.seq) === e.id ? landed : missing).push(e.seq);
    this.retired = true;
    clearInterval(this.renewTimer);
    await this.query(`DELETE FROM ${this.n.leases} WHERE session_id = $1 AND holder = $2`, [this.id, this.holder], "ending the previous writer's lease");
    return { first: rows[0]!.seq, last: rows[rows.length - 1]!.seq, landed, missing };
  }

  protected async release(): Promise<void> {
    clearInterval(this.renewTimer);
    if (this.retired) return;
    await this.query(`DELETE FROM ${this.n.leases} WHERE session_id = $1 AND holder = $2`, [this.id, this.holder], 'releasing the lease').catch(
      () => undefined,
    );
  }

  private query(text: string, values: unknown[], doing: string): ReturnType<Pool['query']> {
    return withDeadline(this.pool.query(text, values), this.answerMs, this.location, doing);
  }

  /**
   * One statement on a connection of its own: a connection that cannot be had is NotSent (the
   * statement never left), a broken one is thrown away with the error.
   */
  private async send(text: string, values: unknown[], doing: string): Promise<{ rows: any[]; rowCount: number | null }> {
    let client: Awaited<ReturnType<Pool['connect']>>;
    const connecting = this.pool.connect();
    try {
      client = await withDeadline(connecting, this.answerMs, this.location, 'connecting');
    } catch (err) {
      // A connection that comes after the deadline is not left checked out.
      connecting.then(
        (c) => c.release(true),
        () => undefined,
      );
      throw new NotSent(err);
    }
    // A checked-out client whose connection ends emits 'error' besides failing its query: with
    // no listener that would crash the process (the query's own rejection reports it).
    const ignore = () => undefined;
    client.on?.('error', ignore);
    try {
      const r = await withDeadline(client.query(text, values), this.answerMs, this.location, doing);
      client.off?.('error', ignore);
      client.release();
      return r;
    } catch (err) {
      client.release(err instanceof Error ? err : new Error(String(err)));
      throw err;
    }
  }

  protected override fail(err: Error): void {
    super.fail(err);
    clearInterval(this.renewTimer);
  }

  private conflict(why: string): StoreError {
    return new StoreError('store-conflict', `${this.location}: ${why}. Nothing of this batch was stored; reopen the session to continue from what is stored.`, {
      file: this.location,
    });
  }

  private async renew(): Promise<void> {
    if (this.closed || this.failure) return;
    try {
      const r = await this.query(
        `UPDATE ${this.n.leases} SET expires_at = clock_timestamp() + $3 * interval '1 millisecond' WHERE session_id = $1 AND holder = $2`,
        [this.id, this.holder, this.leaseMs],
        'renewing the lease',
      );
      if (r.rowCount === 0 && !this.closed)
        this.fail(this.conflict('the writer lease was taken over by another writer (this one stopped renewing it in time)'));
    } catch {
      // A missed renewal is not fatal: the lease may still be ours at the next one, and a
      // flush that finds it gone stores nothing.
    }
  }

  /** The ids stored at seqs first..last (NULL for rows of a version-1 table). */
  private async storedIds(first: number, last: number): Promise<Map<number, string | null>> {
    const r = await this.query(
      `SELECT seq, event_id FROM ${this.n.events} WHERE session_id = $1 AND seq BETWEEN $2 AND $3`,
      [this.id, first, last],
      'reading which rows landed',
    );
    return new Map((r.rows as { seq: number; event_id: string | null }[]).map((row) => [row.seq, row.event_id]));
  }

  /**
   * The rows of `batch` already stored with the same id are dropped (a re-append of the same
   * event, or a flush that landed without an answer); a row stored there with another id is a
   * conflict. Read only when the batch does not start where the log is known to end.
   */
  private async skipStored(batch: Encoded[]): Promise<Encoded[]> {
    const stored = await this.storedIds(batch[0]!.seq, batch[batch.length - 1]!.seq);
    let k = 0;
    for (; k < batch.length; k++) {
      const have = stored.get(batch[k]!.seq);
      if (have === undefined) break;
      if (have !== batch[k]!.id) throw this.conflict(`seq ${batch[k]!.seq} holds another event than the one this writer appended there`);
    }
    if (k > 0) {
      this.stored = Math.max(this.stored, batch[k - 1]!.seq + 1);
      this.acknowledge(batch.slice(0, k));
    }
    return batch.slice(k);
  }

  /** Rows now durable leave the pending list (they are its head, in order). */
  private acknowledge(rows: Encoded[]): void {
    const last = rows[rows.length - 1]!.seq;
    this.pending = this.pending.filter((e) => e.seq > last);
  }

  protected async writeBatch(input: Encoded[]): Promise<void> {
    if (this.retired) throw this.conflict("a reopen of this session by the same store took this writer's place");
    let batch = input;
    if (this.uncertain || batch[0]!.seq < this.stored) batch = await this.skipStored(batch);
    if (batch.length === 0) return;
    const first = batch[0]!.seq;
    if (first !== this.stored) throw this.conflict(`the batch starts at seq ${first} but ${this.stored} events are stored`);
    let r;
    try {
      r = await this.send(
        `WITH lease AS (
           UPDATE ${this.n.leases} SET expires_at = clock_timestamp() + $4 * interval '1 millisecond'
           WHERE session_id = $1 AND holder = $2 RETURNING 1)
         INSERT INTO ${this.n.events} (session_id, seq, event, event_id)
         SELECT $1, (e->>'seq')::integer, e, ($6::text[])[i] FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS b(e, i)
         WHERE EXISTS (SELECT 1 FROM lease)
           AND (SELECT coalesce(max(seq), -1) FROM ${this.n.events} WHERE session_id = $1) = $5`,
        [this.id, this.holder, `[${batch.map((e) => e.json).join(',')}]`, this.leaseMs, first - 1, batch.map((e) => e.id)],
        'appending events',
      );
    } catch (err) {
      if ((err as { code?: string }).code === '23505') {
        // Another writer, or this batch itself landing late (a flush that timed out committed after all).
        if (this.uncertain && (await this.skipStored(batch)).length === 0) return;
        throw this.conflict(`another writer already stored an event at seq ${first}..${first + batch.length - 1}`);
      }
      throw err;
    }
    if (r.rowCount === batch.length) {
      this.stored += batch.length;
      this.acknowledge(batch);
      return;
    }
    // Nothing was stored (one statement): say why.
    const lease = await this.query(`SELECT holder FROM ${this.n.leases} WHERE session_id = $1`, [this.id], 'reading the lease');
    const holder = (lease.rows[0] as { holder?: string } | undefined)?.holder;
    if (holder !== this.holder) throw this.conflict(`the writer lease is now held by ${holder ?? 'nobody'} (this writer's expired and was taken over)`);
    throw this.conflict(`the log no longer ends at seq ${first - 1}: another writer appended`);
  }
}
