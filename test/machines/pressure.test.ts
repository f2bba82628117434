/**
 * Every transition of the pressure chart, by paths generated from the chart, run on the
 * real engine (see suite-pressure.ts).
 */
import { describeGeneratedPaths, useServer } from './describe';
import { runPressurePath } from './suite-pressure';

const server = useServer();
describeGeneratedPaths('pressure', server, runPressurePath);
