/**
 * xcompact/ai-sdk after a restart, from the session alone: the app kept no `ModelMessage[]`;
 * `compaction.messages()` gives them back, and a prompt continuing them is accepted (also after
 * a compaction shadowed part of them).
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, streamText, tool, type ModelMessage } from 'ai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAiSdkCompaction, sessionModelMessages } from '../../../src/adapters/ai-sdk/index';
import { JsonlStore, Session } from '../../../src/index';
import { startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../../src/testing/index';
import { adapterError } from '../../helpers/ai-sdk-script';

let server: LocalOpenAIServer;
let dir: string;
beforeAll(async () => {
  server = await startOpenAIServer({ defaultModel: 'm' });
  dir = mkdtempSync(join(tmpdir(), 'xcompact-ai-sdk-restart-'));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const provider = () => createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'test', includeUsage: true });
const tools = { look: tool({ inputSchema: z.object({ at: z.string() }), execute: async ({ at }) => `a tidy ${at}` }) };
const open = async (id: string) => {
  const session = await Session.open(new JsonlStore(dir), id);
  return createAiSdkCompaction({ model: provider().chatModel('m'), session, contextWindow: 32_000 });
};

describe('xcompact/ai-sdk: a restarted process continues from the session alone', () => {
  it('compaction.messages() gives back the ModelMessage[] the app had; a prompt continuing them is accepted, nothing recorded twice', async () => {
    const first = await open('alone');
    server.enqueue({ kind: 'reply', toolCalls: [{ id: 'r1', name: 'look', arguments: '{"at":"room"}' }] }, { kind: 'reply', content: 'Tidy.' });
    const history: ModelMessage[] = [{ role: 'user', content: 'look around' }];
    const r1 = await generateText({ model: first.model, system: 'sys', messages: history, tools, stopWhen: stepCountIs(3), maxRetries: 0 });
    history.push(...r1.response.messages);
    await first.close();
    await first.session.close();

    // The new process kept nothing but the session id.
    const second = await open('alone');
    const restored = second.messages();
    expect(restored.map((m) => m.role)).toEqual(history.map((m) => m.role));
    expect(restored[1]).toMatchObject({ role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'r1', toolName: 'look', input: { at: 'room' } }] });
    expect(restored[2]).toMatchObject({
      role: 'tool',
      content: [{ type: 'tool-result', toolCallId: 'r1', toolName: 'look', output: { type: 'text', value: 'a tidy room' } }],
    });
    expect(sessionModelMessages(second.session)).toEqual(restored);

    // Without them the prompt does not continue the recording: refused, nothing written.
    const recorded = second.session.length;
    await adapterError(
      generateText({ model: second.model, system: 'sys', messages: [{ role: 'user', content: 'and now?' }], maxRetries: 0 }),
      'history-diverged',
      /message 0 differs/,
    );
    expect(second.session.length).toBe(recorded);

    server.enqueue({ kind: 'reply', content: 'Still tidy.' });
    const sent = server.requests.length;
    const r2 = streamText({ model: second.model, system: 'sys', messages: [...restored, { role: 'user', content: 'and now?' }], tools, maxRetries: 0 });
    expect(await r2.text).toBe('Still tidy.');
    const body = server.requests[sent]!.json as ChatRequestBody;
    expect(body.messages!.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'user']);
    const log = second.session.events();
    expect(log.filter((e) => e.type === 'user/message')).toHaveLength(2);
    expect(log.filter((e) => e.type === 'assistant/message')).toHaveLength(3);
    await second.close();
    await second.session.close();
  });

  it('after a compaction the restored messages are still the whole conversation (the checkpoint only shadows them)', async () => {
    const first = await open('compacted');
    const history: ModelMessage[] = [];
    for (const q of ['first', 'second', 'third', 'fourth']) {
      history.push({ role: 'user', content: `${q} question ${'and some detail '.repeat(40)}` });
      server.enqueue({ kind: 'reply', content: `The ${q} answer, ${'with reasons '.repeat(40)}` });
      const r = await generateText({ model: first.model, system: 'sys', messages: history, maxRetries: 0 });
      history.push(...r.response.messages);
    }
    server.enqueue({ kind: 'reply', content: '## Primary Request and Intent\n- four questions' });
    expect(await first.engine.compactNow()).not.toBeNull();
    await first.close();
    await first.session.close();

    const second = await open('compacted');
    const restored = second.messages();
    expect(restored).toHaveLength(8);
    expect(restored[0]).toEqual({ role: 'user', content: [{ type: 'text', text: (history[0] as { content: string }).content }] });
    expect(restored[7]).toEqual({ role: 'assistant', content: [{ type: 'text', text: `The fourth answer, ${'with reasons '.repeat(40)}` }] });
    server.enqueue({ kind: 'reply', content: 'Three.' });
    const sent = server.requests.length;
    const r3 = await generateText({ model: second.model, system: 'sys', messages: [...restored, { role: 'user', content: 'fifth' }], maxRetries: 0 });
    expect(r3.text).toBe('Three.');
    // What went out is the compacted conversation: the checkpoint, the kept tail, the new question.
    const body = server.requests[sent]!.json as ChatRequestBody;
    expect(JSON.stringify(body.messages)).toContain('<compacted-summary>');
    expect(body.messages!.at(-1)).toEqual({ role: 'user', content: 'fifth' });
    await second.close();
    await second.session.close();
  });

  for (const carry of ['without', 'with'] as const) {
    it(`a turn stopWhen ended on a tool step: the next turn of the documented loop goes on, ${carry} the ended turn's results`, async () => {
      const ai = await open(`stopped-${carry}`);
      server.enqueue({ kind: 'reply', toolCalls: [{ id: `s_${carry}`, name: 'look', arguments: '{"at":"desk"}' }] });
      // One step: the tool runs, but no model call carries its result to the adapter.
      const r1 = await generateText({
        model: ai.model,
        messages: [...ai.messages(), { role: 'user', content: 'look at the desk' }],
        tools,
        stopWhen: stepCountIs(1),
        maxRetries: 0,
      });
      expect(r1.toolResults).toHaveLength(1);
      expect(ai.session.surface.pendingCalls()).toEqual([`s_${carry}`]);
      server.enqueue({ kind: 'reply', content: 'It is tidy.' });
      const sent = server.requests.length;
      const next = carry === 'with' ? ai.messages({ results: r1.response.messages }) : ai.messages();
      const r2 = await generateText({ model: ai.model, messages: [...next, { role: 'user', content: 'and?' }], tools, maxRetries: 0 });
      expect(r2.text).toBe('It is tidy.');
      // The call went out answered: with the tool's own result, or with the note that none was recorded.
      const body = server.requests[sent]!.json as ChatRequestBody;
      const result = body.messages!.find((m) => m.role === 'tool')!;
      expect(result.content).toContain(carry === 'with' ? 'a tidy desk' : 'No result was recorded');
      expect(ai.session.surface.pendingCalls()).toEqual([]);
      // And the turn after that goes on the same way.
      server.enqueue({ kind: 'reply', content: 'Still tidy.' });
      expect((await generateText({ model: ai.model, messages: [...ai.messages(), { role: 'user', content: 'now?' }], maxRetries: 0 })).text).toBe(
        'Still tidy.',
      );
      await ai.close();
      await ai.session.close();
    });
  }
});
