/**
 * The checkpoint ledger (src/services/summarizing/ledger.ts): cumulative lists of files read
 * and modified, of commands run and of unresolved errors, derived from the span, carried from checkpoint to
 * checkpoint in a machine-readable section, within the summary cap — for the extractive
 * summarizer and, over real HTTP, the OpenAI one.
 */
import OpenAI from 'openai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { frameCheckpoint, unframeCheckpoint } from '../../../src/services/summarizing';
import type { SummaryRequest } from '../../../src/services/summarizing';
import { ExtractiveSummarizer, parseSummary } from '../../../src/services/summarizing';
import { deriveLedger, fitLedger, parseLedger, renderLedger, withCheckpointLedger, withLedger, type Ledger } from '../../../src/services/summarizing';
import { boundSummarizer } from '../../../src/services/summarizing';
import { AiSdkSummarizer } from '../../../src/adapters/ai-sdk/index';
import { simulateReadableStream } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { OpenAISummarizer } from '../../../src/services/summarizing';
import { COMPACTION_CHECKPOINT_SOURCE } from '../../../src/session/events';
import { Session } from '../../../src/session/session';
import { SessionWriter } from '../../../src/session/writer';
import { startOpenAIServer, type LocalOpenAIServer } from '../../../src/testing/index';
import { countO200k as count, spanRequest } from '../../helpers/summary-request';

const signal = () => new AbortController().signal;

/** A request for the whole surface after the system prompt, built by `build`. */
function spanOf(build: (w: SessionWriter) => void, maxTokens = 2_000): SummaryRequest {
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  w.startTurn();
  w.startStep();
  w.request({ provider: 'p', model: 'm', systemPrompt: 'sys' });
  build(w);
  return spanRequest(session, session.surface.length, maxTokens, { provider: 'p', model: 'm' });
}

let n = 0;
function call(w: SessionWriter, name: string, args: Record<string, unknown>, result: string, isError = false): void {
  const id = `c${n++}`;
  w.assistant({ toolCalls: [{ id, name, arguments: JSON.stringify(args) }] });
  w.toolResult(id, result, { toolName: name, isError });
}

/** A first span: reads, edits, a failing test run and a missing file. */
function firstSpan(w: SessionWriter): void {
  w.user('Fix the parser');
  call(w, 'read', { path: 'src/a.ts' }, 'export const a = 1;');
  call(w, 'read', { path: 'src/b.ts' }, 'export const b = 2;');
  call(w, 'edit', { path: 'src/b.ts', oldText: '2', newText: '3' }, 'Edited src/b.ts');
  call(w, 'str_replace_based_edit_tool', { command: 'create', path: 'src/c.ts', file_text: 'x' }, 'File created');
  call(w, 'str_replace_based_edit_tool', { command: 'view', path: 'src/d.ts' }, '1\tconst d = 4;');
  call(w, 'bash', { command: 'npm test' }, 'RUN\n FAIL test/parse.test.ts > splits [quoted]\nAssertionError: 2 ≠ 3');
  call(w, 'read', { path: 'src/missing.ts' }, 'ENOENT: no such file or directory, open src/missing.ts', true);
}

describe('deriveLedger', () => {
  it('lists files read (never modified) and modified, oldest first, and errors with their target', () => {
    const ledger = deriveLedger(spanOf(firstSpan).events);
    expect(ledger.read).toEqual(['src/a.ts', 'src/d.ts', 'src/missing.ts']);
    expect(ledger.modified).toEqual(['src/b.ts', 'src/c.ts']);
    expect(ledger.errors).toEqual([
      { target: 'bash npm test', line: 'FAIL test/parse.test.ts > splits [quoted]' },
      { target: 'read src/missing.ts', line: 'ENOENT: no such file or directory, open src/missing.ts' },
    ]);
  });

  it('drops an error once a later call on the same target succeeds', () => {
    const ledger = deriveLedger(
      spanOf((w) => {
        firstSpan(w);
        call(w, 'bash', { command: 'npm test' }, 'Tests 12 passed');
      }).events,
    );
    expect(ledger.errors.map((e) => e.target)).toEqual(['read src/missing.ts']);
  });

  it('renders a stable section and parses it back, out of a framed checkpoint too', () => {
    const ledger: Ledger = {
      requests: [],
      read: ['src/a b.ts', 'docs/x.md'],
      modified: ['src/b.ts'],
      commands: ['npm test -- --run', 'grep TODO'],
      errors: [{ target: 'bash grep -n "a)" x', line: 'error: unmatched ] in [x]' }],
    };
    const text = renderLedger(ledger);
    expect(text).toBe(
      '<read-files>\nsrc/a b.ts\ndocs/x.md\n</read-files>\n<modified-files>\nsrc/b.ts\n</modified-files>\n' +
        '<commands>\nnpm test -- --run\ngrep TODO\n</commands>\n' +
        '<unresolved-errors>\n[bash grep -n "a)" x] error: unmatched ] in [x]\n</unresolved-errors>',
    );
    const framed = frameCheckpoint(withLedger('## Current Work\n- parsing', text));
    const parsed = parseLedger(unframeCheckpoint(framed)!);
    expect(parsed.ledger).toEqual(ledger);
    expect(parsed.body).toBe('## Current Work\n- parsing');
    expect(renderLedger({ requests: [], read: [], modified: [], commands: [], errors: [] })).toBe('');
  });

  it('fits a budget by dropping the oldest errors first, then read files, then commands, then modified files', () => {
    const ledger: Ledger = {
      requests: [],
      read: Array.from({ length: 50 }, (_, i) => `src/read${i}.ts`),
      modified: ['src/kept.ts'],
      commands: [],
      errors: Array.from({ length: 10 }, (_, i) => ({ target: `bash make ${i}`, line: `make: *** [all] Error ${i}` })),
    };
    const all = count(renderLedger(ledger));
    const noErrors = count(renderLedger({ ...ledger, errors: [] }));
    const someErrors = fitLedger(ledger, Math.floor((all + noErrors) / 2), count);
    expect(someErrors.read).toEqual(ledger.read);
    expect(someErrors.errors.length).toBeGreaterThan(0);
    expect(someErrors.errors.length).toBeLessThan(10);
    expect(someErrors.errors.at(-1)).toEqual(ledger.errors.at(-1));

    const fitted = fitLedger(ledger, 60, count);
    expect(count(renderLedger(fitted))).toBeLessThanOrEqual(60);
    expect(fitted.errors).toEqual([]);
    expect(fitted.modified).toEqual(['src/kept.ts']);
    expect(fitted.read.length).toBeGreaterThan(0);
    expect(fitted.read.at(-1)).toBe('src/read49.ts');
    expect(fitted.read).not.toContain('src/read0.ts');
    expect(fitLedger(ledger, 0, count)).toEqual({ requests: [], read: [], modified: [], commands: [], errors: [] });

    // Commands outlast the read files, not the modified ones.
    const withCommands: Ledger = { ...ledger, errors: [], commands: Array.from({ length: 20 }, (_, i) => `npm run build:${i}`) };
    const noRead = count(renderLedger({ ...withCommands, read: [] }));
    const keptCommands = fitLedger(withCommands, noRead, count);
    expect(keptCommands.read).toEqual([]);
    expect(keptCommands.commands).toEqual(withCommands.commands);
    const someCommands = fitLedger(withCommands, Math.floor(noRead / 2), count);
    expect(someCommands.commands.length).toBeGreaterThan(0);
    expect(someCommands.commands.length).toBeLessThan(20);
    expect(someCommands.commands.at(-1)).toBe('npm run build:19');
    expect(someCommands.modified).toEqual(['src/kept.ts']);
  });

  it('lists the commands run and the patterns searched, newest last, one line each, merged from a prior checkpoint', () => {
    const first = deriveLedger(
      spanOf((w) => {
        call(w, 'bash', { command: 'npm test' }, 'ok');
        // Codex's shell tool: an argv, a shell's -c script given as what it runs.
        call(w, 'shell', { command: ['bash', '-lc', 'rg -n "ollama" src'], workdir: '/repo' }, 'src/a.ts:1: ollama');
        call(w, 'shell', { command: ['git', 'status', '--short'] }, ' M src/a.ts');
        call(w, 'grep', { pattern: 'TODO|FIXME', path: 'src' }, 'src/a.ts:3: TODO');
        call(w, 'bash', { command: `python3 - <<'EOF'\n${'print(1)\n'.repeat(100)}EOF` }, '1');
        // A file tool's operation is not a command.
        call(w, 'str_replace_based_edit_tool', { command: 'view', path: 'src/d.ts' }, '1\tconst d = 4;');
        call(w, 'bash', { command: 'npm test' }, 'ok');
      }).events,
    );
    expect(first.commands.slice(0, 3)).toEqual(['rg -n "ollama" src', 'git status --short', 'grep TODO|FIXME']);
    const heredoc = first.commands[3]!;
    expect(heredoc.startsWith("python3 - <<'EOF' print(1) print(1)")).toBe(true);
    expect(Array.from(heredoc).length).toBe(201); // 200 code points and "…"
    expect(first.commands.at(-1)).toBe('npm test'); // run again: moved to the end, listed once
    expect(first.commands).toHaveLength(5);
    const text = renderLedger(first);
    const second = deriveLedger(
      spanOf((w) => {
        w.user(frameCheckpoint(withLedger('## Current Work\n- searching', text)), COMPACTION_CHECKPOINT_SOURCE);
        call(w, 'bash', { command: 'git status --short' }, 'clean');
      }).events,
    );
    expect(second.commands).toEqual([...first.commands.filter((c) => c !== 'git status --short'), 'git status --short']);
  });
});

describe("the ledger keeps the user's messages verbatim", () => {
  it('lists each user message (not checkpoints) oldest first, multi-line text intact, merged from a prior checkpoint', () => {
    const first = deriveLedger(
      spanOf((w) => {
        w.user('Fix the parser\nand keep the tests green');
        w.user('x'.repeat(700));
      }).events,
    );
    expect(first.requests).toEqual(['Fix the parser\nand keep the tests green', `${'x'.repeat(600)}…`]);
    const text = renderLedger(first);
    expect(parseLedger(text).ledger.requests).toEqual(first.requests);
    const second = deriveLedger(
      spanOf((w) => {
        w.user(frameCheckpoint(withLedger('## Current Work\n- parsing', text)), COMPACTION_CHECKPOINT_SOURCE);
        w.user('Now the lexer');
      }).events,
    );
    expect(second.requests).toEqual([...first.requests, 'Now the lexer']);
  });

  it('under a tight budget drops errors and file lists first, then cuts the oldest messages to their first line before dropping any', () => {
    const ledger: Ledger = {
      requests: [`Refactor the session store so that it streams\n${'details '.repeat(60)}`, 'Then run the tests'],
      read: Array.from({ length: 30 }, (_, i) => `src/read${i}.ts`),
      modified: ['src/kept.ts'],
      commands: ['make all'],
      errors: [{ target: 'bash make', line: 'make: *** [all] Error 1' }],
    };
    const roomy = count(renderLedger({ ...ledger, read: [], modified: [], commands: [], errors: [] }));
    const fitted = fitLedger(ledger, roomy - 5, count);
    expect(fitted).toMatchObject({ read: [], modified: [], commands: [], errors: [] });
    expect(fitted.requests).toEqual(['Refactor the session store so that it streams', 'Then run the tests']);
    expect(count(renderLedger(fitted))).toBeLessThanOrEqual(roomy - 5);
  });
});

describe('the extractive summarizer carries the ledger', () => {
  it('merges the previous checkpoint’s ledger, deduplicated, and resolves its errors', async () => {
    const first = await new ExtractiveSummarizer().summarize(spanOf(firstSpan), signal());
    expect(parseLedger(first.text).ledger.modified).toEqual(['src/b.ts', 'src/c.ts']);

    const second = await new ExtractiveSummarizer().summarize(
      spanOf((w) => {
        w.user(frameCheckpoint(first.text), COMPACTION_CHECKPOINT_SOURCE);
        w.user('Continue');
        call(w, 'read', { path: 'src/a.ts' }, 'export const a = 1;'); // again: moves to the end
        call(w, 'write', { path: 'src/e.ts', content: 'e' }, 'Wrote src/e.ts');
        call(w, 'bash', { command: 'npm test' }, 'Tests 12 passed');
      }),
      signal(),
    );
    const { body, ledger } = parseLedger(second.text);
    expect(ledger.read).toEqual(['src/d.ts', 'src/missing.ts', 'src/a.ts']);
    expect(ledger.modified).toEqual(['src/b.ts', 'src/c.ts', 'src/e.ts']);
    expect(ledger.errors.map((e) => e.target)).toEqual(['read src/missing.ts']);
    // The prior ledger is merged as a ledger, never copied into the prose sections.
    expect(body).not.toContain('<read-files>');
    expect(parseSummary(body)['Critical Context'].join('\n')).not.toContain('src/missing.ts\n');
    // The resolved test failure left the ledger for the history of fixes; the open error is not restated there.
    const fixes = parseSummary(body)['Errors and Fixes'];
    expect(fixes).toEqual(['- `bash`: FAIL test/parse.test.ts > splits [quoted]']);
  });

  it('each fact once: what the fitted ledger lists is not restated in the prose, what it drops is', async () => {
    const request = spanOf((w) => {
      w.user('Survey the tree');
      for (let i = 0; i < 60; i++) call(w, 'read', { path: `packages/module-${i}/src/index.ts` }, `export const m${i} = ${i};`);
    }, 600);
    const { text } = await new ExtractiveSummarizer().summarize(request, signal());
    const { body, ledger } = parseLedger(text);
    expect(count(text)).toBeLessThanOrEqual(600);
    const files = parseSummary(body)['Files and Code'].join('\n');
    expect(ledger.read.length).toBeGreaterThan(0);
    expect(ledger.read.length).toBeLessThan(60);
    for (const p of ledger.read) expect(files).not.toContain(`\`${p}\``);
    // The newest path the ledger dropped is in the prose (its oldest are trimmed there first).
    const dropped = Array.from({ length: 60 }, (_, i) => `packages/module-${i}/src/index.ts`).filter((p) => !ledger.read.includes(p));
    expect(files).toContain(`\`${dropped.at(-1)}\`: read`);
  });

  it('stays within the cap with a ledger far larger than it, keeping the newest entries', async () => {
    const request = spanOf((w) => {
      w.user('Survey the tree');
      for (let i = 0; i < 400; i++) call(w, 'read', { path: `packages/module-${i}/src/index.ts` }, `export const m${i} = ${i};`);
    }, 800);
    const { text } = await new ExtractiveSummarizer().summarize(request, signal());
    expect(count(text)).toBeLessThanOrEqual(800);
    const { ledger } = parseLedger(text);
    expect(ledger.read.at(-1)).toBe('packages/module-399/src/index.ts');
    expect(ledger.read).not.toContain('packages/module-0/src/index.ts');
    // At most half the cap: the rest is the prose's.
    expect(count(renderLedger(ledger))).toBeLessThanOrEqual(400);
    expect(count(renderLedger(ledger))).toBeGreaterThan(200);
  });
});

describe("the user's words have a budget of their own (SummaryRequest.userWordsTokens)", () => {
  /** A chat of `turns` distinct user messages, each with a short reply, then some file work. */
  const chat = (turns: number) => (w: SessionWriter) => {
    for (let i = 0; i < turns; i++) {
      w.user(`Request ${i}: please rename the ${['parser', 'lexer', 'store', 'cache'][i % 4]} helper number ${i} and keep its tests green`);
      w.assistant({ text: `Done with request ${i}.` });
    }
    for (let i = 0; i < 40; i++) call(w, 'read', { path: `src/module-${i}.ts` }, `export const m${i} = ${i};`);
  };
  const requests = (turns: number) =>
    Array.from(
      { length: turns },
      (_, i) => `Request ${i}: please rename the ${['parser', 'lexer', 'store', 'cache'][i % 4]} helper number ${i} and keep its tests green`,
    );

  it('extractive: every user message stays verbatim beyond the cap, and the summary and the other lists keep the whole cap', async () => {
    const shared = await new ExtractiveSummarizer().summarize(spanOf(chat(200), 1_200), signal());
    const apart = await new ExtractiveSummarizer().summarize({ ...spanOf(chat(200), 1_200), userWordsTokens: 20_000 }, signal());
    // Sharing the cap, most of the user's words are lost.
    expect(count(shared.text)).toBeLessThanOrEqual(1_200);
    expect(parseLedger(shared.text).ledger.requests.length).toBeLessThan(100);
    // Apart: all 200, verbatim, and what the cap holds (the prose and the file lists) at most the cap.
    const { body, ledger } = parseLedger(apart.text);
    expect(ledger.requests).toEqual(requests(200));
    expect(count(withLedger(body, renderLedger({ ...ledger, requests: [] })))).toBeLessThanOrEqual(1_200);
    expect(ledger.read.length).toBeGreaterThanOrEqual(parseLedger(shared.text).ledger.read.length);
    expect(count(apart.text)).toBeLessThanOrEqual(1_200 + 20_000);
  });

  it('extractive: a budget too small for them all keeps the newest whole and cuts or drops the oldest, within that budget', async () => {
    const { text } = await new ExtractiveSummarizer().summarize({ ...spanOf(chat(200), 1_200), userWordsTokens: 1_000 }, signal());
    const { ledger } = parseLedger(text);
    expect(ledger.requests.at(-1)).toBe(requests(200).at(-1));
    expect(ledger.requests.length).toBeLessThan(200);
    expect(count(renderLedger({ ...ledger, read: [], modified: [], errors: [] }))).toBeLessThanOrEqual(1_000);
  });
});

describe('the OpenAI summarizer carries the ledger (real HTTP)', () => {
  let server: LocalOpenAIServer;
  let client: OpenAI;
  beforeEach(async () => {
    server = await startOpenAIServer({ defaultModel: 'local-test' });
    client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
  });
  afterEach(async () => server.close());

  const REPLY = '## Primary Request and Intent\n- Fix the parser';

  it('appends the ledger to the reply and takes its size off max_tokens, replacing any ledger the model copied', async () => {
    const request = spanOf(firstSpan, 1_000);
    const ledgerText = renderLedger(deriveLedger(request.events));
    server.enqueue({ kind: 'reply', content: `${REPLY}\n\n<read-files>\nstale/copied.ts\n</read-files>` });
    const result = await new OpenAISummarizer({ client }).summarize(request, signal());
    expect(result.text).toBe(withLedger(REPLY, ledgerText));
    const body = server.requests.at(-1)!.json as { max_tokens: number; messages: Array<{ content: unknown }> };
    expect(body.max_tokens).toBe(1_000 - count(ledgerText) - 2);
    expect(count(result.text)).toBeLessThanOrEqual(1_000);
  });

  it("with a budget for the user's words: they are appended verbatim, and only the rest of the ledger is taken off max_tokens", async () => {
    const request: SummaryRequest = { ...spanOf(firstSpan, 1_000), userWordsTokens: 5_000 };
    const ledger = deriveLedger(request.events);
    const rest = renderLedger({ ...ledger, requests: [] });
    server.enqueue({ kind: 'reply', content: REPLY });
    const result = await new OpenAISummarizer({ client }).summarize(request, signal());
    expect(parseLedger(result.text).ledger.requests).toEqual(['Fix the parser']);
    const body = server.requests.at(-1)!.json as { max_tokens: number };
    expect(Math.abs(body.max_tokens - (1_000 - count(rest) - 2))).toBeLessThanOrEqual(2);
    expect(body.max_tokens).toBeGreaterThan(1_000 - count(renderLedger(ledger)) - 2);
  });

  it('with ledger: false sends the full cap and returns what the model wrote', async () => {
    server.enqueue({ kind: 'reply', content: REPLY });
    const result = await new OpenAISummarizer({ client, ledger: false }).summarize(spanOf(firstSpan, 1_000), signal());
    expect(result.text).toBe(REPLY);
    expect((server.requests.at(-1)!.json as { max_tokens: number }).max_tokens).toBe(1_000);
  });
});

describe('the AI SDK summarizer carries the same ledger (withCheckpointLedger, as the adapter composes it)', () => {
  it('appends the ledger and takes its size off maxOutputTokens', async () => {
    const REPLY = '## Primary Request and Intent\n- Fix the parser';
    const asked: number[] = [];
    // The summarizer streams (its idle limit watches the chunks).
    const model = new MockLanguageModelV3({
      doStream: async (options) => {
        asked.push(options.maxOutputTokens!);
        return {
          stream: simulateReadableStream({
            chunks: [
              { type: 'stream-start' as const, warnings: [] },
              { type: 'text-start' as const, id: 't' },
              { type: 'text-delta' as const, id: 't', delta: REPLY },
              { type: 'text-end' as const, id: 't' },
              {
                type: 'finish' as const,
                finishReason: { unified: 'stop' as const, raw: 'stop' },
                usage: { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 5, text: 5, reasoning: 0 } },
              },
            ],
          }),
        };
      },
    });
    const request = spanOf(firstSpan, 1_000);
    const ledgerText = renderLedger(deriveLedger(request.events));
    const result = await withCheckpointLedger(boundSummarizer(new AiSdkSummarizer({ model }))).summarize(request, signal());
    expect(result.text).toBe(withLedger(REPLY, ledgerText));
    expect(asked).toEqual([1_000 - count(ledgerText) - 2]);
  });
});
