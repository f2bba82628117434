/**
 * Every transition of the background chart (SPEC §13), by paths generated from the chart, run on real
 * actors (see suite-background.ts).
 */
import { describeGeneratedPaths, useServer } from './describe';
import { RUNNERS } from './runners';

const server = useServer();
describeGeneratedPaths('background', server, RUNNERS.background!);
