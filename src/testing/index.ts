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
} from './openai-server.js';
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
} from './openai-server.js';
