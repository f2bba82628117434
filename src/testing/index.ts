/**
 * `xcompact/testing`: a local OpenAI-compatible server with scripted scenarios and real
 * provider error bodies, for tests, demos and benchmarks that must run without an API key.
 */
export {
  startOpenAIServer,
  estimatePromptTokens,
  estimateCompletionTokens,
  OVERFLOW_BODIES,
  OTHER_ERROR_BODIES,
  bytesPerFour,
  digitTokens,
  chatPromptTokens,
} from './openai-server';
export type {
  LocalOpenAIServer,
  StartOpenAIServerOptions,
  Scenario,
  ReplyScenario,
  HangScenario,
  StatusScenario,
  StreamErrorScenario,
  ScenarioHandler,
  ParsedChatRequest,
  ChatRequestBody,
  RecordedRequest,
  ScriptedToolCall,
  UsageOverride,
  ProviderName,
  ProviderErrorBody,
  TokenizeOptions,
} from './openai-server';

// Model-based tests of a user's own agent loop: scenarios generated from the loop model, a checker of the invariants.
export {
  loopScenarios,
  checkLoop,
  assertLoop,
  loopCoverage,
  chartTransitions,
  isSummaryRequest,
  CrashableStore,
  loopModel,
  fillerText,
  OVERFLOW_PROVIDERS,
  scoreLoops,
  formatScore,
} from './loop-check/index';
export type {
  LoopScenario,
  LoopScenarioOptions,
  LoopModelEvent,
  SummaryOutcome as LoopSummaryOutcome,
  ScenarioScript,
  LoopExpectations,
  ExpectedOutcome,
  LoopContext,
  UserLoop,
  LoopReport,
  Violation,
  Invariant,
  CheckLoopOptions,
  ChartCoverage,
  TransitionLog,
  ToolCrashPoint,
  LoopScore,
  ScoreRow,
  ScoreLoopsOptions,
} from './loop-check/index';
export { openAIMessageProblems } from './request-problems';
// The Responses and Anthropic Messages routes: a request of either shape read as the chat body it stands for.
export { chatBodyOf, shapeOverflow, type ShapeRoute, type ShapeRequestBody } from './shapes-server';
