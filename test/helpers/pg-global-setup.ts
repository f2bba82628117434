/**
 * vitest globalSetup: a PostgreSQL server shared by the run, started only when a test file
 * asks for it. Most runs (one browser test, the unit files) need none, and starting one costs
 * seconds and can fail for reasons that have nothing to do with the file under test.
 *
 * The runner's process keeps a tiny HTTP endpoint on 127.0.0.1 (its address is provided to
 * the test workers as `pgBroker`); the first request starts the server (in a child process,
 * see pg-server-process.ts) and every request answers with its url, or with why it could not
 * start. The server is stopped when the run ends. Test files never call this: they import
 * test/helpers/pg.ts, which asks on import (see there).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestProject } from 'vitest/node';
import { startPgServerProcess, type PgServer } from './pg-server';

declare module 'vitest' {
  export interface ProvidedContext {
    pgBroker: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let server: Promise<PgServer> | undefined;
  const http = createServer((req, res) => {
    if (req.url !== '/url') {
      res.writeHead(404).end();
      return;
    }
    server ??= startPgServerProcess();
    server.then(
      (s) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ url: s.url })),
      (err: unknown) =>
        res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: err instanceof Error ? err.message : String(err) })),
    );
  });
  // A server start can take longer than node's default request timeout on a loaded machine.
  http.requestTimeout = 0;
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  project.provide('pgBroker', `http://127.0.0.1:${(http.address() as AddressInfo).port}`);
  return async () => {
    await new Promise<void>((resolve) => http.close(() => resolve()));
    if (server)
      await server.then(
        (s) => s.stop(),
        () => undefined,
      );
  };
}
