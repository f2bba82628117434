/**
 * The path runner of each chart: how its generated paths run (see the suite-*.ts files). The
 * chart files, the crash paths and the mutation run all take them from here.
 */
import type { PathRunner } from './describe';
import { runBackgroundEnginePath } from './suite-background-engine';
import { runGateEnginePath } from './suite-gate-engine';
import { runEnginePath } from './suite-engine';
import { runFitPath } from './suite-fit';
import { runManualPath } from './suite-manual';
import { runOverflowPath } from './suite-overflow';
import { runPressurePath } from './suite-pressure';
import { runTransactionPath } from './suite-transaction';

export const RUNNERS: Record<string, PathRunner> = {
  transaction: runTransactionPath,
  pressure: runPressurePath,
  overflow: runOverflowPath,
  manual: runManualPath,
  fit: runFitPath,
  engine: runEnginePath,
  background: runBackgroundEnginePath,
  gate: runGateEnginePath,
};
