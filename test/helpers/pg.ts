/**
 * PostgresStore in tests: the run's shared server and a fresh PostgreSQL schema per call, so
 * test files running at the same time never see each other's sessions.
 *
 * Importing this module is how a test file says it needs PostgreSQL: the import waits until
 * the run's server is up (pg-global-setup.ts starts it on the first such import, once per
 * run, and stops it at the end), so `pgUrl()` is synchronous everywhere after. Files that do
 * not import it never start a server. With XCOMPACT_PG_URL set, that server is used instead.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { PostgresStore, type PostgresStoreOptions } from '../../src/session/index';

async function askBroker(): Promise<string> {
  const res = await fetch(`${inject('pgBroker')}/url`);
  const body = (await res.json()) as { url?: string; error?: string };
  if (!body.url) throw new Error(`the test run's PostgreSQL server did not start: ${body.error ?? `HTTP ${res.status}`}`);
  return body.url;
}

const url = await askBroker();

export function pgUrl(): string {
  return url;
}

const schemas: string[] = [];

export function freshSchema(prefix = 't'): string {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  schemas.push(name);
  return name;
}

const stores: PostgresStore[] = [];

export function pgStore(options: Partial<PostgresStoreOptions> = {}): PostgresStore {
  const s = new PostgresStore({ url: pgUrl(), schema: freshSchema(), ...options });
  stores.push(s);
  return s;
}

/** Closes the stores and drops this file's schemas (a server of your own is left as it was). */
export async function closePgStores(): Promise<void> {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  const drop = schemas.splice(0);
  if (drop.length === 0) return;
  const c = new pg.Client({ connectionString: pgUrl() });
  await c.connect();
  try {
    for (const name of drop) await c.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`);
  } finally {
    await c.end();
  }
}
