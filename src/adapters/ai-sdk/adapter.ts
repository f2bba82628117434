/**
 * The AI SDK adapter: a language-model middleware that puts an xcompact session and engine
 * between an AI SDK loop (`generateText`, `streamText`, `ToolLoopAgent`) and its model.
 *
 * Why a model wrapper and not `prepareStep`: `prepareStep` can replace the next step's
 * messages but never sees the step's own request fail, so it cannot recover a context
 * overflow (docs/spec.md#6-overflow-recovery) inside the loop. At the model boundary one object sees everything: the
 * whole prompt of each step (system prompt, the app's messages, the tool results the SDK
 * just produced), the reply with its usage, and the provider's error. So the app changes one
 * option — `model: compaction.model` — and every loop that takes a model works.
 *
 * Per model call (one AI SDK step) the conversation's steps (conversation/conversation.ts):
 * read the prompt against the recording, record what is new (nothing when anything of it
 * cannot be recorded), check the request, send the compacted surface, recover an overflow, record
 * the reply. This face maps the prompt (convert.ts) and collects a streamed reply (stream.ts).
 *
 * One adapter is one conversation; its calls must not overlap.
 *
 * Both AI SDK majors: `ai` 6 speaks provider spec v3, `ai` 7 spec v4 (and takes v3 models). The
 * adapter reads the spec of the model it wraps at each call (`specificationVersion`) and writes
 * the prompt in that spec; the two differ only in how files are held (see `SpecVersion`). The
 * wrapped model keeps the spec of the base model, so it works with whichever `ai` the app uses.
 */
import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3FinishReason,
  LanguageModelV3Middleware,
  LanguageModelV3Usage,
} from '@ai-sdk/provider';
import type { ModelMessage } from 'ai';
import type { CompactionEngine, CompactionEngineOptions } from '../../engine/facade';
import type { Session } from '../../session/session';
import { boundSummarizer, withCheckpointLedger, type Summarizer } from '../../services/summarizing';
import { policyFor, type ModelInfo } from '../../services/config';
import { openConversation, type Conversation, type ConversationMessage, type Face, type Reply } from '../conversation';
import { AiSdkAdapterError, assistantFacts, promptOf, refuseOptions, replyFacts, toolResults, usageOf, userBlocks, type SpecVersion } from './convert';
import { specOf, wrapModel, type AiSdkLanguageModel, type AiSdkMiddleware } from './model';
import { recallTool } from './recall';
import { normaliseRequestError } from './request-error';
import { sessionModelMessages } from './resume';
import { replyRecorder, type ReplyMeta } from './stream';
import { AiSdkSummarizer } from './summarizer';

export interface AiSdkCompactionOptions<M extends AiSdkLanguageModel = LanguageModelV3> extends Omit<
  CompactionEngineOptions,
  'session' | 'client' | 'summarizer' | 'models'
> {
  /** The model the loop talks to (any AI SDK language model of spec v3 or v4: `ai` 6 or 7). */
  model: M;
  /** Where the conversation is recorded (`Session.inMemory()`, or a store's `Session.open`). */
  session: Session;
  /** Registry key provider: defaults to the AI SDK provider id before its first dot (`openai.chat` → `openai`). */
  provider?: string;
  /** The model's window, when it is not a built-in model: registered as `provider/modelId`. */
  contextWindow?: number;
  /** The model's own output cap, when it is not a built-in model. */
  maxOutputTokens?: number;
  /** Model registry entries, merged over the built-ins. */
  models?: Record<string, Partial<ModelInfo>>;
  /**
   * Who writes summaries. Default: {@link AiSdkSummarizer} over `model` itself (the unwrapped
   * one), so summaries go through the same provider, credentials and prompt cache, bounded by
   * the model's window (`boundSummarizer`): a span that does not fit is summarized in chunks;
   * the checkpoint ledger (files, unresolved errors) is appended as with the OpenAI summarizer.
   */
  summarizer?: Summarizer;
}

export interface AiSdkCompaction<M extends AiSdkLanguageModel = LanguageModelV3> {
  /** Pass this as `model` to generateText / streamText / ToolLoopAgent: the base model (same spec) with the adapter in front. */
  readonly model: M;
  /** The middleware itself, to compose with other middleware in `wrapLanguageModel` (`ai` 6 or 7). */
  readonly middleware: AiSdkMiddleware;
  readonly engine: CompactionEngine;
  readonly session: Session;
  /** `tools: { ...yours, ...compaction.tools }`: the recall tool when `config.recall` is on for this model, else none. */
  readonly tools: Record<string, ReturnType<typeof recallTool>>;
  /**
   * The conversation recorded so far as `ModelMessage[]`: after a restart, pass them (plus what
   * is new) as `messages`, and the adapter continues the recorded conversation. A turn that
   * `stopWhen` ended on a tool step left calls whose results the model never saw: pass that
   * turn's `response.messages` as `results` to carry them; without, each such call is answered
   * with an error result saying no result was recorded, so the next turn is a prompt the SDK accepts.
   */
  messages(options?: { results?: readonly ModelMessage[] }): ModelMessage[];
  /** Stops the engine and closes an open step and turn, so the session is consistent; then flushes (and closes the session with `{ session: true }`). */
  close(options?: { session?: boolean }): Promise<void>;
}

/** How AI SDK apps are told what to fix. */
export const AI_SDK_FACE: Face = {
  entry: 'createAiSdkCompaction (or contextWindow)',
  list: 'prompt',
  resultHint: 'give every tool call its tool-result part, as the AI SDK requires',
  // The SDK builds each prompt from the app's whole message list.
  whole: true,
};

/** The AI SDK provider id (`openai.chat`, `deepseek.chat`) → the registry's provider name. */
export function providerName(model: Pick<AiSdkLanguageModel, 'provider'>): string {
  return model.provider.split('.')[0] || model.provider;
}

export function createAiSdkCompaction<M extends AiSdkLanguageModel = LanguageModelV3>(options: AiSdkCompactionOptions<M>): AiSdkCompaction<M> {
  const { session } = options;
  // Called with the call options of its own spec; v4 differs from v3 only where convert.ts handles it.
  const base = options.model as unknown as LanguageModelV3;
  const provider = options.provider ?? providerName(base);
  const models: Record<string, Partial<ModelInfo>> = { ...(options.models ?? {}) };
  if (options.contextWindow !== undefined) {
    models[`${provider}/${base.modelId}`] = {
      contextWindow: options.contextWindow,
      ...(options.maxOutputTokens !== undefined ? { maxOutputTokens: options.maxOutputTokens } : {}),
    };
  }
  const { model: _m, provider: _p, contextWindow: _c, maxOutputTokens: _o, summarizer: _s, models: _models, ...engineOptions } = options;
  const server = engineOptions.server ?? serverOfModel(base);
  const conversation: Conversation = openConversation({
    ...engineOptions,
    session,
    provider,
    face: AI_SDK_FACE,
    models,
    ...(server ? { server } : {}),
    // Bounded by the summarizing model's window (this model's: the registry entry, or `contextWindow`):
    // a span larger than the window goes out in chunks that fit, never as one request that overflows.
    // The same checkpoint as the OpenAI summarizer's: the model's prose, the ledger derived from the span.
    summarizer:
      options.summarizer ??
      withCheckpointLedger(boundSummarizer(new AiSdkSummarizer({ model: base }), options.contextWindow !== undefined ? { window: options.contextWindow } : {})),
  });
  const { engine } = conversation;

  /** One call: the prompt read, checked and recorded, the compacted prompt sent, an overflow recovered. */
  const send = async <R>(params: LanguageModelV3CallOptions, spec: SpecVersion, call: (p: LanguageModelV3CallOptions) => PromiseLike<R>) => {
    const step = await conversation.begin(
      {
        ...conversationOf(params.prompt),
        model: base.modelId,
        tools: (params.tools ?? []).map(toolDefinition),
        ...(params.maxOutputTokens ? { maxTokens: params.maxOutputTokens } : {}),
      },
      params.abortSignal,
    );
    const result = await step.send(async () => call({ ...params, prompt: promptOf(step.surface(), spec) }), normaliseRequestError);
    return { step, result };
  };
  const replyOf =
    (content: readonly LanguageModelV3Content[], meta: { usage?: LanguageModelV3Usage; finish?: LanguageModelV3FinishReason; modelId?: string }) =>
    (): Reply => {
      const usage = usageOf(meta.usage);
      return {
        blocks: replyFacts(content).blocks,
        model: meta.modelId ?? base.modelId,
        ...(usage ? { usage } : {}),
        ...(meta.finish?.raw ? { finishReason: meta.finish.raw } : {}),
      };
    };

  const middleware = {
    specificationVersion: 'v3',
    wrapGenerate: async ({ params, model }) => {
      const { step, result } = await send(params, specOf(model), (p) => model.doGenerate(p));
      await step.finish(
        replyOf(result.content, {
          usage: result.usage,
          finish: result.finishReason,
          ...(result.response?.modelId ? { modelId: result.response.modelId } : {}),
        }),
      );
      return result;
    },
    wrapStream: async ({ params, model }) => {
      const { step, result } = await send(params, specOf(model), (p) => model.doStream(p));
      const recorder = replyRecorder(
        (content, meta: ReplyMeta) => step.finish(replyOf(content, meta)),
        () => step.abandon(),
      );
      return { ...result, stream: result.stream.pipeThrough(recorder) };
    },
  } satisfies LanguageModelV3Middleware;

  // The same parsed config as the engine's: the recall tool redacts as the config says.
  const policy = policyFor(engine.config, provider, base.modelId);
  return {
    model: wrapModel(options.model, middleware),
    middleware,
    engine,
    session,
    tools: policy.recall ? { recall: recallTool(session, { redaction: engine.config.redaction }) } : {},
    messages: (opts) => sessionModelMessages(session, opts?.results),
    close: (opts) => conversation.close(opts),
  };
}

/** The provider prompt as the conversation's system prompt and messages; each part mapped before anything is written. */
function conversationOf(prompt: LanguageModelV3CallOptions['prompt']): { system: string | undefined; messages: ConversationMessage[] } {
  let i = 0;
  const system: string[] = [];
  for (; i < prompt.length && prompt[i]!.role === 'system'; i++) {
    refuseOptions(prompt[i]!.providerOptions, 'the system prompt');
    system.push(prompt[i]!.content as string);
  }
  const messages: ConversationMessage[] = [];
  for (const message of prompt.slice(i)) {
    switch (message.role) {
      case 'system':
        throw new AiSdkAdapterError(
          'unmappable-part',
          'xcompact/ai-sdk cannot record a system message in the middle of the conversation: only the leading system prompt is kept (as surface node 0); send other instructions as a user message',
        );
      case 'user':
        messages.push({ role: 'user', content: userBlocks(message) });
        break;
      case 'assistant':
        messages.push({ role: 'assistant', blocks: assistantFacts(message).blocks });
        break;
      case 'tool':
        for (const r of toolResults(message)) {
          messages.push({
            role: 'tool',
            callId: r.callId,
            toolName: r.toolName,
            content: r.content,
            ...(r.isError ? { isError: true } : {}),
            ...(r.providerOptions ? { providerOptions: r.providerOptions } : {}),
          });
        }
        break;
    }
  }
  return { system: system.length > 0 ? system.join('\n\n') : undefined, messages };
}

/** AI SDK function tools → the chat-completions shape the meter prices (and the summarizer replays). */
export function toolDefinition(tool: NonNullable<LanguageModelV3CallOptions['tools']>[number]): Record<string, unknown> {
  if (tool.type !== 'function') return { ...tool };
  return {
    type: 'function',
    function: { name: tool.name, ...(tool.description ? { description: tool.description } : {}), parameters: tool.inputSchema },
  };
}

/**
 * The model's server, read from the provider's own config where AI SDK providers keep it (the
 * OpenAI and OpenAI-compatible providers build each URL with `config.url({ path })`, Anthropic's
 * keeps `config.baseURL`), with the key its headers carry: what tokenizer 'server' asks. Undefined
 * when the provider keeps neither (then give the model a `tokenizerUrl`).
 */
export function serverOfModel(model: unknown): { baseURL: string; apiKey?: string } | undefined {
  const config = (model as { config?: { url?: unknown; baseURL?: unknown; headers?: unknown } } | null)?.config;
  if (typeof config !== 'object' || config === null) return undefined;
  let baseURL: string | undefined;
  try {
    if (typeof config.baseURL === 'string') baseURL = config.baseURL;
    else if (typeof config.url === 'function') {
      const url: unknown = (config.url as (o: { path: string; modelId: string }) => unknown)({ path: '', modelId: (model as { modelId: string }).modelId });
      if (typeof url === 'string') baseURL = url;
    }
  } catch {
    return undefined;
  }
  if (baseURL === undefined) return undefined;
  let apiKey: string | undefined;
  try {
    const headers: unknown = typeof config.headers === 'function' ? (config.headers as () => unknown)() : config.headers;
    const auth =
      typeof headers === 'object' && headers !== null
        ? ((headers as Record<string, unknown>)['Authorization'] ?? (headers as Record<string, unknown>)['authorization'])
        : undefined;
    if (typeof auth === 'string' && auth.startsWith('Bearer ')) apiKey = auth.slice('Bearer '.length);
  } catch {
    // No key: the tokenize request goes without one (llama.cpp and vLLM ask none).
  }
  return { baseURL, ...(apiKey ? { apiKey } : {}) };
}
