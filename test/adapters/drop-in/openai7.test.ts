/**
 * xcompact with a client from openai 7 (installed here under the alias `openai7`; the repo's own
 * tests use openai 6): the summarizer, overflow classification and the engine's overflow
 * recovery, over real HTTP to the local server. Each error is compared with what the same
 * server reply gives through openai 6, so both majors are held to one behaviour.
 *
 * openai 7 requires Node 22 or newer: on older Node these tests are skipped (and reported as
 * skipped, with the reason in the title); CI runs them in its Node 22, 24 and 26 legs, with
 * XCOMPACT_EXPECT_OPENAI7=1 so that a leg where they do not run fails.
 */
import OpenAI6 from 'openai';
import type OpenAI7 from 'openai7';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCompactionEngine } from '../../../src/engine/facade';
import { classifyRequestError, withErrorBodyRecovery, type RequestErrorClass } from '../../../src/services/overflow';
import { SummarizerError } from '../../../src/services/summarizing';
import { OpenAISummarizer } from '../../../src/services/summarizing';
import { getTokenizer } from '../../../src/services/metering';
import { Session } from '../../../src/session/session';
import { SessionWriter } from '../../../src/session/writer';
import { OTHER_ERROR_BODIES, OVERFLOW_BODIES, startOpenAIServer, type LocalOpenAIServer, type Scenario } from '../../../src/testing/index';

const NODE_MAJOR = Number(process.versions.node.split('.')[0]);
const SUPPORTED = NODE_MAJOR >= 22;

it.runIf(process.env.XCOMPACT_EXPECT_OPENAI7 === '1')('runs the openai 7 tests where CI expects them (Node 22+)', () => {
  expect(SUPPORTED, `openai 7 needs Node 22+, this is ${process.version}`).toBe(true);
});

describe.skipIf(!SUPPORTED)(`with an openai 7 client (skipped below Node 22, which openai 7 requires; this is ${process.version})`, () => {
  let server: LocalOpenAIServer;
  let Client7: typeof OpenAI7;
  let v6: OpenAI6;
  let v7: OpenAI7;
  const messages = [{ role: 'user' as const, content: 'continue' }];

  beforeAll(async () => {
    Client7 = (await import('openai7')).default;
    server = await startOpenAIServer({ defaultModel: 'local-test' });
    v6 = withErrorBodyRecovery(new OpenAI6({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }));
    v7 = withErrorBodyRecovery(new Client7({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }));
  });
  afterAll(async () => server?.close());

  it('is a client of openai 7, not the repo’s openai 6', () => {
    expect(v7).not.toBeInstanceOf(OpenAI6);
    expect(Client7.prototype).not.toBe(OpenAI6.prototype);
  });

  /** The error the given client throws for one scripted reply. */
  async function errorFrom(client: OpenAI6 | OpenAI7, scenario: Scenario, stream = false): Promise<unknown> {
    server.enqueue(scenario);
    try {
      if (stream) {
        for await (const _ of await (client as OpenAI6).chat.completions.create({ model: 'm', messages, stream: true })) {
          // drain
        }
      } else await (client as OpenAI6).chat.completions.create({ model: 'm', messages });
    } catch (err) {
      return err;
    }
    throw new Error('expected the request to fail');
  }

  const comparable = (c: RequestErrorClass) => ({ ...c, message: undefined });

  describe('classifyRequestError', () => {
    for (const [name, body] of Object.entries(OVERFLOW_BODIES)) {
      it(`${name}: overflow, classified as through openai 6`, async () => {
        const scenario: Scenario = { kind: 'status', ...body };
        const seven = classifyRequestError(await errorFrom(v7, scenario));
        expect(seven.kind).toBe('context-overflow');
        expect(comparable(seven)).toEqual(comparable(classifyRequestError(await errorFrom(v6, scenario))));
      });
    }

    for (const [name, body] of Object.entries(OTHER_ERROR_BODIES)) {
      it(`${name}: classified as through openai 6`, async () => {
        const scenario: Scenario = { kind: 'status', ...body };
        const seven = classifyRequestError(await errorFrom(v7, scenario));
        expect(seven.kind).not.toBe('context-overflow');
        expect(comparable(seven)).toEqual(comparable(classifyRequestError(await errorFrom(v6, scenario))));
      });
    }

    it('an overflow before a stream starts is the same overflow', async () => {
      const seven = classifyRequestError(await errorFrom(v7, { kind: 'status', ...OVERFLOW_BODIES.openai }, true));
      expect(seven).toMatchObject({ kind: 'context-overflow', provider: 'openai', limitTokens: 128000 });
    });

    it('an abort mid-request is cancelled', async () => {
      server.enqueue({ kind: 'hang', sendHeaders: false });
      const controller = new AbortController();
      const at = server.requests.length;
      const pending = v7.chat.completions.create({ model: 'm', messages }, { signal: controller.signal }).catch((e: unknown) => e);
      await server.waitForRequest(at);
      controller.abort();
      expect(classifyRequestError(await pending).kind).toBe('cancelled');
    });

    it('a refused connection is other (not overflow, not retried as rate limit)', async () => {
      const closed = new Client7({ baseURL: 'http://127.0.0.1:9/v1', apiKey: 'test', maxRetries: 0 });
      const err = await closed.chat.completions.create({ model: 'm', messages }).catch((e: unknown) => e);
      expect(classifyRequestError(err).kind).toBe('other');
    });
  });

  describe('OpenAISummarizer', () => {
    const count = (text: string) => getTokenizer('o200k_base').count(text);
    const request = () => ({
      system: { role: 'system' as const, content: 'You are a coding agent.' },
      tools: [],
      context: [],
      messages: [
        { role: 'user' as const, content: 'Fix the parser in src/parse.ts.' },
        { role: 'assistant' as const, content: 'I rewrote the split with a scanner; tests pass.' },
      ],
      events: [],
      target: { provider: 'local', model: 'local-test' },
      maxTokens: 1000,
      countTokens: count,
    });

    it('streams the summary with usage, and leaves the caller’s client unpatched', async () => {
      const caller = new Client7({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
      server.enqueue({
        kind: 'reply',
        content: '## Primary Request and Intent\n- fix the parser',
        chunks: 5,
        usage: { prompt_tokens: 321, cached_tokens: 256, completion_tokens: 12 },
      });
      const result = await new OpenAISummarizer({ client: caller }).summarize(request(), new AbortController().signal);
      expect(result.text).toBe('## Primary Request and Intent\n- fix the parser');
      expect(result.usage).toMatchObject({ promptTokens: 321, cachedTokens: 256, completionTokens: 12 });
      expect(Object.getOwnPropertySymbols(caller).map(String)).not.toContain('Symbol(xcompact.errorBodyRecovery)');
      const sent = server.requests.at(-1)!.json as Record<string, unknown>;
      expect(sent).toMatchObject({ stream: true, max_tokens: 1000 });
    });

    it("finish reason 'length' is summary-truncated; a 429 is summary-request with the SDK's error as cause", async () => {
      server.enqueue({ kind: 'reply', content: 'cut off', finishReason: 'length' });
      const truncated = await new OpenAISummarizer({ client: v7 }).summarize(request(), new AbortController().signal).catch((e: unknown) => e);
      expect(truncated).toBeInstanceOf(SummarizerError);
      expect((truncated as SummarizerError).code).toBe('summary-truncated');

      server.enqueue({ kind: 'status', ...OTHER_ERROR_BODIES.rateLimit });
      const limited = await new OpenAISummarizer({ client: v7 }).summarize(request(), new AbortController().signal).catch((e: unknown) => e);
      expect((limited as SummarizerError).code).toBe('summary-request');
      expect(classifyRequestError((limited as SummarizerError).cause).kind).toBe('rate-limit');
    });

    it('an abort before the headers is summary-cancelled', async () => {
      server.enqueue({ kind: 'hang', sendHeaders: false });
      const controller = new AbortController();
      const at = server.requests.length;
      const pending = new OpenAISummarizer({ client: v7 }).summarize(request(), controller.signal).catch((e: unknown) => e);
      await server.waitForRequest(at);
      controller.abort(new Error('the user pressed Esc'));
      expect(((await pending) as SummarizerError).code).toBe('summary-cancelled');
    });
  });

  it('the engine recovers a provider overflow raised by an openai 7 client: compacts through it, answers retry', async () => {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    const engine = createCompactionEngine({ session, client: v7, models: { 'local/local-test': { contextWindow: 50_000, maxOutputTokens: 2000 } } });
    w.system('You are a coding agent.');
    w.startTurn();
    w.request({ provider: 'local', model: 'local-test', tools: [] });
    w.user('Please read the files.');
    for (let i = 0; i < 4; i++) {
      w.startStep();
      w.request({ provider: 'local', model: 'local-test', tools: [] });
      w.assistant({ text: `reading ${i}`, toolCalls: [{ id: `c${i}`, name: 'read', arguments: `{"path":"f${i}.ts"}` }] });
      w.toolResult(`c${i}`, `content of f${i}.ts `.repeat(80));
      w.endStep();
    }
    w.startStep();
    w.request({ provider: 'local', model: 'local-test', tools: [] });
    const overflow = await errorFrom(v7, { kind: 'status', ...OVERFLOW_BODIES.openai });
    const before = server.requests.length;
    server.enqueue({ kind: 'reply', content: '## Primary Request and Intent\n- read the files' });
    try {
      const action = await engine.onRequestError(overflow);
      expect(action.kind).toBe('retry');
      expect(server.requests.length).toBe(before + 1); // the summary went through the openai 7 client
      expect(session.events().some((e) => e.type === 'compaction/end' && !('error' in e.data && e.data.error))).toBe(true);
    } finally {
      engine.stop();
    }
  });
});
