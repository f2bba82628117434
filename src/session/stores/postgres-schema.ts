/**
 * The PostgreSQL schema of the session store, and the one place that creates or checks it.
 *
 * Three tables in their own PostgreSQL schema (default `xcompact`):
 *
 *   meta   (key text PRIMARY KEY, value text)                 -- row ('schema_version', '2')
 *   events (session_id text, seq integer >= 0, event jsonb,   -- one row per event
 *           event_id text,                                    -- the writer's id of the event (version 2)
 *           PRIMARY KEY (session_id, seq), UNIQUE (session_id, event_id))
 *   leases (session_id text PRIMARY KEY, holder text,         -- one writer per session
 *           expires_at timestamptz)
 *
 * The primary key is what makes appends safe: two writers can never store two events at one
 * seq. The lease only keeps two live writers from wasting work on the same session. The event
 * id (a hash of the event's JSON, computed by the writer) is how a writer tells, after a flush
 * whose answer it never got, whether its rows landed: the same event always has the same id.
 *
 * Version 1 (no event_id) is migrated in place by a writer's first open: the column is added
 * (old rows keep NULL, which the unique index ignores) and the version row set to 2. A
 * read-only open reads version 1 as it is, without writing.
 */
import { XcompactError } from '../../errors';
import { StoreError } from '../errors';

export const SCHEMA_VERSION = 2;

/** The client calls the store needs: satisfied by a `pg` Pool or PoolClient. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }>;
}

export interface SchemaNames {
  schema: string;
  meta: string;
  events: string;
  leases: string;
}

/** Identifiers are interpolated into SQL, so only plain lower-case names are accepted. */
export function schemaNames(schema: string): SchemaNames {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new XcompactError(
      'config',
      `PostgresStore option schema: the PostgreSQL schema name ${JSON.stringify(schema)} is not allowed: use 1-63 lower-case letters, digits or '_', not starting with a digit.`,
    );
  }
  return { schema, meta: `${schema}.meta`, events: `${schema}.events`, leases: `${schema}.leases` };
}

function ddl(n: SchemaNames): string {
  return `
    CREATE SCHEMA IF NOT EXISTS ${n.schema};
    CREATE TABLE IF NOT EXISTS ${n.meta} (key text PRIMARY KEY, value text NOT NULL);
    CREATE TABLE IF NOT EXISTS ${n.events} (
      session_id text NOT NULL,
      seq integer NOT NULL CHECK (seq >= 0),
      event jsonb NOT NULL,
      event_id text,
      PRIMARY KEY (session_id, seq)
    );
    CREATE UNIQUE INDEX IF NOT EXISTS events_event_id ON ${n.events} (session_id, event_id);
    CREATE TABLE IF NOT EXISTS ${n.leases} (
      session_id text PRIMARY KEY,
      holder text NOT NULL,
      expires_at timestamptz NOT NULL
    );
    INSERT INTO ${n.meta} (key, value) VALUES ('schema_version', '${SCHEMA_VERSION}') ON CONFLICT (key) DO NOTHING;`;
}

/** Version 1 → 2: the event id column and its index; old rows keep NULL (no id: never re-sent by this writer). */
function upgrade(n: SchemaNames): string {
  return `
    ALTER TABLE ${n.events} ADD COLUMN IF NOT EXISTS event_id text;
    CREATE UNIQUE INDEX IF NOT EXISTS events_event_id ON ${n.events} (session_id, event_id);
    UPDATE ${n.meta} SET value = '${SCHEMA_VERSION}' WHERE key = 'schema_version';`;
}

/**
 * The stored schema version, or undefined when the schema was never created. A version
 * newer than this code understands is a `store-schema` error: reading or writing a layout
 * we do not know could corrupt it.
 */
export async function storedVersion(db: Queryable, n: SchemaNames, where: string): Promise<number | undefined> {
  const exists = await db.query('SELECT to_regclass($1) AS t', [n.meta]);
  if (exists.rows[0]?.t == null) return undefined;
  const r = await db.query(`SELECT value FROM ${n.meta} WHERE key = 'schema_version'`);
  const raw = r.rows[0]?.value as string | undefined;
  const version = raw === undefined ? NaN : Number(raw);
  if (!Number.isInteger(version) || version < 1) {
    throw new StoreError('store-schema', `${where}: ${n.meta} has no valid schema_version row (found ${JSON.stringify(raw ?? null)}); nothing was written.`, {
      file: where,
    });
  }
  if (version > SCHEMA_VERSION) {
    throw new StoreError(
      'store-schema',
      `${where}: the xcompact schema "${n.schema}" is version ${version}, newer than this xcompact understands (${SCHEMA_VERSION}). Upgrade xcompact; nothing was written.`,
      { file: where },
    );
  }
  return version;
}

/**
 * Creates the schema when missing (idempotent). A transaction-scoped advisory lock keeps
 * concurrent first uses from racing on CREATE.
 */
export async function migrate(db: Queryable & { query: Queryable['query'] }, n: SchemaNames, where: string): Promise<void> {
  await db.query('BEGIN');
  try {
    await db.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`xcompact-migrate:${n.schema}`]);
    const version = await storedVersion(db, n, where);
    if (version === undefined) await db.query(ddl(n));
    else if (version < SCHEMA_VERSION) await db.query(upgrade(n));
    await db.query('COMMIT');
  } catch (err) {
    await db.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
