/**
 * The agent never stops for a request that can be made to fit (docs/spec.md#19-the-request-fits),
 * on every face, streamed and not: in a 4,096-token window one step reads five files of about a
 * thousand tokens each, more than the window holds. The request is sent anyway, under the window
 * (the server, llama.cpp-like, answers 400 to any prompt that reaches it): the newest results
 * are cut, head and tail kept, each cut recorded as a prune, and the whole text is recallable by
 * the handle its marker names.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimatePromptTokens } from '../../../src/testing/responses';
import { Session, recallTool } from '../../../src/index';
import { chatBodyOf, startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../../src/testing/index';
import { FACES, openFace } from '../../helpers/faces';

const WINDOW = 4_096;
const FILES = 5;
let server: LocalOpenAIServer;

/** About 1,100 o200k tokens of code, distinct per file. */
const fileText = (path: string) =>
  Array.from({ length: 64 }, (_, i) => `export const ${path.replace(/\W/g, '_')}_${i} = compute(${i * 37}, "${path}:${i}"); // line ${i}`).join('\n');

const isSummary = (body: ChatRequestBody) => {
  const last = body.messages?.at(-1);
  return last?.role === 'user' && typeof last.content === 'string' && last.content.includes('You are now acting as a compaction engine');
};

let turns = 0;
beforeAll(async () => {
  server = await startOpenAIServer({
    contextWindow: WINDOW,
    scenarios: ({ body }) => {
      if (isSummary(body)) return { kind: 'reply', content: '## Primary Request and Intent\n- read the files' };
      const last = body.messages?.at(-1);
      if (last?.role === 'tool') return { kind: 'reply', content: `Read ${FILES} files.` };
      const t = turns++;
      return {
        kind: 'reply',
        toolCalls: Array.from({ length: FILES }, (_, i) => ({ id: `call_${t}_${i}`, name: 'read_file', arguments: JSON.stringify({ path: `src/f${i}.ts` }) })),
      };
    },
  });
});
afterAll(() => server.close());

/** Every agent request the server received since `from`, as the prompt tokens it counted. */
function agentPrompts(from: number): number[] {
  return server.requests.slice(from).flatMap((r) => {
    const shape = r.path === '/v1/responses' ? 'responses' : r.path === '/v1/messages' ? 'messages' : r.path === '/v1/chat/completions' ? 'chat' : undefined;
    if (!shape || r.json === undefined) return [];
    const body = shape === 'chat' ? (r.json as ChatRequestBody) : chatBodyOf(shape, r.json as Record<string, unknown>);
    return isSummary(body) ? [] : [estimatePromptTokens(body)];
  });
}

describe('a step whose tool results alone outgrow the window is cut to fit, on every face', () => {
  for (const face of FACES) {
    for (const stream of [false, true]) {
      it(`${face}, ${stream ? 'streamed' : 'not streamed'}: sent under the window, the cuts recorded and recallable`, async () => {
        const session = Session.inMemory();
        const from = server.requests.length;
        const loop = openFace(face, {
          url: server.url,
          model: 'local-model',
          session,
          models: { 'local-model': { contextWindow: WINDOW } },
          config: { recall: true },
          stream,
          runTool: (_name, args) => fileText((args as { path: string }).path),
        });
        expect(await loop.turn('Read the five files.')).toBe(`Read ${FILES} files.`);
        const prompts = agentPrompts(from);
        expect(prompts.length).toBe(2);
        // Under the window, with room for the reply.
        for (const p of prompts) expect(p).toBeLessThan(WINDOW);
        // The cuts are prunes: the original results stay in the log, each replaced by head + marker + tail.
        const prunes = session.events().filter((e) => e.type === 'compaction/prune');
        expect(prunes.length).toBeGreaterThan(0);
        const replaced = session.events().filter((e) => e.type === 'tool/result' && e.surfaceOp !== 'append');
        const marker = /pruned by xcompact; recall handle (pr-\d+)/;
        const cut = replaced.find((e) => marker.test(JSON.stringify(e.data)))!;
        expect(cut).toBeDefined();
        const handle = marker.exec(JSON.stringify(cut.data))![1]!;
        const original = session
          .events()
          .find((e) => e.type === 'tool/result' && e.surfaceOp === 'append' && e.data.callId === (cut.data as { callId: string }).callId)!;
        const text = (original.data as { content: Array<{ text: string }> }).content[0]!.text;
        expect(text.length).toBeGreaterThan(3_000);
        // The head and the tail are the original's.
        const kept = (cut.data as { content: Array<{ text: string }> }).content[0]!.text;
        expect(text.startsWith(kept.slice(0, 200))).toBe(true);
        expect(text.endsWith(kept.slice(-40))).toBe(true);
        expect(recallTool(session).run({ handle }).text).toContain(text);
        await loop.close();
      });
    }
  }
});

describe('only a request no cut can fit is refused, before anything is written', () => {
  it('pruning off: the same step is refused with a BudgetError that names prune.enabled; nothing is sent', async () => {
    const session = Session.inMemory();
    const loop = openFace('chat', {
      url: server.url,
      model: 'local-model',
      session,
      models: { 'local-model': { contextWindow: WINDOW } },
      config: { prune: { enabled: false } },
      stream: false,
      runTool: (_name, args) => fileText((args as { path: string }).path),
    });
    const from = server.requests.length;
    const err = await loop.turn('Read the five files.').catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'BudgetError', code: 'request-over-window' });
    expect((err as Error).message).toMatch(/prune\.enabled: false/);
    // The first request (the prompt) went out; the one with the results did not.
    expect(agentPrompts(from)).toHaveLength(1);
    expect(session.events().some((e) => e.type === 'compaction/prune')).toBe(false);
    await loop.close();
  });

  it('a user message that alone outgrows the window: refused before it is recorded, with what to do', async () => {
    const session = Session.inMemory();
    const loop = openFace('chat', {
      url: server.url,
      model: 'local-model',
      session,
      models: { 'local-model': { contextWindow: WINDOW } },
      stream: false,
      runTool: () => 'ok',
    });
    const from = server.requests.length;
    const err = await loop.turn(fileText('huge').repeat(4)).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'BudgetError', code: 'request-over-window' });
    expect((err as Error).message).toMatch(/the newest user message \d+ tokens.*Send the long text in parts.*Nothing was recorded or sent/);
    expect(session.length).toBe(0);
    expect(agentPrompts(from)).toHaveLength(0);
    await loop.close();
  });
});
