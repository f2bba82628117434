/**
 * xcompact/ai-sdk with `ai` 7 (installed here under the alias `ai7`; the other AI SDK tests use
 * `ai` 6) and its provider line `@ai-sdk/openai-compatible` 3 (alias `ai-sdk-openai-compatible3`),
 * over HTTP to the local OpenAI-compatible server: the same tool loop as test/adapters/ai-sdk/adapter.test.ts
 * (a compaction mid loop, an overflow recovered, every request valid), with a spec v4 model,
 * with a spec v3 model under ai 7, and through ai 7's `wrapLanguageModel`; images both ways.
 *
 * The adapter imports `ai` (the summarizer's generateText, the APICallError it reads): here that
 * specifier is the real ai 7 package (vi.mock below), as in an app that installed ai 7.
 *
 * ai 7 requires Node 22 or newer: on older Node these tests are skipped (reported as skipped,
 * with the reason in the title); CI runs them in its Node 22, 24 and 26 legs, with
 * XCOMPACT_EXPECT_AI7=1 so that a leg where they do not run fails.
 */
import type { LanguageModelV3 } from '@ai-sdk/provider';
import type * as Ai7 from 'ai7';
import type * as OpenAICompatible3 from 'ai-sdk-openai-compatible3';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { AiSdkAdapterError, createAiSdkCompaction, type AiSdkCompaction, type AiSdkLanguageModel } from '../../../src/adapters/ai-sdk/index';
import type { SessionEvent } from '../../../src/session/events';
import { Session } from '../../../src/session/session';
import { startOpenAIServer, type ChatRequestBody } from '../../../src/testing/index';
import { checkRequests, chunk, isSummaryRequest, midLoopCompactions, OVERFLOW_AT, startScript, STEPS, WINDOW, type Script } from '../../helpers/ai-sdk-script';
import { openAIMessageProblems } from '../../helpers/openai-validator';

vi.mock('ai', async (importOriginal) => (Number(process.versions.node.split('.')[0]) >= 22 ? await import('ai7') : await importOriginal()));

const NODE_MAJOR = Number(process.versions.node.split('.')[0]);
const SUPPORTED = NODE_MAJOR >= 22;

it.runIf(process.env.XCOMPACT_EXPECT_AI7 === '1')('runs the ai 7 tests where CI expects them (Node 22+)', () => {
  expect(SUPPORTED, `ai 7 needs Node 22+, this is ${process.version}`).toBe(true);
});

describe.skipIf(!SUPPORTED)(`xcompact/ai-sdk with ai 7 (skipped below Node 22, which ai 7 requires; this is ${process.version})`, () => {
  let ai: typeof Ai7;
  let oc3: typeof OpenAICompatible3;
  let oc2: typeof import('@ai-sdk/openai-compatible');
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  beforeAll(async () => {
    ai = await import('ai7');
    oc3 = await import('ai-sdk-openai-compatible3');
    oc2 = await import('@ai-sdk/openai-compatible');
  });

  /** The helper's read_log tool, made by ai 7's `tool` (its types are ai 7's). */
  const readLog = (executed: number[]) =>
    ai.tool({
      description: 'Read one part of the service log.',
      inputSchema: z.object({ part: z.number().int() }),
      execute: async ({ part }) => {
        executed.push(part);
        return chunk(part);
      },
    });
  const v4Model = (baseURL: string, id = 'scripted') =>
    oc3.createOpenAICompatible({ name: 'local', baseURL, apiKey: 'test', includeUsage: true }).chatModel(id);
  const v3Model = (baseURL: string, id = 'scripted') =>
    oc2.createOpenAICompatible({ name: 'local', baseURL, apiKey: 'test', includeUsage: true }).chatModel(id);
  const compactionOver = <M extends AiSdkLanguageModel>(model: M): AiSdkCompaction<M> =>
    createAiSdkCompaction({
      model,
      session: Session.inMemory(),
      contextWindow: WINDOW,
      maxOutputTokens: 1024,
      config: { headroomTokens: 2048, maxTokens: 1024 },
    });

  it('the adapter runs on ai 7 here, with a spec v4 model from @ai-sdk/openai-compatible 3', async () => {
    expect((await import('ai')).generateText).toBe(ai.generateText);
    const compaction = compactionOver(v4Model('http://127.0.0.1:9/v1'));
    expect(compaction.model.specificationVersion).toBe('v4');
    expect(compaction.model.provider).toBe('local.chat');
  });

  /** The tool loop of test/adapters/ai-sdk/adapter.test.ts, on ai 7, with the model the loop is given. */
  async function toolLoop(
    script: Script,
    model: Parameters<typeof Ai7.generateText>[0]['model'],
    mode: 'generateText' | 'streamText',
    session: Session,
  ): Promise<void> {
    const messages: Ai7.ModelMessage[] = [{ role: 'user', content: 'Read the service log, part by part, then tell me when you are done.' }];
    const common = {
      model,
      system: 'You are a log analyst.',
      tools: { read_log: readLog(script.executed) },
      stopWhen: ai.stepCountIs(40),
      maxOutputTokens: 1024,
      maxRetries: 0,
    } as const;
    let text: string;
    let responseMessages: Ai7.ModelMessage[];
    if (mode === 'generateText') {
      const r = await ai.generateText({ ...common, messages });
      text = r.text;
      responseMessages = r.responseMessages; // ai 7: every step's (its response.messages are the last step's)
    } else {
      const r = ai.streamText({ ...common, messages, onError: () => undefined });
      text = await r.text;
      responseMessages = await r.responseMessages;
    }
    expect(text).toBe(`Read ${STEPS} parts. Done.`);
    expect(script.executed).toEqual(Array.from({ length: STEPS }, (_, i) => i));
    const log = session.events();
    expect(midLoopCompactions(log)).toBeGreaterThanOrEqual(1);
    // The overflow 400 (ai 7's APICallError) was answered by a retry carrying a checkpoint.
    const agent = script.agentRequests();
    expect(JSON.stringify(agent[OVERFLOW_AT + 1]!.messages).length).toBeLessThan(JSON.stringify(agent[OVERFLOW_AT]!.messages).length);
    expect(agent[OVERFLOW_AT + 1]!.messages!.some((m) => m.role === 'user' && typeof m.content === 'string' && m.content.includes('<compacted-summary>'))).toBe(
      true,
    );
    expect(responseMessages.filter((m) => m.role === 'tool')).toHaveLength(STEPS);
    const replies = log.filter((e): e is SessionEvent<'assistant/message'> => e.type === 'assistant/message');
    expect(replies.every((e) => e.data.usage !== undefined && e.data.usage.promptTokens > 0)).toBe(true);
    // The summaries went through ai 7's generateText over the same provider, system prompt first.
    const summaries = script.server.requests.filter((r) => isSummaryRequest(r.json as ChatRequestBody)).map((r) => r.json as ChatRequestBody);
    expect(summaries.length).toBeGreaterThanOrEqual(2);
    for (const s of summaries) expect(s.messages![0]).toEqual({ role: 'system', content: 'You are a log analyst.' });
    checkRequests(script);

    const again = await ai.generateText({ ...common, messages: [...messages, ...responseMessages, { role: 'user', content: 'Check again.' }] });
    expect(again.text).toBe('Still done.');
    expect(session.openTurn).toBeNull();
    expect(session.events().filter((e) => e.type === 'turn/start')).toHaveLength(2);
    checkRequests(script);
  }

  for (const mode of ['generateText', 'streamText'] as const) {
    it(`${mode}, a v4 model: tools run, the engine compacts mid tool loop, an overflow is recovered, every request is valid`, async () => {
      const script = await startScript(OVERFLOW_AT);
      cleanups.push(() => script.server.close());
      const compaction = compactionOver(v4Model(script.server.baseURL));
      const events: string[] = [];
      compaction.engine.on((e) => events.push(`${e.type}${'trigger' in e ? `:${e.trigger}` : ''}`));
      await toolLoop(script, compaction.model, mode, compaction.session);
      expect(events).toContain('compaction.committed:pressure');
      expect(events).toContain('compaction.committed:overflow');
      await compaction.close();
    });
  }

  it('a spec v3 model (@ai-sdk/openai-compatible 2) under ai 7: the same loop', async () => {
    const script = await startScript(OVERFLOW_AT);
    cleanups.push(() => script.server.close());
    const compaction = compactionOver(v3Model(script.server.baseURL));
    expect(compaction.model.specificationVersion).toBe('v3');
    await toolLoop(script, compaction.model, 'generateText', compaction.session);
    await compaction.close();
  });

  it("the middleware in ai 7's wrapLanguageModel over a v3 model (ai 7 hands it v4 calls): the same loop", async () => {
    const script = await startScript(OVERFLOW_AT);
    cleanups.push(() => script.server.close());
    const base = v3Model(script.server.baseURL);
    const compaction = compactionOver(base);
    const wrapped = ai.wrapLanguageModel({ model: base, middleware: compaction.middleware });
    expect(wrapped.specificationVersion).toBe('v4');
    await toolLoop(script, wrapped, 'streamText', compaction.session);
    await compaction.close();
  });

  it('ToolLoopAgent of ai 7: the same one option, a compaction mid loop, every request valid', async () => {
    const script = await startScript(undefined);
    cleanups.push(() => script.server.close());
    const compaction = compactionOver(v4Model(script.server.baseURL));
    const agent = new ai.ToolLoopAgent({
      model: compaction.model,
      instructions: 'You are a log analyst.',
      tools: { read_log: readLog(script.executed) },
      stopWhen: ai.stepCountIs(40),
      maxRetries: 0,
    });
    const r = await agent.generate({ prompt: 'Read the service log, part by part.' });
    expect(r.text).toBe(`Read ${STEPS} parts. Done.`);
    expect(midLoopCompactions(compaction.session.events())).toBeGreaterThanOrEqual(1);
    checkRequests(script);
    await compaction.close();
  });

  describe('images and refusals in spec v4 form (files wrapped as { type, data | url })', () => {
    // 1×1 PNG.
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

    it('a user image and a tool result image are recorded as images and sent back in the next request', async () => {
      const server = await startOpenAIServer({ defaultModel: 'm' });
      cleanups.push(() => server.close());
      const compaction = compactionOver(v4Model(server.baseURL, 'm'));
      server.enqueue({ kind: 'reply', toolCalls: [{ id: 'c1', name: 'screenshot', arguments: '{}' }] });
      server.enqueue({ kind: 'reply', content: 'A white pixel.' });
      const screenshot = ai.tool({
        inputSchema: z.object({}),
        execute: async () => 'taken',
        toModelOutput: () => ({
          type: 'content',
          value: [
            { type: 'text', text: 'the screen:' },
            { type: 'image-data', data: png, mediaType: 'image/png' },
          ],
        }),
      });
      const r = await ai.generateText({
        model: compaction.model,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is this?' },
              { type: 'image', image: Buffer.from(png, 'base64'), mediaType: 'image/png' },
            ],
          },
        ],
        tools: { screenshot },
        stopWhen: ai.stepCountIs(3),
        maxRetries: 0,
      });
      expect(r.text).toBe('A white pixel.');
      const log = compaction.session.events();
      const user = log.find((e): e is SessionEvent<'user/message'> => e.type === 'user/message')!;
      expect(user.data.content).toEqual([
        { type: 'text', text: 'What is this?' },
        { type: 'image', url: `data:image/png;base64,${png}` },
      ]);
      const result = log.find((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result')!;
      expect(result.data.content).toEqual([
        { type: 'text', text: 'the screen:' },
        { type: 'image', url: `data:image/png;base64,${png}` },
      ]);
      // The second request, built from the session in v4 form: the user's image as image_url, the tool's image kept.
      const second = server.requests.at(-1)!.json as ChatRequestBody;
      expect(openAIMessageProblems(second.messages ?? [])).toEqual([]);
      const firstUser = second.messages!.find((m) => m.role === 'user')!;
      expect(firstUser.content).toEqual([
        { type: 'text', text: 'What is this?' },
        { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
      ]);
      expect(JSON.stringify(second.messages!.find((m) => m.role === 'tool'))).toContain(png);
      await compaction.close();
    });

    it('a PDF in a user message: unmappable-part naming the media type; nothing recorded, nothing sent', async () => {
      const server = await startOpenAIServer({ defaultModel: 'm' });
      cleanups.push(() => server.close());
      const compaction = compactionOver(v4Model(server.baseURL, 'm'));
      const err = await ai
        .generateText({
          model: compaction.model,
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'Summarise this.' },
                { type: 'file', data: Buffer.from('%PDF-1.4'), mediaType: 'application/pdf' },
              ],
            },
          ],
          maxRetries: 0,
        })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AiSdkAdapterError);
      expect((err as AiSdkAdapterError).code).toBe('unmappable-part');
      expect((err as Error).message).toMatch(/application\/pdf/);
      expect(compaction.session.length).toBe(0);
      expect(server.requests).toHaveLength(0);
    });
  });
});
