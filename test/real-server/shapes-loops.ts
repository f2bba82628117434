/**
 * The real-server shapes suite's agent loops, one per request shape, each an ordinary loop of
 * its SDK (the caller's own history, every tool call answered, a new user message when the
 * model stops calling tools), wrapped once with `withCompaction` over the given session. Used by
 * shapes.llama.ts in-process and by shapes-child.ts (the SIGKILL/resume child).
 */
import Anthropic from '@anthropic-ai/sdk';
import type { ContentBlockParam, MessageParam, RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { ResponseInputItem, ResponseStreamEvent, Response as OpenAIResponse } from 'openai/resources/responses/responses';
import { sessionInput, withCompaction, type Session } from '../../src/index';
import { text } from '../helpers/llama';

export type Shape = 'chat' | 'responses' | 'messages';
export interface LoopOptions {
  shape: Shape;
  stream: boolean;
  /** The proxy's root URL. */
  url: string;
  session: Session;
  /** Agent requests to send (summaries not counted). */
  requests: number;
  seed: number;
  ctx: number;
  /** Called after each answered agent request; return 'pad' to have the next one padded (the test's proxy hook). */
  onReply?: (n: number) => void | Promise<void>;
}
export interface LoopRun {
  requests: number;
  toolCalls: number;
  userTurns: number;
}

const SYSTEM = 'You are a coding agent. Read files with read_file.';
/**
 * Output caps: small, the server is slow. Chat completions gets room for a whole reply (the tiny
 * model's are ≤ 100 tokens): a call cut mid-arguments goes back to llama.cpp as it was cut, and
 * it answers 500 from then on (repairing that is drop-in/client.ts's, docs/testing.md); the Responses
 * and Messages mappings send a cut call back as valid JSON.
 */
const MAX_TOKENS = 24;
const CHAT_MAX_TOKENS = 110;
const modelsFor = (o: LoopOptions) => ({
  tiny: {
    contextWindow: o.ctx,
    maxOutputTokens: o.shape === 'chat' ? CHAT_MAX_TOKENS : MAX_TOKENS,
    tokenizer: 'server' as const,
    tokenizerUrl: `${o.url}/tokenize`,
  },
});
const engine = { tokenizerDeadlineMs: 2_000, config: { maxTokens: 64 } };
const result = (seed: number, k: number) => text(60 + ((seed * 31 + k * 17) % 140), seed * 1000 + k);
const prompt = (seed: number, k: number) => `continue: ${text(8, seed * 77 + k)}`;
const schema = { type: 'object' as const, properties: { path: { type: 'string' } } };

export async function runLoop(o: LoopOptions): Promise<LoopRun> {
  const run: LoopRun = { requests: 0, toolCalls: 0, userTurns: 0 };
  const options = { session: o.session, models: modelsFor(o), provider: 'local', ...engine };
  if (o.shape === 'messages') {
    const ai = withCompaction(new Anthropic({ baseURL: o.url, apiKey: 'test', maxRetries: 0, timeout: 600_000 }), options);
    const messages = ai.compaction.messages() as MessageParam[];
    const tools = [{ name: 'read_file', description: 'Read a file', input_schema: schema }];
    if (messages.length === 0 || messages.at(-1)!.role === 'assistant') {
      messages.push({ role: 'user', content: prompt(o.seed, run.userTurns++) });
    }
    while (run.requests < o.requests) {
      let content: Array<Record<string, unknown>>;
      if (o.stream) {
        const events = await ai.messages.create({ model: 'tiny', max_tokens: MAX_TOKENS, system: SYSTEM, messages, tools, stream: true });
        content = [];
        const json: string[] = [];
        for await (const e of events as AsyncIterable<RawMessageStreamEvent>) {
          if (e.type === 'content_block_start') content[e.index] = { ...e.content_block };
          if (e.type === 'content_block_delta' && e.delta.type === 'text_delta')
            content[e.index]!['text'] = String(content[e.index]!['text'] ?? '') + e.delta.text;
          if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') json[e.index] = (json[e.index] ?? '') + e.delta.partial_json;
        }
        content.forEach((b, i) => {
          if (b['type'] !== 'tool_use') return;
          try {
            b['input'] = JSON.parse(json[i] ?? '{}');
          } catch {
            b['input'] = {};
          }
        });
      } else {
        const reply = await ai.messages.create({ model: 'tiny', max_tokens: MAX_TOKENS, system: SYSTEM, messages, tools });
        content = reply.content as unknown as Array<Record<string, unknown>>;
      }
      run.requests++;
      content = content.filter((b) => b && !(b['type'] === 'text' && b['text'] === ''));
      messages.push({ role: 'assistant', content: content as unknown as ContentBlockParam[] });
      const calls = content.filter((b) => b['type'] === 'tool_use');
      run.toolCalls += calls.length;
      const results = calls.map((c, k) => ({ type: 'tool_result' as const, tool_use_id: String(c['id']), content: result(o.seed, run.requests * 10 + k) }));
      if (calls.length === 0) run.userTurns++;
      messages.push({ role: 'user', content: calls.length > 0 ? results : prompt(o.seed, run.userTurns) });
      await o.onReply?.(run.requests);
    }
    await ai.compaction.close();
    return run;
  }
  const ai = withCompaction(new OpenAI({ baseURL: `${o.url}/v1`, apiKey: 'test', maxRetries: 0, timeout: 600_000 }), options);
  if (o.shape === 'chat') {
    const messages: ChatCompletionMessageParam[] = ai.compaction.messages();
    if (messages.length === 0) messages.push({ role: 'system', content: SYSTEM });
    if (messages.at(-1)!.role === 'assistant' || messages.at(-1)!.role === 'system') messages.push({ role: 'user', content: prompt(o.seed, run.userTurns++) });
    const tools = [{ type: 'function' as const, function: { name: 'read_file', description: 'Read a file', parameters: schema } }];
    while (run.requests < o.requests) {
      let message: {
        role: 'assistant';
        content: string | null;
        tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
      };
      if (o.stream) {
        const s = await ai.chat.completions.create({ model: 'tiny', max_tokens: CHAT_MAX_TOKENS, messages, tools, stream: true });
        let content = '';
        const calls: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }> = [];
        for await (const c of s as AsyncIterable<ChatCompletionChunk>) {
          const d = c.choices[0]?.delta;
          if (d?.content) content += d.content;
          for (const t of d?.tool_calls ?? []) {
            const call = (calls[t.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
            if (t.id) call.id = t.id;
            if (t.function?.name) call.function.name += t.function.name;
            if (t.function?.arguments) call.function.arguments += t.function.arguments;
          }
        }
        message = { role: 'assistant', content, ...(calls.length > 0 ? { tool_calls: calls } : {}) };
      } else {
        const r = await ai.chat.completions.create({ model: 'tiny', max_tokens: CHAT_MAX_TOKENS, messages, tools });
        message = r.choices[0]!.message as typeof message;
      }
      run.requests++;
      messages.push(message);
      const calls = message.tool_calls ?? [];
      run.toolCalls += calls.length;
      calls.forEach((c, k) => messages.push({ role: 'tool', tool_call_id: c.id, content: result(o.seed, run.requests * 10 + k) }));
      if (calls.length === 0) messages.push({ role: 'user', content: prompt(o.seed, ++run.userTurns) });
      await o.onReply?.(run.requests);
    }
    await ai.compaction.close();
    return run;
  }
  const { input } = sessionInput(o.session);
  if (input.length === 0 || (input.at(-1) as { role?: string }).role === 'assistant' || (input.at(-1) as { type?: string }).type === 'message') {
    input.push({ role: 'user', content: prompt(o.seed, run.userTurns++) });
  }
  const tools = [{ type: 'function' as const, name: 'read_file', description: 'Read a file', strict: false, parameters: schema }];
  while (run.requests < o.requests) {
    let output: OpenAIResponse['output'];
    if (o.stream) {
      const s = await ai.responses.create({
        model: 'tiny',
        max_output_tokens: MAX_TOKENS,
        instructions: SYSTEM,
        input: input as ResponseInputItem[],
        tools,
        stream: true,
        store: false,
      });
      let done: OpenAIResponse | undefined;
      for await (const e of s as AsyncIterable<ResponseStreamEvent>) if (e.type === 'response.completed' || e.type === 'response.incomplete') done = e.response;
      output = done!.output;
    } else {
      output = (
        await ai.responses.create({
          model: 'tiny',
          max_output_tokens: MAX_TOKENS,
          instructions: SYSTEM,
          input: input as ResponseInputItem[],
          tools,
          store: false,
        })
      ).output;
    }
    run.requests++;
    input.push(...(output as never[]));
    const calls = output.filter((i) => i.type === 'function_call');
    run.toolCalls += calls.length;
    calls.forEach((c, k) => input.push({ type: 'function_call_output', call_id: c.call_id, output: result(o.seed, run.requests * 10 + k) }));
    if (calls.length === 0) input.push({ role: 'user', content: prompt(o.seed, ++run.userTurns) });
    await o.onReply?.(run.requests);
  }
  await ai.compaction.close();
  return run;
}
