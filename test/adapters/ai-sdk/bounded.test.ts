/**
 * The AI SDK adapter's default summarizer is bounded by the model's window, end to end: the
 * real `ai` package and `@ai-sdk/openai-compatible` over HTTP to the local server, which
 * behaves like llama.cpp with a small window (it rejects any prompt that reaches the window).
 * A conversation recorded with a large-window model continues on a small-window one; its
 * first request overflows, and recovery must condense a span larger than the whole window:
 * the summary goes out in chunks, every request within the window.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, type ModelMessage } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { createAiSdkCompaction } from '../../../src/adapters/ai-sdk/index';
import type { EngineNotification } from '../../../src/engine/facade';
import { getTokenizer } from '../../../src/services/metering';
import { Session } from '../../../src/session/session';
import { estimatePromptTokens, startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer, type Scenario } from '../../../src/testing/index';
import { isSummaryRequest, readLog, STEPS } from '../../helpers/ai-sdk-script';
import { openAIMessageProblems } from '../../helpers/openai-validator';

const SMALL_WINDOW = 6144;
const MAX_OUTPUT = 512;

/** Reads STEPS log parts, then answers; a summary request gets a short summary. */
function reader(): (req: { body: ChatRequestBody }) => Scenario {
  let part = 0;
  return ({ body }) => {
    if (isSummaryRequest(body)) return { kind: 'reply', content: 'Summary: log parts read so far; workers handle requests in under 113 ms.' };
    const last = body.messages?.[body.messages.length - 1];
    if (last?.role === 'user' && typeof last.content === 'string' && last.content.includes('again')) return { kind: 'reply', content: 'Still done.' };
    if (part >= STEPS) return { kind: 'reply', content: `Read ${STEPS} parts. Done.` };
    const n = part++;
    return { kind: 'reply', toolCalls: [{ id: `call_${n}`, name: 'read_log', arguments: JSON.stringify({ part: n }) }] };
  };
}

describe('xcompact/ai-sdk: the default summarizer is bounded by the window', () => {
  const servers: LocalOpenAIServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });

  it('a span larger than the window is summarized in chunks over HTTP, every request within the window', async () => {
    const big = await startOpenAIServer({ scenarios: reader(), defaultModel: 'scripted' });
    const small = await startOpenAIServer({ scenarios: reader(), defaultModel: 'scripted', contextWindow: SMALL_WINDOW });
    servers.push(big, small);
    const session = Session.inMemory();
    const executed: number[] = [];
    const tools = { read_log: readLog(executed) };
    const common = { system: 'You are a log analyst.', tools, stopWhen: stepCountIs(40), maxOutputTokens: MAX_OUTPUT, maxRetries: 0 } as const;

    // 1. A long conversation with a 128k model: nothing to compact.
    const first = createAiSdkCompaction({
      model: createOpenAICompatible({ name: 'big', baseURL: big.baseURL, apiKey: 'test', includeUsage: true }).chatModel('scripted'),
      session,
      contextWindow: 131_072,
      maxOutputTokens: MAX_OUTPUT,
    });
    const messages: ModelMessage[] = [{ role: 'user', content: 'Read the service log, part by part, then tell me when you are done.' }];
    const r1 = await generateText({ ...common, model: first.model, messages });
    expect(r1.text).toBe(`Read ${STEPS} parts. Done.`);
    await first.close();
    const o200k = getTokenizer('o200k_base');
    const historyTokens = session
      .deriveMessages()
      .reduce((n, m) => n + o200k.count(typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? '')), 0);
    expect(historyTokens).toBeGreaterThan(2 * SMALL_WINDOW);

    // 2. The same conversation continues on a model with a 6k window.
    const second = createAiSdkCompaction({
      model: createOpenAICompatible({ name: 'small', baseURL: small.baseURL, apiKey: 'test', includeUsage: true }).chatModel('scripted'),
      session,
      contextWindow: SMALL_WINDOW,
      maxOutputTokens: MAX_OUTPUT,
      // Pruning alone could make this request fit; the test is about the summary of a span that cannot.
      config: { maxTokens: MAX_OUTPUT, prune: { enabled: false } },
    });
    const seen: EngineNotification[] = [];
    second.engine.on((e) => seen.push(e));
    const r2 = await generateText({
      ...common,
      model: second.model,
      messages: [...messages, ...r1.response.messages, { role: 'user', content: 'Check again.' }],
    });
    expect(r2.text).toBe('Still done.');
    await second.close();

    const committed = seen.filter((e): e is Extract<EngineNotification, { type: 'compaction.committed' }> => e.type === 'compaction.committed');
    // The first request on the small model is checked before it is sent (docs/drop-in.md): compacted first, never refused.
    expect(committed.map((e) => e.trigger)).toEqual(['pressure']);
    expect(committed[0]!.spanTokens).toBeGreaterThan(SMALL_WINDOW);
    // The server refuses a prompt of `estimatePromptTokens` ≥ the window (llama.cpp's rule).
    const requests = small.requests
      .filter((r) => r.path === '/v1/chat/completions')
      .map((r) => ({ body: r.json as ChatRequestBody, refused: estimatePromptTokens(r.json as ChatRequestBody) >= SMALL_WINDOW }));
    const summaries = requests.filter((r) => isSummaryRequest(r.body));
    // In chunks: one request could not hold the span.
    expect(summaries.length).toBeGreaterThanOrEqual(2);
    expect(committed[0]!.summarizer.requests).toBe(summaries.length);
    for (const [i, s] of summaries.entries()) {
      expect(s.refused, `summary request ${i}`).toBe(false);
      // Within the window by the server's count and by the model's tokenizer, output cap included.
      const maxTokens = Number(s.body['max_tokens'] ?? s.body['max_completion_tokens']);
      expect(estimatePromptTokens(s.body) + maxTokens, `summary request ${i}`).toBeLessThanOrEqual(SMALL_WINDOW);
      const priced = (s.body.messages ?? []).reduce(
        (n, m) =>
          n + 4 + o200k.count(typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? '')) + o200k.count(JSON.stringify(m['tool_calls'] ?? '')),
        0,
      );
      expect(priced + o200k.count(JSON.stringify(s.body.tools ?? [])) + maxTokens, `summary request ${i}`).toBeLessThanOrEqual(SMALL_WINDOW);
      expect(openAIMessageProblems(s.body.messages ?? []), `summary request ${i}`).toEqual([]);
    }
    // No agent request was refused: the one that would have overflowed was compacted before it left.
    const agent = requests.filter((r) => !isSummaryRequest(r.body));
    expect(agent.map((r) => r.refused)).toEqual([false]);
  });
});
