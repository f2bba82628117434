/**
 * `xcompact eval`, `inspect` and `compact` on transcripts of other harnesses: the tables for the
 * two real transcripts (eval as a user runs it, a separate process), the HTML report opened in
 * Chromium with its charts drawn, and the one-line refusal of a file of no known format. The
 * other commands run through the CLI's entry in this process (test/helpers/cli.ts): the same
 * code, exit code and streams, without compiling the CLI again for each (seconds a run).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePrices, parseWindows } from '../../src/cli/eval';
import { PEERS, PRICES } from '../../src/eval';
import { Session } from '../../src/session/session';
import { JsonlStore } from '../../src/session/stores/jsonl';
import { launchChromium } from '../helpers/chromium';
import { spawnXcompact, xcompact } from '../helpers/cli';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { CLAUDE_REAL, CODEX_REAL, fixture } from '../helpers/transcripts';

const dir = mkdtempSync(join(tmpdir(), 'xcompact-eval-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function expectOneLineError(r: { code: number | null; stdout: string; stderr: string }, pattern: RegExp): void {
  expect(r.code).not.toBe(0);
  expect(r.stdout).toBe('');
  expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(r.stderr).toMatch(pattern);
}

describe('eval options', () => {
  it('windows: k is 1,024 tokens; plain counts; nonsense refused', () => {
    expect(parseWindows(undefined)).toEqual([32_768, 131_072]);
    expect(parseWindows('32k,128k')).toEqual([32_768, 131_072]);
    expect(parseWindows('16384, 1m')).toEqual([16_384, 1_048_576]);
    expect(() => parseWindows('32k,big')).toThrow(/--window "big" is not a window/);
    expect(() => parseWindows('10')).toThrow(/at least 1k/);
  });

  it('prices: four amounts, or some by name over the defaults', () => {
    expect(parsePrices(undefined)).toEqual(PRICES);
    expect(parsePrices('1,0.1,1.25,5')).toEqual({ input: 1, cacheRead: 0.1, cacheWrite: 1.25, output: 5 });
    expect(parsePrices('input=1.25,output=10')).toEqual({ ...PRICES, input: 1.25, output: 10 });
    expect(() => parsePrices('1,2')).toThrow(/2 amounts/);
    expect(() => parsePrices('input=-1')).toThrow(/"-1" is not a price/);
    expect(() => parsePrices('speed=3')).toThrow(/names no price/);
  });
});

describe('xcompact eval on the real transcripts', () => {
  const report = join(dir, 'report.html');
  let run: { code: number | null; stdout: string; stderr: string };
  let browser: Browser | undefined;

  beforeAll(async () => {
    [run, { browser }] = await Promise.all([spawnXcompact(['eval', CLAUDE_REAL, CODEX_REAL, '--report', report]), launchChromium()]);
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("prints, per transcript and window, every policy with the cost and memory figures, the harness's own run scored first", () => {
    expect(run.code, run.stderr).toBe(0);
    // Not a TTY: no progress bar on stderr; only the note that a default window too small for
    // the Claude Code session (~42k tokens sent unrecorded on every request) was left out.
    expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(
      /^note: real-session\.jsonl: window 32,768 left out: it sent about [\d,]+ tokens on every request that its transcript does not hold/,
    );
    for (const [name, format, windows] of [
      ['real-session.jsonl', 'claude-code', ['131,072']],
      ['real-rollout.jsonl', 'codex', ['32,768', '131,072']],
    ] as const) {
      for (const w of windows) expect(run.stdout).toMatch(new RegExp(`${name.replace('.', '\\.')} \\(${format}, \\d+ requests\\) — window ${w} tokens`));
    }
    expect(run.stdout).not.toMatch(/real-session\.jsonl \(claude-code, \d+ requests\) — window 32,768/);
    expect(run.stdout).toMatch(/policy +cost +cache-miss tok +compactions +prunes +peak÷win +>win +needed recall +after compaction +intent recall/);
    for (const policy of ['xcompact', 'pi (sim)', 'Codex (sim)', 'opencode (sim)', 'naive (sim)']) {
      expect(run.stdout.split('\n').filter((l) => l.trimStart().startsWith(policy))).toHaveLength(3);
    }
    // Each window block says what the replay sent beyond the messages and how its count follows
    // the recorded usage, and puts the harness's own run first, its memory measured too.
    const blocks = run.stdout.split('\n\n').filter((b) => / — window [\d,]+ tokens/.test(b));
    expect(blocks).toHaveLength(3);
    for (const b of blocks) {
      expect(b).toMatch(/replayed with (the recorded system prompt|[\d,]+ tokens per request)/);
      expect(b).toMatch(/counted as its provider did \(×\d\.\d\d our tokens, fitted to \d+ recorded requests: median error \d+\.\d%, p90 \d+\.\d%\)/);
      expect(b).toMatch(/\n\s+as recorded\s+\$\d+\.\d\d\s+–\s+\d+\s+–\s+\d+\.\d\d\s+\d+\s+\d+\.\d%\s+(\d+\.\d%|–)\s+\d+\.\d%\n/);
    }
    // Claude Code's own summaries (3 compactions in the session) beside xcompact's of the same spans.
    const summaries = run.stdout.split('\n\n').find((b) => b.includes("the harness's own summaries beside xcompact's"));
    expect(summaries).toBeDefined();
    expect(summaries!.split('\n').filter((l) => /^\s+#\d \(seq \d+/.test(l))).toHaveLength(3);
    // xcompact never sends a request over a window its fixed overhead fits in (131k here; Claude
    // Code's ~42k of system prompt and tools do not fit in 32k, for any policy, as for the harness).
    for (const b of blocks.filter((b) => b.includes('window 131,072 tokens'))) {
      const l = b.split('\n').find((l) => l.trimStart().startsWith('xcompact '))!;
      expect(l).toMatch(/^\s*xcompact\s+\$\d+\.\d\d\s+[\d,]+\s+\d+\s+\d+\s+0\.\d\d\s+0\s+\d+\.\d%\s+(\d+\.\d%|–)\s+\d+\.\d%$/);
    }
  });

  it('writes a self-contained report whose charts Chromium draws', async () => {
    expect(existsSync(report)).toBe(true);
    const html = readFileSync(report, 'utf8');
    expect(html).not.toMatch(/<script|<link|https?:\/\//);
    const page = await browser!.newPage({ viewport: { width: 1300, height: 900 } });
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(pathToFileURL(report).href);
    const drawn = await page.evaluate(() =>
      Array.from(document.querySelectorAll('svg.chart')).map((svg) => {
        const box = svg.getBoundingClientRect();
        const marks = Array.from(svg.querySelectorAll('circle, polyline')).map((m) => (m as SVGGraphicsElement).getBBox());
        const valid = svg.closest('section')!.querySelectorAll('tbody tr:not(.invalid)').length;
        return {
          id: svg.id,
          width: box.width,
          height: box.height,
          marks: marks.length,
          drawnMarks: marks.filter((b) => b.width > 0 || b.height > 0).length,
          valid,
        };
      }),
    );
    await page.close();
    expect(requests).toHaveLength(1); // the page itself, nothing else
    expect(drawn.filter((c) => c.id.startsWith('cost-recall-'))).toHaveLength(3);
    expect(drawn.filter((c) => c.id.startsWith('request-size-'))).toHaveLength(3);
    for (const c of drawn) {
      expect(c.width, c.id).toBeGreaterThan(100);
      expect(c.height, c.id).toBeGreaterThan(100);
      // One line per policy; one point per valid policy (none sent a request over the window).
      const expected = c.id.startsWith('cost-recall-') ? c.valid : 1 + PEERS.length;
      expect(c.marks, c.id).toBe(expected);
      expect(c.drawnMarks, c.id).toBe(expected);
    }
    expect(drawn.some((c) => c.id.startsWith('cost-recall-') && c.valid > 0)).toBe(true);
    expect(await countRows(html)).toBe(3 * (1 + PEERS.length));
    expect(html.match(/<p class="verdict">verdict: /g)).toHaveLength(3);
  });
});

async function countRows(html: string): Promise<number> {
  return (html.match(/<tr( class="invalid")?><th scope="row">/g) ?? []).length;
}

describe('other harnesses in inspect and compact; foreign files refused', () => {
  it.concurrent('inspect reads a Claude Code session and a Codex rollout, naming what was not sent', async () => {
    const claude = await xcompact(['inspect', fixture('claude-code/compaction.jsonl'), '--context-window', '200000']);
    expect(claude.code, claude.stderr).toBe(0);
    expect(claude.stdout).toContain('Claude Code session, imported in memory');
    expect(claude.stdout).toMatch(/1 Claude Code session compactions as checkpoints/);
    expect(claude.stdout).toMatch(/never sent\s+.*system:stop_hook_summary/);
    const codex = await xcompact(['inspect', fixture('codex/encrypted-compaction.jsonl'), '--context-window', '200000']);
    expect(codex.code, codex.stderr).toBe(0);
    expect(codex.stdout).toContain('Codex rollout, imported in memory');
    expect(codex.stdout).toMatch(/1 Codex rollout compactions as checkpoints \(1 without a readable summary\)/);
  });

  it.concurrent('compact turns a Claude Code session into an xcompact session with a checkpoint, the input untouched', async () => {
    const input = fixture('claude-code/images-errors.jsonl');
    const before = readFileSync(input);
    const output = join(dir, 'images.compacted.jsonl');
    const r = await xcompact(['compact', input, '--summarizer', 'extractive', '--context-window', '200000', '--output', output]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(input).equals(before)).toBe(true);
    expect(r.stdout).toMatch(/compacted 5 messages into 1 checkpoint/);
    const s = await Session.open(new JsonlStore(dir), 'images.compacted');
    expect(s.events().some((e) => e.type === 'compaction/summary')).toBe(true);
    expect(openAIMessageProblems(s.deriveMessages())).toEqual([]);
    await s.close();
  });

  it.concurrent('a foreign JSONL whose lines look like pi entries: one-line error naming the formats tried, exit non-zero, for every command', async () => {
    const foreign = fixture('foreign/chat-log.jsonl');
    const before = readFileSync(foreign);
    for (const args of [
      ['inspect', foreign],
      ['compact', foreign, '--summarizer', 'extractive'],
      ['eval', foreign],
    ]) {
      const r = await xcompact(args);
      expectOneLineError(
        r,
        /chat-log\.jsonl: not a transcript xcompact reads; tried xcompact session .*pi transcript .*Claude Code session .*Codex rollout .*none describes its 3 records/,
      );
    }
    expect(readFileSync(foreign).equals(before)).toBe(true);
    expect(existsSync(join(dirname(foreign), 'chat-log.compacted.jsonl'))).toBe(false);
  });

  it.concurrent('a malformed Claude Code file: one line naming the file and the line, nothing written', async () => {
    const r = await xcompact(['inspect', fixture('claude-code/malformed.jsonl')]);
    expectOneLineError(r, /malformed\.jsonl: Claude Code session line 2: not valid JSON .*the transcript could not be imported/);
  });
});
