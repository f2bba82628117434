/**
 * PostgresStore in tests: the run's server (see pg-global-setup.ts) and a fresh PostgreSQL
 * schema per call, so test files running at the same time never see each other's sessions.
 */
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { PostgresStore, type PostgresStoreOptions } from '../../src/session/index.js';

export function pgUrl(): string {
  return inject('pgUrl');
}

export function freshSchema(prefix = 't'): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

const stores: PostgresStore[] = [];

export function pgStore(options: Partial<PostgresStoreOptions> = {}): PostgresStore {
  const s = new PostgresStore({ url: pgUrl(), schema: freshSchema(), ...options });
  stores.push(s);
  return s;
}

export async function closePgStores(): Promise<void> {
  await Promise.all(stores.splice(0).map((s) => s.close()));
}
