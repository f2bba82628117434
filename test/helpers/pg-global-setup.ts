/** vitest globalSetup: one PostgreSQL server for the whole run, its url provided as `pgUrl`. */
import type { TestProject } from 'vitest/node';
import { startPgServerProcess } from './pg-server';

declare module 'vitest' {
  export interface ProvidedContext {
    pgUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startPgServerProcess();
  project.provide('pgUrl', server.url);
  return () => server.stop();
}
