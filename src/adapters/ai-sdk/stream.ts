/**
 * A streamed reply, passed through unchanged to the app while it is collected into the parts a
 * generate call would have returned, so that the adapter records a streamed step exactly as a
 * generated one. Only a stream that finished is recorded: one that failed or stopped early is
 * abandoned (its step ends as `error`), never recorded half.
 */
import type {
  LanguageModelV3Content,
  LanguageModelV3FinishReason,
  LanguageModelV3StreamPart,
  LanguageModelV3Usage,
  SharedV3ProviderMetadata,
} from '@ai-sdk/provider';

export interface ReplyMeta {
  usage?: LanguageModelV3Usage;
  finish: LanguageModelV3FinishReason;
  modelId?: string;
}

export function replyRecorder(
  finish: (content: LanguageModelV3Content[], meta: ReplyMeta) => Promise<void>,
  abandon: () => void,
): TransformStream<LanguageModelV3StreamPart, LanguageModelV3StreamPart> {
  const content: LanguageModelV3Content[] = [];
  // Accumulated as the AI SDK does: a later delta's or the end's providerMetadata wins.
  const texts = new Map<string, { type: 'text' | 'reasoning'; text: string; providerMetadata?: SharedV3ProviderMetadata }>();
  let usage: LanguageModelV3Usage | undefined;
  let finishReason: LanguageModelV3FinishReason | undefined;
  let modelId: string | undefined;
  let failed = false;
  return new TransformStream<LanguageModelV3StreamPart, LanguageModelV3StreamPart>({
    transform(part, controller) {
      switch (part.type) {
        case 'text-start':
        case 'reasoning-start': {
          const entry = {
            type: part.type === 'text-start' ? ('text' as const) : ('reasoning' as const),
            text: '',
            ...(part.providerMetadata ? { providerMetadata: part.providerMetadata } : {}),
          };
          texts.set(part.id, entry);
          content.push(entry);
          break;
        }
        case 'text-delta':
        case 'reasoning-delta': {
          const entry = texts.get(part.id);
          if (entry) {
            entry.text += part.delta;
            if (part.providerMetadata) entry.providerMetadata = part.providerMetadata;
          }
          break;
        }
        case 'text-end':
        case 'reasoning-end': {
          const entry = texts.get(part.id);
          if (entry && part.providerMetadata) entry.providerMetadata = part.providerMetadata;
          break;
        }
        case 'tool-call':
        case 'tool-result':
        case 'file':
        case 'source':
        case 'tool-approval-request':
        // Spec v4 only (ai 7): parts the session cannot hold, kept so the reply is refused naming them.
        case 'custom' as LanguageModelV3StreamPart['type']:
        case 'reasoning-file' as LanguageModelV3StreamPart['type']:
          content.push(part as LanguageModelV3Content);
          break;
        case 'response-metadata':
          if (part.modelId) modelId = part.modelId;
          break;
        case 'finish':
          usage = part.usage;
          finishReason = part.finishReason;
          break;
        case 'error':
          failed = true;
          break;
      }
      controller.enqueue(part);
    },
    async flush(controller) {
      if (failed || finishReason === undefined) {
        abandon();
        return;
      }
      try {
        await finish(content, { ...(usage ? { usage } : {}), finish: finishReason, ...(modelId ? { modelId } : {}) });
      } catch (err) {
        controller.error(err);
      }
    },
  });
}
