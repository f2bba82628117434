/**
 * The model-free last resort (docs/reliability.md): a summarizer that always fails never lets a request
 * go over the window. The drop-in over the project's server (the real openai SDK over HTTP),
 * the server behaving like `llama-server -c 6000` (a prompt that reaches the window is refused
 * 400), and every summary answered 500. Counted on the server's side: each conversation
 * request's prompt (the server's own estimate) plus its max_tokens against the window.
 */
import OpenAI from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Session, recallTool, withCompaction } from '../../src/index';
import { parseHandle } from '../../src/services/recall';
import { estimatePromptTokens, startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer, type Scenario } from '../../src/testing/index';

const WINDOW = 6_000;
const MAX_TOKENS = 256;
const STEPS = 200;
const TOOLS: ChatCompletionTool[] = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } },
];

const isSummary = (body: ChatRequestBody | undefined): boolean => {
  const last = body?.messages?.at(-1);
  return last?.role === 'user' && typeof last.content === 'string' && last.content.startsWith('You are now acting as a compaction engine');
};
const SERVER_ERROR: Scenario = {
  kind: 'status',
  status: 500,
  body: { error: { message: 'The server had an error', type: 'server_error', param: null, code: null } },
};

/** A model that reads one file per step; every summary request is answered 500. */
function handler(): (req: { body: ChatRequestBody }) => Scenario {
  let n = 0;
  return ({ body }) => {
    if (isSummary(body)) return SERVER_ERROR;
    n++;
    return {
      kind: 'reply',
      content: `Reading the next file (${n}).`,
      toolCalls: [{ id: `call_${n}`, name: 'read_file', arguments: JSON.stringify({ path: `src/mod${n}.ts` }) }],
    };
  };
}

const fileText = (path: string, i: number) => `// ${path}\n` + `export const value${i} = ${JSON.stringify(path)}; // marker-${i} line\n`.repeat(12);

let server: LocalOpenAIServer;
beforeAll(async () => {
  server = await startOpenAIServer({ contextWindow: WINDOW, scenarios: handler() });
});
afterAll(async () => {
  await server.close();
});

describe('a summarizer that always fails (docs/reliability.md)', () => {
  it(`a ${STEPS}-step loop in a ${WINDOW}-token window: no request over the window, every relief a truncation checkpoint in the log, recall brings the turns back`, async () => {
    const session = Session.inMemory();
    const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
    const ai = withCompaction(client, {
      session,
      models: { 'local-model': { contextWindow: WINDOW, maxOutputTokens: MAX_TOKENS } },
      config: { recall: true, background: false },
    });
    const notes: string[] = [];
    ai.compaction.engine.on((e) => notes.push(e.type));
    const messages: ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You are a careful code reader.' },
      { role: 'user', content: 'Read every module under src/, one at a time, and keep a note of the exports.' },
    ];
    const from = server.requests.length;
    for (let step = 1; step <= STEPS; step++) {
      // A new instruction of the user's every 50 steps: their words are what a checkpoint keeps first.
      if (step % 50 === 0) messages.push({ role: 'user', content: `Now also note which modules mention marker-${step}.` });
      const reply = await ai.chat.completions.create({ model: 'local-model', messages, tools: TOOLS, max_tokens: MAX_TOKENS });
      const message = reply.choices[0]!.message;
      messages.push(message);
      for (const call of message.tool_calls ?? []) {
        if (call.type !== 'function') continue;
        const { path } = JSON.parse(call.function.arguments) as { path: string };
        messages.push({ role: 'tool', tool_call_id: call.id, content: fileText(path, step) });
      }
    }

    const sent = server.requests.slice(from).filter((r) => r.path.endsWith('/chat/completions'));
    const conversation = sent.filter((r) => !isSummary(r.json as ChatRequestBody));
    const summaries = sent.filter((r) => isSummary(r.json as ChatRequestBody));
    // Every step got its answer: no request was refused, none retried.
    expect(conversation).toHaveLength(STEPS);
    expect(conversation.every((r) => r.scenario === 'reply')).toBe(true);
    // The server's own count: prompt + max_tokens within the window, for every request.
    const sizes = conversation.map((r) => estimatePromptTokens(r.json as ChatRequestBody) + MAX_TOKENS);
    const maxRatio = Math.max(...sizes) / WINDOW;
    expect(maxRatio).toBeLessThanOrEqual(1);

    // The log: the summaries failed (each a closed bracket with its error), and every relief was a
    // truncation checkpoint bracketed like any other.
    const log = session.events();
    const truncations = log.filter((e) => e.type === 'compaction/summary' && e.data.truncation !== undefined);
    const summariesCommitted = log.filter((e) => e.type === 'compaction/summary' && e.data.truncation === undefined);
    expect(summariesCommitted).toHaveLength(0);
    expect(truncations.length).toBeGreaterThan(3);
    // Once the breaker opened, no summary was asked for: the truncations outnumber the failed summaries.
    expect(notes).toContain('breaker.opened');
    expect(truncations.filter((e) => e.type === 'compaction/summary' && e.data.truncation!.reason === 'breaker-open').length).toBeGreaterThan(0);
    expect(summaries.length).toBeLessThan(truncations.length);
    for (const t of truncations) {
      const at = log.indexOf(t);
      expect(log[at - 1]!.type).toBe('compaction/start');
      expect(log[at + 1]).toMatchObject({ type: 'user/message', surfaceOp: { op: 'replace' } });
      expect(log[at + 2]!.type).toBe('compaction/end');
      expect(log[at + 2]).not.toHaveProperty(['data', 'error']);
      // The checkpoint is the ledger alone: no model prose.
      const text = t.type === 'compaction/summary' ? t.data.summary : '';
      expect(text).toMatch(/^\[Truncated without a summary/);
      expect(text).toMatch(/<read-files>|<user-messages>/);
    }
    // The user's words survive every truncation: the last request still carries each instruction.
    const lastSent = JSON.stringify((conversation.at(-1)!.json as ChatRequestBody).messages);
    expect(lastSent).toContain('Read every module under src/');
    for (let step = 50; step < STEPS; step += 50) expect(lastSent).toContain(`marker-${step}.`);
    expect(session.lock.held).toBe(false);

    // Recall brings a truncated span back by the handle its checkpoint names.
    const checkpoint = session
      .deriveMessages()
      .find((m) => m.role === 'user' && typeof m.content === 'string' && m.content.includes('[Truncated without a summary'));
    const handle = /\bcp-\d+\b/.exec(String(checkpoint?.content))?.[0];
    expect(handle && parseHandle(handle)).toBeTruthy();
    const recalled = recallTool(session).run({ handle });
    expect(recalled.isError).toBeFalsy();
    expect(recalled.text).toContain('marker-');

    console.log(
      `[fallback] ${conversation.length} requests, max (prompt + max_tokens) / window = ${maxRatio.toFixed(3)}, ` +
        `${truncations.length} truncation checkpoints, ${summaries.length} summary requests (all 500)`,
    );
    await ai.compaction.close();
  });
});
