/**
 * xcompact/ai-sdk end to end: the real `ai` package (generateText, streamText) and the real
 * provider package `@ai-sdk/openai-compatible`, over HTTP to the local OpenAI-compatible
 * server. A scripted model calls a tool step after step; the tool really runs (AI SDK
 * execute()); the session fills past the threshold so the engine compacts in the middle of
 * the tool loop; one request is rejected with a provider's overflow 400 and recovered.
 * Every request the server received must be one a provider accepts.
 */
import { generateText, stepCountIs, streamText, ToolLoopAgent, type ModelMessage } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import type { SessionEvent } from '../../../src/session/events';
import type { ChatRequestBody } from '../../../src/testing/index';
import { checkRequests, isSummaryRequest, midLoopCompactions, OVERFLOW_AT, setup, startScript, STEPS } from '../../helpers/ai-sdk-script';

describe('xcompact/ai-sdk with @ai-sdk/openai-compatible over HTTP', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  for (const mode of ['generateText', 'streamText'] as const) {
    it(`${mode}: tools run, the engine compacts mid tool loop, an overflow is recovered, every request is valid`, async () => {
      const script = await startScript(OVERFLOW_AT);
      cleanups.push(() => script.server.close());
      const { compaction, tools } = setup(script);
      const events: string[] = [];
      compaction.engine.on((e) => events.push(`${e.type}${'trigger' in e ? `:${e.trigger}` : ''}`));
      const messages: ModelMessage[] = [{ role: 'user', content: 'Read the service log, part by part, then tell me when you are done.' }];
      const common = {
        model: compaction.model,
        system: 'You are a log analyst.',
        tools,
        stopWhen: stepCountIs(40),
        maxOutputTokens: 1024,
        maxRetries: 0,
      } as const;
      let text: string;
      let responseMessages: ModelMessage[];
      if (mode === 'generateText') {
        const r = await generateText({ ...common, messages });
        text = r.text;
        responseMessages = r.response.messages;
      } else {
        const r = streamText({ ...common, messages, onError: () => undefined });
        text = await r.text;
        responseMessages = (await r.response).messages;
      }
      expect(text).toBe(`Read ${STEPS} parts. Done.`);
      // The tools really ran, once per call, in order.
      expect(script.executed).toEqual(Array.from({ length: STEPS }, (_, i) => i));

      const log = compaction.session.events();
      expect(midLoopCompactions(log)).toBeGreaterThanOrEqual(1);
      expect(events).toContain('compaction.committed:pressure');
      expect(events).toContain('compaction.committed:overflow');
      // The overflow 400 was answered by a retry carrying a checkpoint instead of the old history.
      const agent = script.agentRequests();
      const rejected = agent[OVERFLOW_AT]!;
      const retried = agent[OVERFLOW_AT + 1]!;
      expect(JSON.stringify(retried.messages).length).toBeLessThan(JSON.stringify(rejected.messages).length);
      expect(retried.messages!.some((m) => m.role === 'user' && typeof m.content === 'string' && m.content.includes('<compacted-summary>'))).toBe(true);
      // The app's own history is untouched: the AI SDK still holds every step uncompacted.
      expect(responseMessages.filter((m) => m.role === 'tool')).toHaveLength(STEPS);
      // Usage came from each step's result.
      const replies = log.filter((e): e is SessionEvent<'assistant/message'> => e.type === 'assistant/message');
      expect(replies.every((e) => e.data.usage !== undefined && e.data.usage.promptTokens > 0)).toBe(true);
      // Every tool call has its result, by id.
      const calls = replies.flatMap((e) => e.data.content.filter((b) => b.type === 'tool-call').map((b) => (b as { id: string }).id));
      const results = log.filter((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result').map((e) => e.data.callId);
      expect(new Set(results)).toEqual(new Set(calls));
      // The summaries went through the same provider package (AiSdkSummarizer), system prompt first.
      const summaries = script.server.requests.filter((r) => isSummaryRequest(r.json as ChatRequestBody)).map((r) => r.json as ChatRequestBody);
      expect(summaries.length).toBeGreaterThanOrEqual(2);
      for (const s of summaries) expect(s.messages![0]).toEqual({ role: 'system', content: 'You are a log analyst.' });
      checkRequests(script);

      // A second turn continues the same conversation: the app appends to its history.
      const second: ModelMessage[] = [...messages, ...responseMessages, { role: 'user', content: 'Check again.' }];
      const again = await generateText({ ...common, messages: second });
      expect(again.text).toBe('Still done.');
      expect(compaction.session.openTurn).toBeNull();
      const turns = compaction.session.events().filter((e) => e.type === 'turn/start');
      expect(turns).toHaveLength(2);
      checkRequests(script);
      await compaction.close();
    });
  }

  it('ToolLoopAgent: the same one option, a compaction mid loop, every request valid', async () => {
    const script = await startScript(undefined);
    cleanups.push(() => script.server.close());
    const { compaction, tools } = setup(script);
    const agent = new ToolLoopAgent({ model: compaction.model, instructions: 'You are a log analyst.', tools, stopWhen: stepCountIs(40), maxRetries: 0 });
    const r = await agent.generate({ prompt: 'Read the service log, part by part.' });
    expect(r.text).toBe(`Read ${STEPS} parts. Done.`);
    expect(script.executed).toHaveLength(STEPS);
    expect(midLoopCompactions(compaction.session.events())).toBeGreaterThanOrEqual(1);
    checkRequests(script);
    await compaction.close();
  });
});
