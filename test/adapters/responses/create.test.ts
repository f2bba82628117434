/**
 * `withCompaction(new OpenAI())` and `client.responses.create`: an ordinary stateless Responses
 * loop (its own `input` array, each response's `output` pushed back, function_call_output items
 * after), the real SDK over HTTP to the local server's `/v1/responses`. What the server receives
 * is the session's compacted conversation as input items.
 */
import OpenAI from 'openai';
import type { ResponseInputItem, ResponseStreamEvent, Response as OpenAIResponse } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DropInError, Session, withCompaction } from '../../../src/index';
import { ShapeError } from '../../../src/adapters/conversation/errors';
import { sessionInput } from '../../../src/adapters/responses/create';
import { OVERFLOW_BODIES, startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer, type Scenario } from '../../../src/testing/index';

let server: LocalOpenAIServer;
beforeAll(async () => {
  server = await startOpenAIServer();
});
afterAll(async () => {
  await server.close();
});

const MODELS = { 'local-model': { contextWindow: 4_000, maxOutputTokens: 500 } };
const TOOLS = [
  {
    type: 'function' as const,
    name: 'read_file',
    description: 'Read a file',
    strict: false,
    parameters: { type: 'object', properties: { path: { type: 'string' } } },
  },
];
const isSummary = (body: ChatRequestBody): boolean => {
  const last = body.messages?.at(-1);
  return last?.role === 'user' && typeof last.content === 'string' && last.content.startsWith('You are now acting as a compaction engine');
};
const fileText = (path: string) => `// ${path}\n` + `export const value = ${JSON.stringify(path)}; // a line of code\n`.repeat(30);

/** Reads `files` files, one call per step (with a reasoning item when `reasoning`), then answers. */
function reader(files: number, reasoning = false): (req: { body: ChatRequestBody }) => Scenario {
  let done = 0;
  return ({ body }) => {
    if (isSummary(body)) return { kind: 'reply', content: '## Primary Request and Intent\n- read the files\n\n## Current Work\n- reading' };
    if (done < files) {
      done++;
      return {
        kind: 'reply',
        ...(reasoning ? { reasoning: `think ${done}` } : {}),
        toolCalls: [{ id: `call_${done}`, name: 'read_file', arguments: JSON.stringify({ path: `f${done - 1}.ts` }) }],
      };
    }
    return { kind: 'reply', content: `I read ${files} files.` };
  };
}

const client = () => new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });

/** The caller's stateless Responses loop. */
async function loop(ai: OpenAI, input: ResponseInputItem[], stream: boolean): Promise<string> {
  for (;;) {
    let response: OpenAIResponse;
    if (stream) {
      const events = await ai.responses.create({ model: 'local-model', instructions: 'You read code.', input, tools: TOOLS, stream: true, store: false });
      let done: OpenAIResponse | undefined;
      for await (const e of events as AsyncIterable<ResponseStreamEvent>) if (e.type === 'response.completed') done = e.response;
      response = done!;
    } else {
      response = await ai.responses.create({ model: 'local-model', instructions: 'You read code.', input, tools: TOOLS, store: false });
    }
    input.push(...(response.output as ResponseInputItem[]));
    const calls = response.output.filter((o) => o.type === 'function_call');
    if (calls.length === 0)
      return response.output.flatMap((o) => (o.type === 'message' ? o.content.map((c) => (c.type === 'output_text' ? c.text : '')) : [])).join('');
    for (const c of calls)
      input.push({ type: 'function_call_output', call_id: c.call_id, output: fileText((JSON.parse(c.arguments) as { path: string }).path) });
  }
}

const responsesRequests = (from: number) => server.requests.slice(from).filter((r) => r.path === '/v1/responses');

describe('withCompaction: client.responses.create', () => {
  for (const stream of [false, true]) {
    it(`records a tool loop, compacts it and sends the compacted input (${stream ? 'streamed' : 'not streamed'})`, async () => {
      server.setHandler(reader(12, true));
      const from = server.requests.length;
      const session = Session.inMemory();
      const ai = withCompaction(client(), { session, models: MODELS });
      const input: ResponseInputItem[] = [{ role: 'user', content: 'Read the files.' }];
      const answer = await loop(ai, input, stream);
      expect(answer).toBe('I read 12 files.');
      const committed = session.events().filter((e) => e.type === 'compaction/summary');
      expect(committed.length).toBeGreaterThan(0);
      const sent = responsesRequests(from);
      const last = sent.at(-1)!.json as { input: Array<{ type?: string; role?: string; content?: unknown; call_id?: string }>; instructions?: string };
      expect(last.instructions).toBe('You read code.');
      // The checkpoint stands in for the oldest steps: fewer items than the caller holds.
      expect(last.input.length).toBeLessThan(input.length);
      expect(JSON.stringify(last.input)).toContain('## Primary Request and Intent');
      // Every function_call sent has its output right after its reply, every output its call.
      const calls = last.input.filter((i) => i.type === 'function_call').map((i) => i.call_id);
      const outputs = last.input.filter((i) => i.type === 'function_call_output').map((i) => i.call_id);
      expect(outputs).toEqual(calls);
      // Reasoning items go back whole, each before the call it led to.
      const reasoning = last.input.filter((i) => i.type === 'reasoning') as Array<{ id: string; encrypted_content: string; summary: unknown }>;
      expect(reasoning.length).toBeGreaterThan(0);
      for (const r of reasoning) {
        const at = last.input.indexOf(r as never);
        expect(last.input[at + 1]?.type).toBe('function_call');
        expect(r.encrypted_content).toMatch(/^enc:/);
      }
      // The caller's own array is untouched by the compaction, and the session continues it.
      expect(sessionInput(session).input.length).toBe(input.length);
      await ai.compaction.close();
    });
  }

  it('recovers an overflow inside the call and answers the caller', async () => {
    server.setHandler(reader(6));
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    const input: ResponseInputItem[] = [{ role: 'user', content: 'Read the files.' }];
    // Four steps in, the provider rejects the next request as too long.
    let steps = 0;
    for (;;) {
      if (++steps === 4) server.enqueue({ kind: 'status', ...OVERFLOW_BODIES.openai });
      const response = await ai.responses.create({ model: 'local-model', input, tools: TOOLS });
      input.push(...(response.output as ResponseInputItem[]));
      const calls = response.output.filter((o) => o.type === 'function_call');
      if (calls.length === 0) break;
      for (const c of calls) input.push({ type: 'function_call_output', call_id: c.call_id, output: fileText('x') });
    }
    const overflow = session.events().filter((e) => e.type === 'compaction/start' && e.data.trigger === 'overflow');
    expect(overflow).toHaveLength(1);
    await ai.compaction.close();
  });

  it('refuses server-held state with a typed error and records nothing', async () => {
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    const from = server.requests.length;
    const before = session.length;
    for (const extra of [{ previous_response_id: 'resp_1' }, { conversation: 'conv_1' }]) {
      const err = await ai.responses.create({ model: 'local-model', input: 'hi', ...extra }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ShapeError);
      expect((err as ShapeError).code).toBe('server-state');
      expect((err as Error).message).toMatch(/send the whole conversation as `input` items/);
    }
    const ref = await ai.responses.create({ model: 'local-model', input: [{ type: 'item_reference', id: 'msg_1' }] }).catch((e: unknown) => e);
    expect((ref as ShapeError).code).toBe('server-state');
    expect(session.length).toBe(before);
    expect(server.requests.length).toBe(from);
  });

  it('refuses a function_call left without its output, recording nothing', async () => {
    server.setHandler(reader(1));
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    const input: ResponseInputItem[] = [{ role: 'user', content: 'Read.' }];
    const r = await ai.responses.create({ model: 'local-model', input, tools: TOOLS });
    input.push(...(r.output as ResponseInputItem[]));
    const before = session.length;
    const err = await ai.responses.create({ model: 'local-model', input, tools: TOOLS }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DropInError);
    expect((err as DropInError).code).toBe('missing-tool-results');
    expect((err as DropInError).toolCallIds).toEqual(['call_1']);
    expect(session.length).toBe(before);
  });

  it('a session recorded through chat completions continues through responses', async () => {
    server.setHandler(reader(2));
    const session = Session.inMemory();
    const ai = withCompaction(client(), { session, models: MODELS });
    const r1 = await ai.chat.completions.create({
      model: 'local-model',
      messages: [
        { role: 'system', content: 'S' },
        { role: 'user', content: 'Read.' },
      ],
      tools: [{ type: 'function', function: { name: 'read_file', parameters: {} } }],
    });
    const call = r1.choices[0]!.message.tool_calls![0]!;
    const { instructions, input } = sessionInput(session);
    expect(instructions).toBe('S');
    input.push({ type: 'function_call_output', call_id: call.id, output: 'the file' });
    const from = server.requests.length;
    const r2 = await ai.responses.create({ model: 'local-model', instructions: 'S', input: input as ResponseInputItem[], tools: TOOLS });
    expect(r2.output.some((o) => o.type === 'function_call')).toBe(true);
    const sent = server.requests[from]!.json as { input: Array<{ type?: string; call_id?: string }> };
    expect(sent.input.map((i) => i.type ?? 'message')).toEqual(['message', 'function_call', 'function_call_output']);
    expect(session.events().filter((e) => e.type === 'tool/result')).toHaveLength(1);
  });
});

describe('the input a caller builds from response.output agrees with the recording, however the turns fall', () => {
  for (const reasoning of [false, true]) {
    it(`two replies in a row (asked again after a reply without calls)${reasoning ? ', each with its reasoning item' : ''}, then a tool step: no history-diverged`, async () => {
      server.setHandler(undefined);
      const ai = withCompaction(new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }), { session: Session.inMemory(), models: MODELS });
      const input: ResponseInputItem[] = [{ role: 'user', content: 'Tell me three things.' }];
      const r = reasoning ? { reasoning: 'thinking it over' } : {};
      server.enqueue(
        { kind: 'reply', content: 'One.', ...r },
        { kind: 'reply', content: 'Two.', ...r },
        { kind: 'reply', toolCalls: [{ id: 'fc_1', name: 'read_file', arguments: '{"path":"a.ts"}' }], ...r },
        { kind: 'reply', content: 'Three.', ...r },
      );
      const texts: string[] = [];
      for (let i = 0; i < 4; i++) {
        const response = await ai.responses.create({ model: 'local-model', input, store: false });
        input.push(...(response.output as ResponseInputItem[]));
        for (const item of response.output)
          if (item.type === 'function_call') input.push({ type: 'function_call_output', call_id: item.call_id, output: 'a.ts' });
        texts.push(response.output_text);
      }
      expect(texts).toEqual(['One.', 'Two.', '', 'Three.']);
      // Each reply is one recorded assistant message, and the caller's input continues the recording.
      const replies = ai.compaction.session.events().filter((e) => e.type === 'assistant/message');
      expect(replies).toHaveLength(4);
      expect(sessionInput(ai.compaction.session).input.length).toBe(input.length);
      await ai.compaction.close();
    });
  }
});
