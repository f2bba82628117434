/**
 * The PostgreSQL store's writer (postgres.ts opens it): appends queued and written one batch per
 * statement, fenced on the lease and the log's end; the outcome of a statement that got no
 * answer read back by the rows' event ids (docs/reliability.md#the-stores-at-their-edges).
 */
import { createHash } from 'node:crypto';
import { StoreError } from '../errors';
import type { SessionEvent } from '../events';
import { QueuedWriter } from './queued-writer';
import { storeErrorOf, withDeadline, type PgPool } from './postgres-connect';
import type { SchemaNames } from './postgres-schema';

type Pool = PgPool;

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

export class PostgresWriter extends QueuedWriter<Encoded> {
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
  private async send(text: string, values: unknown[], doing: string): ReturnType<Pool['query']> {
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
