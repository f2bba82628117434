/**
 * docs/local-models.md#the-server-tokenizer-the-model-servers-own-counts: the opt-in `server` tokenizer. The local server plays llama.cpp with a
 * vocabulary of its own (one token per digit, as Qwen's tokenizer spends: about three times
 * o200k_base on numbers), serves /tokenize with it and counts chat prompts with it, so a test
 * can tell the server's counts from the o200k estimate. Everything goes through the public
 * engine and the openai SDK over HTTP.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, createCompactionEngine, getTokenizer, JsonlStore, Session, SessionWriter, type CompactionEngine } from '../../../src/index';
import { ServerTokenizer, serverTokenizeUrl, TokenMeter } from '../../../src/advanced';
import {
  chatPromptTokens,
  digitTokens,
  startOpenAIServer,
  type ChatRequestBody,
  type LocalOpenAIServer,
  type TokenizeOptions,
} from '../../../src/testing/openai-server';
import { sdkTurn } from '../../helpers/sdk-turn';

const MODEL = 'qwen-tiny';
const SYSTEM = 'You are a helpful agent.';
const WINDOW = 32_768;

/** ~3,000 characters of numbers: o200k counts about a third of the digits the server counts. */
function digits(seed: number): string {
  return `Readings for batch ${seed}: ` + Array.from({ length: 250 }, (_, i) => String(1_000_003 + ((seed * 7919 + i * 104_729) % 8_999_999))).join(', ');
}

const servers: LocalOpenAIServer[] = [];
const engines: CompactionEngine[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const e of engines.splice(0)) e.stop();
  for (const s of servers.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function serve(tokenize: TokenizeOptions | undefined): Promise<LocalOpenAIServer> {
  const server = await startOpenAIServer({ ...(tokenize ? { tokenize } : {}), scenarios: () => ({ kind: 'reply', content: 'Noted.' }) });
  servers.push(server);
  return server;
}

/**
 * A server that answers does so within `deadlineMs` however loaded the machine (its answers are
 * in time by the order of events, not by their speed); the tests of a late or missing answer
 * make the server slower than the deadline by far.
 */
const IN_TIME_MS = 60_000;
const SHORT_MS = 2_000;

function engineFor(session: Session, server: LocalOpenAIServer, tokenizer: 'server' | 'o200k_base' = 'server', deadlineMs = IN_TIME_MS) {
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
  const engine = createCompactionEngine({
    session,
    client,
    models: { [`local/${MODEL}`]: { contextWindow: WINDOW, maxOutputTokens: 512, tokenizer } },
    config: { economics: false, background: false },
    tokenizerDeadlineMs: deadlineMs,
  });
  engines.push(engine);
  return { engine, client };
}

/** One agent turn over the SDK (test/helpers/sdk-turn.ts). */
const turn = (session: Session, client: OpenAI, engine: CompactionEngine, text: string) =>
  sdkTurn({ session, client, engine, provider: 'local', model: MODEL, system: SYSTEM }, text);

/** What the server counts for a request of the session's surface now (its /tokenize vocabulary, chatml framing). */
const serverCount = (session: Session) => chatPromptTokens({ messages: [...session.deriveMessages()] as ChatRequestBody['messages'], tools: [] }, digitTokens);
const tokenizeRequests = (server: LocalOpenAIServer) => server.requests.filter((r) => r.path === '/tokenize').length;

describe("tokenizer 'server' (docs/local-models.md#the-server-tokenizer-the-model-servers-own-counts)", () => {
  it("prices digit-heavy text by the server's counts, where o200k is far low", async () => {
    const server = await serve({ count: digitTokens, usage: true });
    const session = Session.inMemory();
    const { engine, client } = engineFor(session, server);
    const o200k = engineFor(session, server, 'o200k_base').engine;
    for (let t = 0; t < 3; t++) await turn(session, client, engine, digits(t));
    const real = serverCount(session);
    const m = engine.measure();
    expect(m.tokenizer).toBe('server');
    expect(m.fallbackNodes).toBe(0);
    expect(Math.abs(m.estimatedTokens - real)).toBeLessThanOrEqual(3);
    // The estimate o200k makes of the same surface is more than a third low.
    expect(o200k.measure().estimatedTokens).toBeLessThan(real * 0.65);
  });

  it('asks the server once per text: a second measure, or a step with nothing new, sends no request', async () => {
    const server = await serve({ count: digitTokens });
    const session = Session.inMemory();
    const { engine, client } = engineFor(session, server);
    await turn(session, client, engine, digits(1));
    const asked = tokenizeRequests(server);
    expect(asked).toBe(3); // the system prompt, the user's text, the reply
    engine.measure();
    await engine.afterStep();
    engine.measure();
    expect(tokenizeRequests(server)).toBe(asked);
    // The next turn asks only for its new text: the reply, "Noted." again, is cached.
    await turn(session, client, engine, digits(2));
    expect(tokenizeRequests(server)).toBe(asked + 1);
    expect(engine.measure().fallbackNodes).toBe(0);
  });

  it('a server without /tokenize (404) is asked once; the fallback prices, and the measurement says so', async () => {
    const server = await serve(undefined);
    const session = Session.inMemory();
    const { engine, client } = engineFor(session, server);
    const o200k = engineFor(session, server, 'o200k_base').engine;
    for (let t = 0; t < 3; t++) await turn(session, client, engine, digits(t));
    expect(tokenizeRequests(server)).toBe(1);
    const m = engine.measure();
    expect(m.tokenizer).toBe('server');
    expect(m.fallbackNodes).toBe(session.surface.length);
    expect(m.estimatedTokens).toBe(o200k.measure().estimatedTokens);
  });

  it('a server that stops answering mid-session: the step goes on with the fallback, and the counts come back with the server', async () => {
    const tokenize: TokenizeOptions = { count: digitTokens };
    const server = await serve(tokenize);
    const session = Session.inMemory();
    const { engine, client } = engineFor(session, server, 'server', SHORT_MS);
    await turn(session, client, engine, digits(1));
    expect(engine.measure().fallbackNodes).toBe(0);
    tokenize.delayMs = 10 * 60_000; // /tokenize hangs (past the late-answer limit too); chat still answers
    await turn(session, client, engine, digits(2));
    expect(engine.measure().fallbackNodes).toBe(1); // the user's new text; the reply is cached
    expect(engine.measure().estimatedTokens).toBeLessThan(serverCount(session) - 500);
    tokenize.delayMs = 0;
    await engine.afterStep();
    expect(engine.measure().fallbackNodes).toBe(0);
    expect(Math.abs(engine.measure().estimatedTokens - serverCount(session))).toBeLessThanOrEqual(3);
  });

  it('an answer later than the deadline is kept: the next step prices by it without asking again (docs/local-models.md)', async () => {
    const tokenize: TokenizeOptions = { count: digitTokens };
    const server = await serve(tokenize);
    const session = Session.inMemory();
    const { engine, client } = engineFor(session, server, 'server', SHORT_MS);
    await turn(session, client, engine, digits(1));
    tokenize.delayMs = 3 * SHORT_MS; // past the deadline, well within the late-answer limit (30 s)
    await turn(session, client, engine, digits(2));
    expect(engine.measure().fallbackNodes).toBe(1); // the step did not wait for it
    const asked = tokenizeRequests(server);
    // Until the late answer is in (no step asks for it meanwhile).
    const counter = (engine.measure().prices as TokenMeter).currentTokenizer as ServerTokenizer;
    while (!counter.has(digits(2))) await new Promise((r) => setTimeout(r, 20));
    await engine.afterStep();
    expect(engine.measure().fallbackNodes).toBe(0);
    expect(tokenizeRequests(server)).toBe(asked);
    expect(Math.abs(engine.measure().estimatedTokens - serverCount(session))).toBeLessThanOrEqual(3);
  });

  it('a server that is gone: afterStep resolves, priced by the fallback', async () => {
    const server = await serve({ count: digitTokens });
    const session = Session.inMemory();
    const { engine, client } = engineFor(session, server);
    await turn(session, client, engine, digits(1));
    await server.close();
    const w = new SessionWriter(session);
    w.startTurn();
    w.user(digits(2));
    w.startStep();
    w.request({ provider: 'local', model: MODEL, systemPrompt: SYSTEM, tools: [] });
    const r = await engine.afterStep();
    expect(r.status).toBe('below');
    expect(engine.measure().fallbackNodes).toBe(1);
  });

  it('bad config is a ConfigError naming the field, before anything is written', async () => {
    const session = Session.inMemory();
    const client = new OpenAI({ baseURL: 'http://127.0.0.1:9/v1', apiKey: 'test' });
    const length = session.length;
    const bad =
      (models: Record<string, object>, withClient = true) =>
      () =>
        createCompactionEngine({ session, ...(withClient ? { client } : {}), models: models });
    const key = `local/${MODEL}`;
    expect(bad({ [key]: { contextWindow: WINDOW, tokenizer: 'servr' } })).toThrow(ConfigError);
    expect(bad({ [key]: { contextWindow: WINDOW, tokenizer: 'servr' } })).toThrow(/"server"/);
    expect(bad({ [key]: { contextWindow: WINDOW, tokenizer: 'server', tokenizerUrl: 'not a url' } })).toThrow(/tokenizerUrl/);
    expect(bad({ [key]: { contextWindow: WINDOW, tokenizerUrl: 'http://127.0.0.1:8080/tokenize' } })).toThrow(/only used with tokenizer "server"/);
    expect(bad({ [key]: { contextWindow: WINDOW, tokenizer: 'server' } }, false)).toThrow(ConfigError);
    expect(bad({ [key]: { contextWindow: WINDOW, tokenizer: 'server' } }, false)).toThrow(/no tokenize endpoint/);
    expect(() =>
      createCompactionEngine({ session, models: { [key]: { contextWindow: WINDOW, tokenizer: 'server', tokenizerUrl: 'http://127.0.0.1:9/tokenize' } } }),
    ).not.toThrow();
    expect(() =>
      createCompactionEngine({ session, client, models: { [key]: { contextWindow: WINDOW, tokenizer: 'server' } }, tokenizerDeadlineMs: -1 }),
    ).toThrow(/tokenizerDeadlineMs/);
    expect(session.length).toBe(length);
  });

  it('a meter snapshot priced by another tokenizer is not restored under the server tokenizer', async () => {
    const server = await serve({ count: digitTokens, usage: true });
    const dir = mkdtempSync(join(tmpdir(), 'xcompact-server-tok-'));
    dirs.push(dir);
    const first = await Session.open(new JsonlStore(dir, { sync: false }), 's');
    const a = engineFor(first, server, 'o200k_base');
    for (let t = 0; t < 3; t++) await turn(first, a.client, a.engine, digits(t));
    a.engine.stop();
    await first.close();
    const again = await Session.open(new JsonlStore(dir, { sync: false }), 's');
    const b = engineFor(again, server, 'server');
    await turn(again, b.client, b.engine, digits(3));
    const m = b.engine.measure();
    expect(m.fallbackNodes).toBe(0);
    expect(Math.abs(m.estimatedTokens - serverCount(again))).toBeLessThanOrEqual(3);
    b.engine.stop();
    await again.close();
    // Reopened under the server tokenizer again, with a cold cache: the server's counts, not the fallback's.
    const third = await Session.open(new JsonlStore(dir, { sync: false }), 's');
    const c = engineFor(third, server, 'server');
    await turn(third, c.client, c.engine, digits(4));
    expect(c.engine.measure().fallbackNodes).toBe(0);
    expect(Math.abs(c.engine.measure().estimatedTokens - serverCount(third))).toBeLessThanOrEqual(3);
    c.engine.stop();
    await third.close();
  });

  it('overflow recovery with a window but no count declines at once when the newest message alone cannot fit, by the server count', async () => {
    const server = await serve({ count: digitTokens, usage: true });
    const session = Session.inMemory();
    const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
    const engine = createCompactionEngine({
      session,
      client,
      models: { [`local/${MODEL}`]: { contextWindow: 8192, maxOutputTokens: 512, tokenizer: 'server' } },
      config: { maxTokens: 512, economics: false, background: false },
    });
    engines.push(engine);
    for (let t = 0; t < 2; t++) await turn(session, client, engine, `Topic ${t}. ${'Some words about the build and its tests. '.repeat(20)}`);
    const w = new SessionWriter(session);
    w.startTurn();
    // 9,000 digits: ~3,000 tokens for o200k, ~9,000 for the server: over the window alone.
    w.user(Array.from({ length: 900 }, (_, i) => String(1_000_000_000 + i * 7919).slice(0, 10)).join(''));
    w.startStep();
    w.request({ provider: 'local', model: MODEL, systemPrompt: SYSTEM, tools: [] });
    // OpenRouter's wording: the window, and "about" a count (no exact figure to anchor on).
    const message = `This endpoint's maximum context length is 8192 tokens. However, you requested about ${serverCount(session) + 512} tokens (${serverCount(session)} of text input, 512 in the output). Please reduce the length of either one.`;
    server.enqueue({ kind: 'status', status: 400, body: { error: { message, code: 400 } } });
    const err = await client.chat.completions.create({ model: MODEL, messages: [...session.deriveMessages()], max_tokens: 512 }).catch((e: unknown) => e);
    const chatRequests = server.requests.filter((r) => r.path !== '/tokenize').length;
    const action = await engine.onRequestError(err);
    expect(action).toMatchObject({ kind: 'fail', reason: 'stuck' });
    expect(server.requests.filter((r) => r.path !== '/tokenize').length, 'no summary was requested').toBe(chatRequests);
    expect(session.events().some((e) => e.type === 'compaction/start')).toBe(false);
  });
});

describe('ServerTokenizer over HTTP', () => {
  const fallback = getTokenizer('o200k_base');
  const text = 'order 1234567890 shipped';

  it.each(['llama.cpp', 'vllm'] as const)('speaks %s: one probe finds the dialect, then one request per text', async (dialect) => {
    const server = await serve({ count: digitTokens, dialect });
    const t = new ServerTokenizer({ url: `${server.url}/tokenize`, model: MODEL, fallback, deadlineMs: IN_TIME_MS });
    expect(t.count(text)).toBe(fallback.count(text));
    expect(t.fallbacks()).toBe(1);
    const report = await t.prefetch([text, text, 'another 42']);
    expect(report).toMatchObject({ asked: 2, counted: 2, state: 'available' });
    expect(t.count(text)).toBe(digitTokens(text));
    expect(t.fallbacks()).toBe(1);
    const bodies = server.requests
      .filter((r) => r.path === '/tokenize')
      .map((r) =>
        Object.keys(r.json as object)
          .sort()
          .join(),
      );
    // llama.cpp's body first; vLLM answers it 400 once, and is asked in its own form from then on.
    expect(bodies).toEqual(
      dialect === 'llama.cpp'
        ? ['add_special,content', 'add_special,content']
        : ['add_special,content', 'add_special_tokens,model,prompt', 'add_special_tokens,model,prompt'],
    );
  });

  it('a server that cannot be reached is tried once per batch, and a batch asks for at most batchTexts texts', async () => {
    const gone = await serve({ count: digitTokens });
    const url = `${gone.url}/tokenize`;
    await gone.close();
    let calls = 0;
    const counting: typeof fetch = (input, init) => {
      calls++;
      return fetch(input, init);
    };
    const t = new ServerTokenizer({ url, model: MODEL, fallback, fetch: counting, deadlineMs: IN_TIME_MS });
    const report = await t.prefetch(['a1', 'b22', 'c333', 'd4444', 'e55555']);
    expect(report).toMatchObject({ asked: 5, counted: 0, unreachable: true });
    expect(calls).toBe(1);
    const server = await serve({ count: digitTokens });
    const small = new ServerTokenizer({ url: `${server.url}/tokenize`, model: MODEL, fallback, batchTexts: 2, deadlineMs: IN_TIME_MS });
    expect(await small.prefetch(['a1', 'b22', 'c333'])).toMatchObject({ asked: 2, counted: 2, unreachable: false });
    expect([small.has('a1'), small.has('b22'), small.has('c333')]).toEqual([true, true, false]);
  });

  it('a server that keeps failing is asked less and less often (skips doubling), and asked every step again once it answers', async () => {
    const tokenize: TokenizeOptions = { count: digitTokens, delayMs: 10 * 60_000 }; // /tokenize hangs
    const server = await serve(tokenize);
    // A deadline a loaded machine's local server answers well within, once it answers at all.
    const t = new ServerTokenizer({ url: `${server.url}/tokenize`, model: MODEL, fallback, deadlineMs: SHORT_MS });
    let n = 0;
    const step = async () => {
      const r = await t.prefetch([`text ${n++}`]);
      return r.skipped ? 'skipped' : r.counted > 0 ? 'counted' : 'failed';
    };
    const hung: string[] = [];
    for (let i = 0; i < 10; i++) hung.push(await step());
    // Two failures in a row, then 1, 2, 4 … prefetches skipped between tries.
    expect(hung).toEqual(['failed', 'failed', 'skipped', 'failed', 'skipped', 'skipped', 'failed', 'skipped', 'skipped', 'skipped']);
    // Requests sent (the server may not even see one the deadline aborted): one per try, none while skipped.
    const asked = t.requests;
    expect(asked).toBe(4);
    tokenize.delayMs = 0;
    const back: string[] = [];
    for (let i = 0; i < 4; i++) back.push(await step());
    // The fourth skip of this cooldown, then the server answers, and every step asks again.
    expect(back).toEqual(['skipped', 'counted', 'counted', 'counted']);
    expect(t.requests).toBe(asked + 3);
    expect(tokenizeRequests(server)).toBeGreaterThanOrEqual(3);
  });

  it('keeps a bounded number of counts, the least recently used dropped first', async () => {
    const server = await serve({ count: digitTokens });
    const t = new ServerTokenizer({ url: `${server.url}/tokenize`, model: MODEL, fallback, cacheEntries: 2, concurrency: 1, deadlineMs: IN_TIME_MS });
    await t.prefetch(['a1', 'b22']);
    t.count('a1'); // a1 is now the most recent
    await t.prefetch(['c333']);
    expect([t.has('a1'), t.has('b22'), t.has('c333')]).toEqual([true, false, true]);
  });

  it("finds the endpoint at the server's root, or at tokenizerUrl", async () => {
    expect(serverTokenizeUrl('http://127.0.0.1:8080/v1')).toBe('http://127.0.0.1:8080/tokenize');
    expect(serverTokenizeUrl('http://127.0.0.1:8080/v1/')).toBe('http://127.0.0.1:8080/tokenize');
    expect(serverTokenizeUrl('https://host/llm/v1')).toBe('https://host/llm/tokenize');
    expect(serverTokenizeUrl('http://127.0.0.1:8080')).toBe('http://127.0.0.1:8080/tokenize');
    expect(serverTokenizeUrl('not a url')).toBeUndefined();
    const chat = await serve(undefined);
    const counter = await serve({ count: digitTokens });
    const session = Session.inMemory();
    const client = new OpenAI({ baseURL: chat.baseURL, apiKey: 'test', maxRetries: 0 });
    const engine = createCompactionEngine({
      session,
      client,
      models: { [`local/${MODEL}`]: { contextWindow: WINDOW, tokenizer: 'server', tokenizerUrl: `${counter.url}/tokenize` } },
      config: { economics: false, background: false },
    });
    engines.push(engine);
    await turn(session, client, engine, digits(1));
    expect(tokenizeRequests(chat)).toBe(0);
    expect(tokenizeRequests(counter)).toBe(3);
    expect(engine.measure().fallbackNodes).toBe(0);
  });
});
