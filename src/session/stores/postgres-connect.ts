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
  connect(): Promise<{
    query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }>;
    release(err?: Error | boolean): void;
    on?(event: 'error', listener: (err: Error) => void): unknown;
    off?(event: 'error', listener: (err: Error) => void): unknown;
  }>;
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
/**
 * SQLSTATEs of a server that is there but not serving (yet, or any more), or of a statement
 * the store's own timeouts ended: retrying later can succeed, so they are `store-unreachable`.
 * 57P01 admin shutdown, 57P02 crash shutdown, 57P03 starting up, 57P05 idle session timeout,
 * 08xxx connection exceptions, 57014 statement timeout, 55P03 lock timeout.
 */
const NOT_SERVING = /^(57P0[1235]|08[0-9A-Z]{3}|57014|55P03)$/;

function unreachableWhy(code: string): string {
  if (code === '57P03') return 'the server is starting up';
  if (code.startsWith('57P')) return 'the server is shutting down or ended the connection';
  if (code === '57014' || code === '55P03')
    return "the statement ran into the store's statement or lock timeout (a lock held elsewhere, or an overloaded server)";
  return 'the connection failed';
}

/** Maps a driver or network error to one typed StoreError naming `where`. */
export function storeErrorOf(err: unknown, where: string, doing: string): StoreError {
  if (err instanceof StoreError) return err;
  const e = err as { code?: string; message?: string } | undefined;
  const code = e?.code;
  const msg = e?.message ?? String(err);
  if ((code && UNREACHABLE.has(code)) || /timeout exceeded when trying to connect|Connection terminated|connect ECONNREFUSED/i.test(msg)) {
    return new StoreError(
      'store-unreachable',
      `cannot reach the PostgreSQL server at ${where} while ${doing}: ${msg}. Is the server running and the url right?`,
      { file: where, cause: err },
    );
  }
  if (code && NOT_SERVING.test(code)) {
    return new StoreError(
      'store-unreachable',
      `PostgreSQL at ${where} is not serving while ${doing}: ${msg} (SQLSTATE ${code}: ${unreachableWhy(code)}). Retry later: reopen the session.`,
      {
        file: where,
        cause: err,
      },
    );
  }
  if (code === '28P01' || code === '28000') {
    return new StoreError('store-auth', `PostgreSQL at ${where} refused the credentials while ${doing}: ${msg}. Check the user and password in the url.`, {
      file: where,
      cause: err,
    });
  }
  if (code === '3D000') {
    return new StoreError('store-unreachable', `PostgreSQL at ${where}: ${msg}. Create the database or fix the url.`, { file: where, cause: err });
  }
  return new StoreError('store-io', `PostgreSQL at ${where} failed while ${doing}: ${msg}${code ? ` (SQLSTATE ${code})` : ''}.`, { file: where, cause: err });
}

/** A pool of our own. `pg` is loaded on first use so that importing xcompact does not load it. */
export async function createPool(url: string, extra: PoolConfig = {}): Promise<PgPool> {
  const pg = (await loadDriver()).default;
  const pool = new pg.Pool({ connectionString: url, max: 4, connectionTimeoutMillis: 10_000, allowExitOnIdle: true, ...extra });
  // An idle client losing its connection must not crash the process; the next query reports it.
  pool.on('error', () => undefined);
  return pool;
}

/** `pg` is an optional peer: most users never need it, so it is not installed with xcompact. */
async function loadDriver(): Promise<typeof import('pg')> {
  try {
    return await import('pg');
  } catch (err) {
    const e = err as { code?: unknown; message?: unknown };
    const missing = e?.code === 'ERR_MODULE_NOT_FOUND' || e?.code === 'MODULE_NOT_FOUND' || /Cannot find (?:package|module) 'pg'/.test(String(e?.message));
    if (!missing) throw err;
    throw new StoreError(
      'store-driver-missing',
      'PostgresStore needs the PostgreSQL driver `pg`, an optional peer dependency of xcompact that is not installed: run `npm i pg` (or pass your own pool: new PostgresStore({ pool }))',
      { cause: err },
    );
  }
}

/**
 * Rejects with `store-unreachable` when `work` has no answer within `ms`: a server that stops
 * answering (frozen, a network that drops packets) sends no error, so without this a flush
 * waits forever. The statement may still run on the server; the writer stops either way, and
 * a reopen reads what was stored.
 */
export async function withDeadline<T>(work: Promise<T>, ms: number, where: string, doing: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new StoreError(
            'store-unreachable',
            `no answer from PostgreSQL at ${where} within ${ms} ms while ${doing}: the server is frozen, overloaded or cut off. Retry later: reopen the session (raise statementTimeoutMs if the server is just slow).`,
            {
              file: where,
            },
          ),
        ),
      ms,
    );
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
