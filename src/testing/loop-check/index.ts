/** checkLoop and its scenarios: model-based tests of a user's own agent loop (see docs/loop-testing.md). */
export {
  loopModel,
  LOOP_MODEL_EVENTS,
  OVERFLOW_PROVIDERS,
  type LoopModelEvent,
  type OverflowProvider,
  type SummaryOutcome,
  type ToolCrashPoint,
} from './model';
export {
  loopScenarios,
  fillerText,
  type LoopScenario,
  type LoopExpectations,
  type ExpectedOutcome,
  type ScenarioScript,
  type LoopScenarioOptions,
} from './scenarios';
export { checkLoop, assertLoop, type LoopContext, type UserLoop, type LoopReport, type Violation, type Invariant, type CheckLoopOptions } from './check';
export { loopCoverage, chartTransitions, type ChartCoverage, type TransitionLog } from './coverage';
export { isSummaryRequest } from './script';
export { CrashableStore } from './crash-store';
export { scoreLoops, formatScore, type LoopScore, type ScoreRow, type ScoreLoopsOptions } from './score';
