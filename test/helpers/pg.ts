/**
 * PostgresStore in tests: the run's server (see pg-global-setup.ts) and a fresh PostgreSQL
 * schema per call, so test files running at the same time never see each other's sessions.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { PostgresStore, type PostgresStoreOptions } from '../../src/session/index.js';

export function pgUrl(): string {
  return inject('pgUrl');
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
