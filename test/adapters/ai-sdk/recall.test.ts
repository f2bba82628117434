/**
 * Recall through the AI SDK adapter: the real `ai` package (generateText, streamText) and
 * `@ai-sdk/openai-compatible` over HTTP to the local server. The app spreads
 * `compaction.tools` into its own; the scripted model reads eight files, the session compacts,
 * the model recalls the first file by path and gets its original text back as an ordinary
 * tool result. Bad arguments come back to the model as an error result, the loop goes on.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAiSdkCompaction } from '../../../src/adapters/ai-sdk/index';
import { isCheckpoint, type SessionEvent } from '../../../src/session/events';
import { Session } from '../../../src/session/session';
import { startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../../src/testing/index';
import { openAIMessageProblems } from '../../helpers/openai-validator';
import { FILES, NEEDLE, fileBody, recallScript } from '../../helpers/recall-script';

function setup(server: LocalOpenAIServer, recall: boolean) {
  const provider = createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'test', includeUsage: true });
  const compaction = createAiSdkCompaction({
    model: provider.chatModel('scripted'),
    session: Session.inMemory(),
    contextWindow: 8_192,
    maxOutputTokens: 512,
    // Results stay whole until the compaction: the checkpoint, not a prune, is what recall brings back here.
    config: { headroomTokens: 1024, maxTokens: 512, economics: false, background: false, recall, prune: { thresholdChars: 8192 } },
  });
  const read = tool({
    description: 'Read a file.',
    inputSchema: z.object({ path: z.string() }),
    execute: async ({ path }) => fileBody(path),
  });
  return { compaction, tools: { read, ...compaction.tools } };
}

describe('xcompact/ai-sdk: the recall tool', () => {
  const servers: LocalOpenAIServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });

  for (const mode of ['generateText', 'streamText'] as const) {
    it(`${mode}: compacts, recalls a path the checkpoint only names, gets the original text`, async () => {
      const script = recallScript('read');
      const server = await startOpenAIServer({ scenarios: script.handler, defaultModel: 'scripted' });
      servers.push(server);
      const { compaction, tools } = setup(server, true);
      expect(Object.keys(compaction.tools)).toEqual(['recall']);
      const common = {
        model: compaction.model,
        system: 'You are a coding agent.',
        tools,
        stopWhen: stepCountIs(30),
        maxOutputTokens: 512,
        maxRetries: 0,
      } as const;
      const prompt = 'Read every module, then tell me the retry limit.';
      const text =
        mode === 'generateText' ? (await generateText({ ...common, prompt })).text : await streamText({ ...common, prompt, onError: () => undefined }).text;
      expect(text).toBe(`Found it: ${NEEDLE}`);

      const log = compaction.session.events();
      const checkpoint = log.filter(isCheckpoint).at(-1)!;
      const framed = (checkpoint.data as { content: Array<{ text: string }> }).content[0]!.text;
      expect(framed).toContain(FILES[0]);
      expect(framed).not.toContain(NEEDLE);
      expect(framed).toMatch(/recall \{"handle":"cp-\d+"\}/);
      expect(script.recalled).toHaveLength(1);
      expect(script.recalled[0]).toContain(fileBody(FILES[0]!));
      const result = log.find((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result' && e.data.toolName === 'recall')!;
      expect((result.data.content[0] as { text: string }).text).toBe(script.recalled[0]);
      for (const r of server.requests.filter((x) => x.path === '/v1/chat/completions')) {
        expect(openAIMessageProblems((r.json as ChatRequestBody).messages ?? [])).toEqual([]);
      }
      await compaction.close();
    });
  }

  it('bad arguments: an error result the model reads, the loop goes on, the log keeps only that result', async () => {
    let step = 0;
    const server = await startOpenAIServer({
      scenarios: (req) => {
        const messages = req.body.messages ?? [];
        if (step++ === 0) return { kind: 'reply', toolCalls: [{ id: 'bad', name: 'recall', arguments: JSON.stringify({ query: '([unclosed', regex: true }) }] };
        const last = messages[messages.length - 1]!;
        return { kind: 'reply', content: `model read: ${typeof last.content === 'string' ? last.content : JSON.stringify(last.content)}` };
      },
      defaultModel: 'scripted',
    });
    servers.push(server);
    const { compaction, tools } = setup(server, true);
    const r = await generateText({ model: compaction.model, tools, stopWhen: stepCountIs(5), prompt: 'Find it.', maxRetries: 0 });
    expect(r.text).toMatch(/^model read: recall error: query is not a regular expression recall can run/);
    const result = compaction.session.events().find((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result')!;
    expect(result.data.isError).toBe(true);
    await compaction.close();
  });

  it('recall off: no tool is offered', async () => {
    const server = await startOpenAIServer({ defaultModel: 'scripted' });
    servers.push(server);
    const { compaction } = setup(server, false);
    expect(compaction.tools).toEqual({});
    await compaction.close();
  });
});
