/**
 * Every transition of the manual chart, by paths generated from the chart, run on the real
 * engine (see suite-manual.ts).
 */
import { describeGeneratedPaths, useServer } from './describe';
import { runManualPath } from './suite-manual';

const server = useServer();
describeGeneratedPaths('manual', server, runManualPath);
