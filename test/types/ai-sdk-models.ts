/**
 * Compiled by `npm run typecheck` (and `npm run test:types`), never run: a model from each
 * supported AI SDK major is accepted where xcompact/ai-sdk takes one, and what the adapter gives
 * back is accepted by that major's own functions. `ai` 6 / `@ai-sdk/openai-compatible` 2 speak
 * provider spec v3; `ai7` (ai@7) / `ai-sdk-openai-compatible3` (@ai-sdk/openai-compatible@3)
 * speak v4 and are installed under aliases (package.json devDependencies).
 */
import { createOpenAICompatible as provider2 } from '@ai-sdk/openai-compatible';
import type { LanguageModelV3 } from '@ai-sdk/provider';
import { generateText as generateText6, streamText as streamText6, wrapLanguageModel as wrap6 } from 'ai';
import { generateText as generateText7, streamText as streamText7, ToolLoopAgent as ToolLoopAgent7, wrapLanguageModel as wrap7 } from 'ai7';
import { createOpenAICompatible as provider3 } from 'ai-sdk-openai-compatible3';
import type { LanguageModelV4 } from 'ai-sdk-provider4';
import { AiSdkSummarizer, createAiSdkCompaction } from '../../src/adapters/ai-sdk/index';
import { boundSummarizer, type Session } from '../../src/index';

declare const session: Session;

const v3 = provider2({ name: 'local', baseURL: 'http://127.0.0.1:1/v1' }).chatModel('m');
const v4 = provider3({ name: 'local', baseURL: 'http://127.0.0.1:1/v1' }).chatModel('m');

// ai 6 with a v3 model: the wrapped model is still a v3 model, its middleware an ai 6 middleware.
const six = createAiSdkCompaction({ model: v3, session });
export const model6: LanguageModelV3 = six.model;
void generateText6({ model: six.model, prompt: 'hi' });
void streamText6({ model: six.model, prompt: 'hi' });
void generateText6({ model: wrap6({ model: v3, middleware: six.middleware }), prompt: 'hi' });

// ai 7 with a v4 model: the wrapped model is a v4 model; its middleware fits ai 7's wrapLanguageModel.
const seven = createAiSdkCompaction({ model: v4, session, contextWindow: 32_000 });
export const model7: LanguageModelV4 = seven.model;
void generateText7({ model: seven.model, prompt: 'hi' });
void streamText7({ model: seven.model, prompt: 'hi' });
new ToolLoopAgent7({ model: seven.model });
void generateText7({ model: wrap7({ model: v4, middleware: seven.middleware }), prompt: 'hi' });

// ai 7 takes v3 models too: a v3 model's adapter, and its middleware over a v3 base.
void generateText7({ model: six.model, prompt: 'hi' });
void generateText7({ model: wrap7({ model: v3, middleware: six.middleware }), prompt: 'hi' });

// The summarizer takes either spec's model.
boundSummarizer(new AiSdkSummarizer({ model: v3 }));
boundSummarizer(new AiSdkSummarizer({ model: v4 }));

// The check can fail: something that is not a language model is refused.
// @ts-expect-error not a language model
createAiSdkCompaction({ model: { provider: 'x', modelId: 'm' }, session });
// @ts-expect-error a v2 model (spec the adapter does not speak)
createAiSdkCompaction({ model: { ...v3, specificationVersion: 'v2' as const }, session });
// @ts-expect-error an ai 6 function refuses a v4 model (so ai 6 apps cannot be handed one by mistake)
void generateText6({ model: seven.model, prompt: 'hi' });
