#!/usr/bin/env node
/** The `xcompact` bin: the command (program.ts) run on this process's argv, streams and environment. */
import { runCli } from './program';

process.exitCode = await runCli(process.argv);
