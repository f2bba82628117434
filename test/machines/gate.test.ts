/**
 * Every transition of the gate chart (SPEC §13), by paths generated from the chart, run on the
 * real engine in background mode (see suite-gate-engine.ts).
 */
import { describeGeneratedPaths, useServer } from './describe';
import { RUNNERS } from './runners';

const server = useServer();
describeGeneratedPaths('gate', server, RUNNERS.gate!);
