/**
 * The PostgreSQL schema of the session store, and the one place that creates or checks it.
 *
 * Three tables in their own PostgreSQL schema (default `xcompact`):
 *
 *   meta   (key text PRIMARY KEY, value text)                 -- row ('schema_version', '1')
 *   events (session_id text, seq integer >= 0, event jsonb,   -- one row per event
 *           PRIMARY KEY (session_id, seq))
 *   leases (session_id text PRIMARY KEY, holder text,         -- one writer per session
 *           expires_at timestamptz)
 *
 * The primary key is what makes appends safe: two writers can never store two events at one
 * seq. The lease only keeps two live writers from wasting work on the same session.
 */
import { XcompactError } from '../../errors';
import { StoreError } from '../errors';

export const SCHEMA_VERSION = 1;

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
      PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE IF NOT EXISTS ${n.leases} (
      session_id text PRIMARY KEY,
      holder text NOT NULL,
      expires_at timestamptz NOT NULL
    );
    INSERT INTO ${n.meta} (key, value) VALUES ('schema_version', '${SCHEMA_VERSION}') ON CONFLICT (key) DO NOTHING;`;
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
    await db.query('COMMIT');
  } catch (err) {
    await db.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
