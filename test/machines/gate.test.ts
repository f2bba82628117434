/**
 * Every transition of the gate chart (docs/spec.md#13-background-compaction), by paths generated from the chart, run on the
 * real engine in background mode (see suite-gate-engine.ts).
 */
import { describeGeneratedPaths, useServer } from './describe';
import { RUNNERS } from './runners';

const server = useServer();
describeGeneratedPaths('gate', server, RUNNERS.gate!);
