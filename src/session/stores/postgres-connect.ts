/**
 * Connecting to PostgreSQL and turning driver errors into StoreErrors that say what failed
 * and where (host, port, database; never the password).
 */
import type { PoolConfig } from 'pg';
import { StoreError } from '../errors';

/**
 * The calls the store makes on a connection pool: a `pg` Pool satisfies it. Declared here so
 * that the public types do not depend on `@types/pg`.
 */
export interface PgPool {
  query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }>;
  connect(): Promise<{ query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }>; release(): void }>;
  end(): Promise<void>;
}


/** `postgres://user@host:port/db`, without the password, for messages. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    const user = u.username ? `${decodeURIComponent(u.username)}@` : '';
    return `${u.protocol}//${user}${u.hostname}${u.port ? `:${u.port}` : ''}${u.pathname}`;
  } catch {
    return 'postgres://(unparsable url)';
  }
}

export function isPostgresUrl(s: string): boolean {
  return /^postgres(ql)?:\/\//i.test(s);
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET']);

/** Maps a driver or network error to one typed StoreError naming `where`. */
export function storeErrorOf(err: unknown, where: string, doing: string): StoreError {
  if (err instanceof StoreError) return err;
  const e = err as { code?: string; message?: string } | undefined;
  const code = e?.code;
  const msg = e?.message ?? String(err);
  if ((code && UNREACHABLE.has(code)) || /timeout exceeded when trying to connect|Connection terminated|connect ECONNREFUSED/i.test(msg)) {
    return new StoreError('store-unreachable', `cannot reach the PostgreSQL server at ${where} while ${doing}: ${msg}. Is the server running and the url right?`, { file: where, cause: err });
  }
  if (code === '28P01' || code === '28000') {
    return new StoreError('store-auth', `PostgreSQL at ${where} refused the credentials while ${doing}: ${msg}. Check the user and password in the url.`, { file: where, cause: err });
  }
  if (code === '3D000') {
    return new StoreError('store-unreachable', `PostgreSQL at ${where}: ${msg}. Create the database or fix the url.`, { file: where, cause: err });
  }
  return new StoreError('store-io', `PostgreSQL at ${where} failed while ${doing}: ${msg}${code ? ` (SQLSTATE ${code})` : ''}.`, { file: where, cause: err });
}

/** A pool of our own. `pg` is loaded on first use so that importing xcompact does not load it. */
export async function createPool(url: string, extra: PoolConfig = {}): Promise<PgPool> {
  const pg = (await import('pg')).default;
  const pool = new pg.Pool({ connectionString: url, max: 4, connectionTimeoutMillis: 10_000, allowExitOnIdle: true, ...extra });
  // An idle client losing its connection must not crash the process; the next query reports it.
  pool.on('error', () => undefined);
  return pool;
}
