/** Runs a CrashablePgServer (pg-server.ts) in a process of its own; see startCrashablePgServerProcess. */
import { runCrashablePgServer } from './pg-server';

await runCrashablePgServer();
