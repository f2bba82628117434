/**
 * The durable vocabulary of a session: content blocks and the typed events of the log.
 * One zod schema per event type is the single source of truth; TypeScript types are
 * inferred from it. Nothing here knows about tokens, models or XState.
 */
import { z } from 'zod';

// ---------------------------------------------------------------------------
// Content blocks

/**
 * Provider-specific data a block must carry back to its provider, by provider name (the AI
 * SDK's `providerOptions`): a Gemini thought signature on a tool call, an Anthropic thinking
 * signature on reasoning. Opaque JSON, kept as recorded; the chat projection ignores it.
 */
export const ProviderOptionsSchema = z.record(z.string(), z.record(z.string(), z.unknown()));
const providerOptions = ProviderOptionsSchema.optional();

export const TextBlockSchema = z.object({ type: z.literal('text'), text: z.string(), providerOptions }).strict();
export const ReasoningBlockSchema = z.object({ type: z.literal('reasoning'), text: z.string(), providerOptions }).strict();
/** `arguments` is the raw JSON string the model produced, kept byte for byte. */
export const ToolCallBlockSchema = z
  .object({ type: z.literal('tool-call'), id: z.string().min(1), name: z.string().min(1), arguments: z.string(), providerOptions })
  .strict();
/** `url` is an http(s) URL or a `data:` URL, as the OpenAI chat API accepts. */
export const ImageBlockSchema = z
  .object({ type: z.literal('image'), url: z.string().min(1), detail: z.enum(['auto', 'low', 'high']).optional(), providerOptions })
  .strict();

export type TextBlock = z.infer<typeof TextBlockSchema>;
export type ReasoningBlock = z.infer<typeof ReasoningBlockSchema>;
export type ToolCallBlock = z.infer<typeof ToolCallBlockSchema>;
export type ImageBlock = z.infer<typeof ImageBlockSchema>;
export type ProviderOptions = z.infer<typeof ProviderOptionsSchema>;
export type ContentBlock = TextBlock | ReasoningBlock | ToolCallBlock | ImageBlock;

const UserContentSchema = z.array(z.discriminatedUnion('type', [TextBlockSchema, ImageBlockSchema])).min(1);
const AssistantContentSchema = z.array(z.discriminatedUnion('type', [TextBlockSchema, ReasoningBlockSchema, ToolCallBlockSchema]));
const ToolResultContentSchema = z.array(z.discriminatedUnion('type', [TextBlockSchema, ImageBlockSchema]));

const seq = z.number().int().min(0);
const tokenCount = z.number().int().min(0);

/**
 * Provider usage, normalised to OpenAI semantics: `promptTokens` is the whole prompt
 * (cached tokens included), `cachedTokens` the part read from the prompt cache.
 */
export const UsageSchema = z
  .object({
    promptTokens: tokenCount,
    completionTokens: tokenCount,
    cachedTokens: tokenCount.optional(),
    cacheWriteTokens: tokenCount.optional(),
    reasoningTokens: tokenCount.optional(),
  })
  .strict();
export type Usage = z.infer<typeof UsageSchema>;

const turnNumber = z.number().int().min(0);
const endReason = z.enum(['completed', 'aborted', 'error', 'interrupted']);
const errorInfo = z.object({ code: z.string().min(1), message: z.string() }).strict();

/** The `source` a compaction checkpoint `user/message` carries. */
export const COMPACTION_CHECKPOINT_SOURCE = 'compaction-checkpoint';

// ---------------------------------------------------------------------------
// Event data, one schema per type

export const EventDataSchemas = {
  'turn/start': z.object({ turn: turnNumber }).strict(),
  'turn/end': z.object({ turn: turnNumber, reason: endReason.optional() }).strict(),
  'step/start': z.object({ turn: turnNumber, step: z.number().int().min(0) }).strict(),
  'step/end': z.object({ turn: turnNumber, step: z.number().int().min(0), reason: endReason.optional() }).strict(),
  'system/message': z.object({ text: z.string() }).strict(),
  'user/message': z.object({ content: UserContentSchema, source: z.string().min(1).optional() }).strict(),
  'assistant/message': z
    .object({
      content: AssistantContentSchema,
      provider: z.string().min(1).optional(),
      model: z.string().min(1).optional(),
      usage: UsageSchema.optional(),
      finishReason: z.string().min(1).optional(),
    })
    .strict(),
  'tool/result': z
    .object({
      callId: z.string().min(1),
      toolName: z.string().min(1).optional(),
      content: ToolResultContentSchema,
      isError: z.boolean().optional(),
      /** The result part's provider options (the AI SDK copies a call's thought signature onto its result). */
      providerOptions,
    })
    .strict(),
  /** What a request was routed to and built with. The system prompt is surface node 0. */
  'request/header': z
    .object({
      provider: z.string().min(1),
      model: z.string().min(1),
      tools: z.array(z.record(z.string(), z.unknown())),
      maxTokens: z.number().int().positive().optional(),
      /** The model's window as the writer knew it (a `models` entry): what `inspect` measures against later. */
      contextWindow: z.number().int().positive().optional(),
    })
    .strict(),
  /** Ends a lifecycle: a `compaction/start` left open before it is stale, not a live lock. */
  'session/end-seed': z.object({ reason: z.string().min(1).optional() }).strict(),
  'compaction/start': z
    .object({
      turn: turnNumber.nullable(),
      trigger: z.enum(['pressure', 'overflow', 'manual']),
      /** Prepared in the background (docs/spec.md#13-background-compaction): the bracket may stay open across step and turn boundaries. */
      background: z.literal(true).optional(),
    })
    .strict(),
  'compaction/summary': z
    .object({
      summary: z.string().min(1),
      /** Surface span by seq, in surface order (a checkpoint has a high seq at an old position). */
      range: z.object({ start: seq, end: seq }).strict(),
      shadowedSeqs: z.array(seq).min(1),
      shadowedTokens: tokenCount,
      provider: z.string().min(1).optional(),
      model: z.string().min(1).optional(),
      usage: UsageSchema.optional(),
      /** A truncation checkpoint (the model-free last resort): no model wrote it, and why none did. */
      truncation: z
        .object({ reason: z.enum(['breaker-open', 'summary-failed', 'summary-over-cap']) })
        .strict()
        .optional(),
      /** Secrets redacted from the summary (and its checkpoint) before they were written: the originals stay in the log. */
      redacted: z.number().int().positive().optional(),
    })
    .strict(),
  'compaction/prune': z
    .object({
      targetSeq: seq,
      callId: z.string().min(1),
      tokensBefore: tokenCount,
      tokensAfter: tokenCount,
      charsBefore: tokenCount,
      charsAfter: tokenCount,
    })
    .strict(),
  'compaction/end': z.object({ turn: turnNumber.nullable(), error: errorInfo.optional() }).strict(),
} as const;

export type EventType = keyof typeof EventDataSchemas;
export type EventData<T extends EventType> = z.output<(typeof EventDataSchemas)[T]>;
export const EVENT_TYPES = Object.keys(EventDataSchemas) as EventType[];

export const SURFACE_TYPES = ['system/message', 'user/message', 'assistant/message', 'tool/result'] as const;
export type SurfaceType = (typeof SURFACE_TYPES)[number];
export function isSurfaceType(type: string): type is SurfaceType {
  return (SURFACE_TYPES as readonly string[]).includes(type);
}

export const SurfaceOpSchema = z.union([z.literal('append'), z.object({ op: z.literal('replace'), start: seq, end: seq }).strict()]);
export type SurfaceOp = z.infer<typeof SurfaceOpSchema>;
export type ReplaceOp = Extract<SurfaceOp, { op: 'replace' }>;

/** One entry of the append-only log. `seq` equals its position in the log. */
export type SessionEvent<T extends EventType = EventType> = {
  [K in T]: {
    readonly seq: number;
    readonly type: K;
    /** ISO-8601 time of the append. */
    readonly time: string;
    readonly data: Readonly<EventData<K>>;
    readonly surfaceOp?: SurfaceOp;
    readonly sourceEventSeqs?: readonly number[];
  };
}[T];

/** What a caller passes to `Session.append`: the session assigns `seq` and `time`. */
export type AppendInput<T extends EventType = EventType> = {
  [K in T]: {
    type: K;
    data: EventData<K>;
    surfaceOp?: SurfaceOp;
    sourceEventSeqs?: readonly number[];
  };
}[T];

export type SurfaceEvent = SessionEvent<SurfaceType>;

/** Shape of a stored line, checked before the log rules are applied on replay. */
export const StoredEventSchema = z
  .object({
    seq,
    type: z.enum(EVENT_TYPES as [EventType, ...EventType[]]),
    time: z.string().min(1),
    data: z.unknown(),
    surfaceOp: SurfaceOpSchema.optional(),
    sourceEventSeqs: z.array(seq).optional(),
  })
  .strict();

export function toolCallsOf(event: SessionEvent): ToolCallBlock[] {
  if (event.type !== 'assistant/message') return [];
  return event.data.content.filter((b): b is ToolCallBlock => b.type === 'tool-call');
}

export function isCheckpoint(event: SessionEvent): boolean {
  return event.type === 'user/message' && event.data.source === COMPACTION_CHECKPOINT_SOURCE;
}
