/**
 * Every transition of the fit chart (machines/fit.ts), by paths generated from the chart, run on
 * the real engine (see suite-fit.ts).
 */
import { describeGeneratedPaths, useServer } from './describe';
import { runFitPath } from './suite-fit';

const server = useServer();
describeGeneratedPaths('fit', server, runFitPath);
