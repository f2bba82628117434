/**
 * `xcompact/ai-sdk`: xcompact in a Vercel AI SDK loop (generateText, streamText,
 * ToolLoopAgent) with one option, `model: compaction.model`. Needs `ai` 6 or 7.
 */
export { createAiSdkCompaction, providerName, type AiSdkCompaction, type AiSdkCompactionOptions } from './adapter';
export type { AiSdkLanguageModel, AiSdkMiddleware } from './model';
export { AiSdkSummarizer, type AiSdkSummarizerOptions } from './summarizer';
export { AiSdkAdapterError, promptOf, type AiSdkAdapterErrorCode } from './convert';
export { normaliseRequestError } from './request-error';
export { recallTool } from './recall';
export { sessionModelMessages } from './resume';
// The session and its stores, so an AI SDK app imports from one place.
export { Session, JsonlStore, MemoryStore } from '../../session/index';
