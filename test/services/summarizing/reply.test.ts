/**
 * One check of a summary reply for every summarizer: the same scripted reply, sent over HTTP
 * from the local server to the OpenAI summarizer (the `openai` SDK) and to the AI SDK
 * summarizer (`@ai-sdk/openai-compatible`), is refused with the same SummarizerError code and
 * the same diagnosis; the bounding wrapper's cancellation is the summarizers' own error.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { simulateReadableStream } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AiSdkSummarizer } from '../../../src/adapters/ai-sdk/index';
import { SummarizerError, type Summarizer, type SummaryRequest } from '../../../src/services/summarizing';
import { boundSummarizer } from '../../../src/services/summarizing';
import { OpenAISummarizer } from '../../../src/services/summarizing';
import { checkSummaryReply, stopOf } from '../../../src/services/summarizing';
import { startOpenAIServer, type LocalOpenAIServer, type Scenario } from '../../../src/testing/index';

let server: LocalOpenAIServer;
let openai: Summarizer;
let aiSdk: Summarizer;
beforeAll(async () => {
  server = await startOpenAIServer({ defaultModel: 'm' });
  openai = new OpenAISummarizer({ client: new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }), bounding: false });
  aiSdk = new AiSdkSummarizer({ model: createOpenAICompatible({ name: 'local', baseURL: server.baseURL, apiKey: 'test', includeUsage: true }).chatModel('m') });
});
afterAll(() => server.close());

const request = (): SummaryRequest => ({
  system: { role: 'system', content: 'You are a coding agent.' },
  tools: [],
  context: [],
  messages: [
    { role: 'user', content: 'Fix the parser in src/parse.ts.' },
    { role: 'assistant', content: 'I rewrote the split with a scanner; tests pass.' },
  ],
  events: [],
  target: { provider: 'local', model: 'm' },
  maxTokens: 256,
  countTokens: (t) => Math.ceil(t.length / 4),
});

async function refusal(summarizer: Summarizer, scenario: Scenario): Promise<SummarizerError> {
  server.enqueue(scenario);
  const err = await summarizer.summarize(request(), new AbortController().signal).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(SummarizerError);
  return err as SummarizerError;
}

// The providers' names of a reason differ (content_filter / content-filter); the diagnosis is the same.
const same = (message: string) => message.replace(/finish reason "[^"]*"/g, 'finish reason "…"');

const CASES: Array<{ label: string; scenario: Scenario; code: string; says: RegExp }> = [
  {
    label: 'cut off by the server window (generation stopped short of max_tokens)',
    scenario: { kind: 'reply', content: '## Primary Request', finishReason: 'length', usage: { prompt_tokens: 1800, completion_tokens: 40 } },
    code: 'summary-truncated',
    says: /cut off by the server's context window, not by max_tokens: prompt 1800 \+ generated 40/,
  },
  {
    label: 'cut off at max_tokens',
    scenario: { kind: 'reply', content: '## Primary Request', finishReason: 'length', usage: { prompt_tokens: 300, completion_tokens: 256 } },
    code: 'summary-truncated',
    says: /cut off at max_tokens 256/,
  },
  {
    label: 'stopped by a content filter',
    scenario: { kind: 'reply', content: 'The summ', finishReason: 'content_filter' },
    code: 'summary-truncated',
    says: /content filter/,
  },
  { label: 'only whitespace', scenario: { kind: 'reply', content: '  \n ' }, code: 'summary-empty', says: /only whitespace/ },
  {
    label: 'tool calls instead of a summary',
    scenario: { kind: 'reply', toolCalls: [{ id: 't1', name: 'grep', arguments: '{"q":"x"}' }] },
    code: 'summary-tool-calls',
    says: /called 1 tool\(s\) instead of writing the summary/,
  },
];

describe('the same reply, refused the same way by both summarizers', () => {
  for (const c of CASES) {
    it(`${c.label}: ${c.code}`, async () => {
      const viaOpenAI = await refusal(openai, c.scenario);
      const viaAiSdk = await refusal(aiSdk, c.scenario);
      expect(viaOpenAI.code).toBe(c.code);
      expect(viaAiSdk.code).toBe(c.code);
      expect(viaOpenAI.message).toMatch(c.says);
      expect(same(viaAiSdk.message)).toBe(same(viaOpenAI.message));
    });
  }

  it('a usable reply: the trimmed text, from both', async () => {
    for (const s of [openai, aiSdk]) {
      server.enqueue({ kind: 'reply', content: '  ## Primary Request and Intent\n- fix the parser \n' });
      expect((await s.summarize(request(), new AbortController().signal)).text).toBe('## Primary Request and Intent\n- fix the parser');
    }
  });

  it('cancelled before sending: the same summary-cancelled error from both and from the bounding wrapper', async () => {
    const controller = new AbortController();
    controller.abort(new Error('the user pressed Esc'));
    const errors = await Promise.all(
      [openai, aiSdk, boundSummarizer(aiSdk, { window: 100_000 })].map((s) =>
        s.summarize(request(), controller.signal).catch((e: unknown) => e as SummarizerError),
      ),
    );
    for (const e of errors as SummarizerError[]) {
      expect(e).toBeInstanceOf(SummarizerError);
      expect(e.code).toBe('summary-cancelled');
      expect(e.message).toBe('The summary request was cancelled: the user pressed Esc; no partial summary is kept.');
    }
  });
});

describe('checkSummaryReply', () => {
  const req = { maxTokens: 100 };
  it('a reply that gave no finish reason is incomplete: summary-request, even with text', () => {
    expect(() => checkSummaryReply(req, { text: 'half a summ', toolCalls: 0, stop: undefined })).toThrow(expect.objectContaining({ code: 'summary-request' }));
  });
  it('no usage with a length stop: says that which limit was hit is unknown', () => {
    expect(() => checkSummaryReply(req, { text: 'x', toolCalls: 0, stop: 'length', finishReason: 'length' })).toThrow(/unknown whether max_tokens 100/);
  });
  it('empty text with no tool calls: summary-empty naming "no text"', () => {
    expect(() => checkSummaryReply(req, { text: '', toolCalls: 0, stop: 'other', finishReason: 'stop' })).toThrow(/returned no text \(finish reason "stop"\)/);
  });
});

describe('a generation the provider broke off', () => {
  // The AI SDK hands back the partial text with finish reason `error` (ai 6 and 7) or
  // `interrupted` (ai 7); committed, it would replace the span with half a summary.
  it.each(['error', 'other'] as const)('the AI SDK summarizer with finish reason %s', async (unified) => {
    // The summarizer streams (its idle limit watches the chunks).
    const model = new MockLanguageModelV3({
      doStream: async () => ({
        stream: simulateReadableStream({
          chunks: [
            { type: 'stream-start' as const, warnings: [] },
            { type: 'text-start' as const, id: 't' },
            { type: 'text-delta' as const, id: 't', delta: '## Primary Request\nFix the par' },
            { type: 'text-end' as const, id: 't' },
            {
              type: 'finish' as const,
              finishReason: { unified, raw: undefined },
              usage: { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 5, text: 5, reasoning: 0 } },
            },
          ],
        }),
      }),
    });
    const summarizer = new AiSdkSummarizer({ model });
    const got = await summarizer.summarize(request(), new AbortController().signal).catch((e: unknown) => e);
    if (unified === 'other') {
      expect((got as { text: string }).text).toContain('Fix the par');
      return;
    }
    expect(got).toBeInstanceOf(SummarizerError);
    expect((got as SummarizerError).code).toBe('summary-request');
    expect((got as SummarizerError).message).toMatch(/ended in an error \(finish reason "error"\).*incomplete/);
  });

  it('reads either SDK spelling of a reason', () => {
    expect(['length', 'content_filter', 'content-filter', 'error', 'interrupted', 'stop', 'tool_calls', null].map(stopOf)).toEqual([
      'length',
      'content-filter',
      'content-filter',
      'failed',
      'failed',
      'other',
      'other',
      undefined,
    ]);
    expect(() => checkSummaryReply(request(), { text: 'half', toolCalls: 0, stop: stopOf('interrupted'), finishReason: 'interrupted' })).toThrow(
      SummarizerError,
    );
  });
});
