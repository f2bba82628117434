/**
 * One agent loop per face, written as a user writes it from the README and docs: the caller keeps
 * its own history (Chat Completions messages, Responses input items, Anthropic messages, AI SDK
 * messages), appends each reply and each tool result, and asks again until a reply has no tool
 * call. The same loop drives the local server (test/adapters/conversation/) and the real
 * llama.cpp (test/real-server/): the promises of the conversation are checked on every face,
 * streamed and not, by one piece of code.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import Anthropic from '@anthropic-ai/sdk';
import type { ContentBlockParam, Message, MessageParam, RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages';
import { generateText, jsonSchema, stepCountIs, streamText, tool, type ModelMessage } from 'ai';
import OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam, ChatCompletionMessageToolCall } from 'openai/resources/chat/completions';
import type { ResponseInputItem, ResponseStreamEvent, Response as OpenAIResponse } from 'openai/resources/responses/responses';
import { createAiSdkCompaction } from '../../src/adapters/ai-sdk/index';
import type { CompactionConfigInput } from '../../src/services/config';
import type { CompactionEngine } from '../../src/engine/facade';
import { withCompaction } from '../../src/index';
import type { ModelInfo } from '../../src/services/config';
import type { Session } from '../../src/session/session';

export const FACES = ['chat', 'responses', 'anthropic', 'ai-sdk'] as const;
export type FaceName = (typeof FACES)[number];

export interface FaceOptions {
  /** The server's root (`http://127.0.0.1:PORT`): each SDK gets the base URL it expects. */
  url: string;
  model: string;
  session: Session;
  models: Record<string, Partial<ModelInfo>>;
  stream: boolean;
  /** Runs one tool call: its text result. */
  runTool(name: string, args: unknown): string | Promise<string>;
  config?: CompactionConfigInput;
  system?: string;
  /** The request's output cap (unset: none). */
  maxTokens?: number;
  /** How many tool steps one turn may take before it is stopped (the AI SDK's `stopWhen`). */
  maxSteps?: number;
}

export interface FaceLoop {
  readonly face: FaceName;
  readonly engine: CompactionEngine;
  /** One turn: `prompt`, then each reply's tool calls run and answered, until a reply without calls; its text. */
  turn(prompt: string, signal?: AbortSignal): Promise<string>;
  close(options?: { session?: boolean }): Promise<void>;
}

const TOOL = {
  name: 'read_file',
  description: 'Read a file of the project',
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
} as const;

const argsOf = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

export function openFace(face: FaceName, o: FaceOptions): FaceLoop {
  switch (face) {
    case 'chat':
      return chatLoop(o);
    case 'responses':
      return responsesLoop(o);
    case 'anthropic':
      return anthropicLoop(o);
    case 'ai-sdk':
      return aiSdkLoop(o);
  }
}

function chatLoop(o: FaceOptions): FaceLoop {
  const client = withCompaction(new OpenAI({ baseURL: `${o.url}/v1`, apiKey: 'test', maxRetries: 0 }), {
    session: o.session,
    models: o.models,
    ...(o.config ? { config: o.config } : {}),
  });
  const messages: ChatCompletionMessageParam[] = client.compaction.messages();
  if (messages.length === 0 && o.system) messages.push({ role: 'system', content: o.system });
  const tools = [{ type: 'function' as const, function: TOOL }];
  return {
    face: 'chat',
    engine: client.compaction.engine,
    async turn(prompt, signal) {
      messages.push({ role: 'user', content: prompt });
      for (;;) {
        const body = { model: o.model, messages, tools, ...(o.maxTokens ? { max_tokens: o.maxTokens } : {}) };
        let message: { role: 'assistant'; content: string | null; tool_calls?: ChatCompletionMessageToolCall[] };
        if (o.stream) {
          const stream = await client.chat.completions.create({ ...body, stream: true }, { signal });
          let content = '';
          const calls: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }> = [];
          for await (const chunk of stream as AsyncIterable<ChatCompletionChunk>) {
            const delta = chunk.choices[0]?.delta;
            if (delta?.content) content += delta.content;
            for (const c of delta?.tool_calls ?? []) {
              const call = (calls[c.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
              if (c.id) call.id = c.id;
              if (c.function?.name) call.function.name += c.function.name;
              if (c.function?.arguments) call.function.arguments += c.function.arguments;
            }
          }
          message = { role: 'assistant', content, ...(calls.length > 0 ? { tool_calls: calls } : {}) };
        } else {
          const reply = await client.chat.completions.create(body, { signal });
          const m = reply.choices[0]!.message;
          message = { role: 'assistant', content: m.content, ...(m.tool_calls?.length ? { tool_calls: m.tool_calls } : {}) };
        }
        messages.push(message);
        const calls = (message.tool_calls ?? []).filter((c): c is Extract<ChatCompletionMessageToolCall, { type: 'function' }> => c.type === 'function');
        if (calls.length === 0) return message.content ?? '';
        for (const c of calls) messages.push({ role: 'tool', tool_call_id: c.id, content: await o.runTool(c.function.name, argsOf(c.function.arguments)) });
      }
    },
    close: (opts) => client.compaction.close(opts),
  };
}

function responsesLoop(o: FaceOptions): FaceLoop {
  const client = withCompaction(new OpenAI({ baseURL: `${o.url}/v1`, apiKey: 'test', maxRetries: 0 }), {
    session: o.session,
    models: o.models,
    ...(o.config ? { config: o.config } : {}),
  });
  const input: ResponseInputItem[] = [];
  const tools = [
    { type: 'function' as const, name: TOOL.name, description: TOOL.description, parameters: TOOL.parameters as Record<string, unknown>, strict: false },
  ];
  return {
    face: 'responses',
    engine: client.compaction.engine,
    async turn(prompt, signal) {
      input.push({ role: 'user', content: prompt });
      for (;;) {
        const body = {
          model: o.model,
          input,
          tools,
          store: false,
          ...(o.system ? { instructions: o.system } : {}),
          ...(o.maxTokens ? { max_output_tokens: o.maxTokens } : {}),
        };
        let response: OpenAIResponse;
        if (o.stream) {
          const stream = await client.responses.create({ ...body, stream: true }, { signal });
          let done: OpenAIResponse | undefined;
          for await (const e of stream as AsyncIterable<ResponseStreamEvent>)
            if (e.type === 'response.completed' || e.type === 'response.incomplete') done = e.response;
          response = done!;
        } else {
          response = await client.responses.create(body, { signal });
        }
        input.push(...(response.output as ResponseInputItem[]));
        const calls = response.output.filter((i) => i.type === 'function_call');
        if (calls.length === 0) return textOfOutput(response);
        for (const c of calls) input.push({ type: 'function_call_output', call_id: c.call_id, output: await o.runTool(c.name, argsOf(c.arguments)) });
      }
    },
    close: (opts) => client.compaction.close(opts),
  };
}

function anthropicLoop(o: FaceOptions): FaceLoop {
  const client = withCompaction(new Anthropic({ baseURL: o.url, apiKey: 'test', maxRetries: 0 }), {
    session: o.session,
    models: o.models,
    ...(o.config ? { config: o.config } : {}),
  });
  const messages: MessageParam[] = [];
  const tools = [{ name: TOOL.name, description: TOOL.description, input_schema: TOOL.parameters as unknown as Anthropic.Tool.InputSchema }];
  return {
    face: 'anthropic',
    engine: client.compaction.engine,
    async turn(prompt, signal) {
      messages.push({ role: 'user', content: prompt });
      for (;;) {
        const body = { model: o.model, max_tokens: o.maxTokens ?? 1024, messages, tools, ...(o.system ? { system: o.system } : {}) };
        let content: Message['content'];
        if (o.stream) {
          const events = await client.messages.create({ ...body, stream: true }, { signal });
          const blocks: Array<Record<string, unknown>> = [];
          const json: string[] = [];
          for await (const e of events as AsyncIterable<RawMessageStreamEvent>) {
            if (e.type === 'content_block_start') blocks[e.index] = { ...e.content_block };
            if (e.type === 'content_block_delta') {
              const b = blocks[e.index]!;
              if (e.delta.type === 'text_delta') b['text'] = String(b['text'] ?? '') + e.delta.text;
              if (e.delta.type === 'input_json_delta') json[e.index] = (json[e.index] ?? '') + e.delta.partial_json;
            }
          }
          blocks.forEach((b, i) => {
            if (b['type'] === 'tool_use') b['input'] = argsOf(json[i] || '{}');
          });
          content = blocks as unknown as Message['content'];
        } else {
          content = (await client.messages.create(body, { signal })).content;
        }
        messages.push({ role: 'assistant', content: content as ContentBlockParam[] });
        const calls = content.filter((b) => b.type === 'tool_use');
        if (calls.length === 0) return content.map((b) => (b.type === 'text' ? b.text : '')).join('');
        const results: ContentBlockParam[] = [];
        for (const c of calls) results.push({ type: 'tool_result', tool_use_id: c.id, content: await o.runTool(c.name, c.input) });
        messages.push({ role: 'user', content: results });
      }
    },
    close: (opts) => client.compaction.close(opts),
  };
}

function aiSdkLoop(o: FaceOptions): FaceLoop {
  const provider = createOpenAICompatible({ name: 'local', baseURL: `${o.url}/v1`, apiKey: 'test', includeUsage: true });
  const compaction = createAiSdkCompaction({
    model: provider.chatModel(o.model),
    session: o.session,
    models: Object.fromEntries(Object.entries(o.models).map(([k, v]) => [k.includes('/') ? k : `local/${k}`, v])),
    ...(o.config ? { config: o.config } : {}),
  });
  const tools = {
    [TOOL.name]: tool({
      description: TOOL.description,
      inputSchema: jsonSchema<{ path: string }>(TOOL.parameters as never),
      execute: async (input: unknown) => o.runTool(TOOL.name, input),
    }),
  };
  // The documented loop: each turn continues the recorded conversation.
  return {
    face: 'ai-sdk',
    engine: compaction.engine,
    async turn(prompt, signal) {
      const messages: ModelMessage[] = [...compaction.messages(), { role: 'user', content: prompt }];
      const common = {
        model: compaction.model,
        messages,
        tools,
        stopWhen: stepCountIs(o.maxSteps ?? 40),
        maxRetries: 0,
        ...(o.system ? { system: o.system } : {}),
        ...(o.maxTokens ? { maxOutputTokens: o.maxTokens } : {}),
        ...(signal ? { abortSignal: signal } : {}),
      };
      if (o.stream) {
        let failure: unknown;
        const r = streamText({ ...common, onError: ({ error }) => void (failure = error) });
        const text = await r.text;
        if (failure) throw failure;
        return text;
      }
      return (await generateText(common)).text;
    },
    close: (opts) => compaction.close(opts),
  };
}

/** A response's text (a streamed `response.completed` carries no `output_text`: the SDK adds it to created responses only). */
function textOfOutput(response: OpenAIResponse): string {
  return response.output.flatMap((i) => (i.type === 'message' ? i.content.map((c) => (c.type === 'output_text' ? c.text : '')) : [])).join('');
}
