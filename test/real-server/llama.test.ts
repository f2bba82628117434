/**
 * docs/testing.md: xcompact against a real llama.cpp server (`-c 4096 -np 1 --jinja`, the tiny
 * model of ../shared/tools/llama), every request counted from the server's side by a logging
 * proxy: the drop-in loop (`tokenizer: 'server'`), the AI SDK loop (o200k), and the drop-in
 * loop in a child process killed with SIGKILL and resumed from its JSONL session. Each asserts
 * 0 requests over `-c` (prompt + max_tokens within it too), 0 500s from a broken history, 0
 * requests the engine did not check first, every tool call answered in every request, and the
 * resumed session answering after every kill.
 *
 * Not part of `npm test`: `npm run test:real-server` (its own vitest config). Sizes:
 * XCOMPACT_REAL_SERVER_SCALE (default 1: 60 + 50 + 45 agent requests, plus the summaries).
 * Without a server binary the suite is skipped with one line saying how to get one.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Session } from '../../src/session/session';
import { HOW_TO_GET_A_SERVER, figures, llamaDir, startLlama, startProxy, type Exchange, type Figures, type Llama, type Proxy } from './helpers';
import { aiSdkLoop, dropInLoop } from './loops';

const CTX = 4096;
const SCALE = Number(process.env.XCOMPACT_REAL_SERVER_SCALE ?? '1');
const size = (n: number) => Math.max(4, Math.round(n * SCALE));
const available = llamaDir() !== undefined;
if (!available) console.log(HOW_TO_GET_A_SERVER);

let llama: Llama;
let proxy: Proxy;
const started = Date.now();
const report: Record<string, unknown> = {};

/** The exchanges since `from`, checked for what the issue asks; returns the figures. */
function judge(label: string, from: number): Figures {
  const mine: Exchange[] = proxy.exchanges.slice(from);
  const f = figures(mine, CTX);
  report[label] = f;
  console.log(`[real-server] ${label}: ${JSON.stringify(f)}`);
  expect(f.agentRequests, `${label}: agent requests`).toBeGreaterThan(0);
  expect(f.overWindow, `${label}: requests over -c`).toBe(0);
  expect(f.overWindowWithOutput, `${label}: prompt + max_tokens over -c`).toBe(0);
  expect(f.brokenHistory500, `${label}: 500s from a broken history`).toBe(0);
  expect(f.unchecked, `${label}: requests sent with no pressure check`).toBe(0);
  expect(f.unpaired, `${label}: tool calls without their result`).toEqual([]);
  return f;
}

describe.skipIf(!available)('against a real llama-server -c 4096 -np 1 --jinja (docs/testing.md)', () => {
  beforeAll(async () => {
    llama = await startLlama(CTX);
    proxy = await startProxy(llama.url);
  }, 180_000);

  afterAll(async () => {
    const all = figures(proxy?.exchanges ?? [], CTX);
    report.all = { ...all, seconds: Math.round((Date.now() - started) / 1000) };
    console.log(`[real-server] all: ${JSON.stringify(report.all)}`);
    if (process.env.XCOMPACT_REAL_SERVER_REPORT) writeFileSync(process.env.XCOMPACT_REAL_SERVER_REPORT, JSON.stringify(report, null, 2));
    await proxy?.close();
    await llama?.stop();
  });

  it('the drop-in loop, tokenizer server', async () => {
    const from = proxy.exchanges.length;
    const run = await dropInLoop({
      baseURL: `${proxy.url}/v1`,
      session: Session.inMemory(),
      requests: size(60),
      tokenizer: 'server',
      proc: 'drop-in',
      seed: 1,
    });
    report.dropIn = run;
    expect(run.errors).toEqual([]);
    expect(run.requests).toBe(size(60));
    judge('drop-in', from);
  }, 3_600_000);

  it('the AI SDK loop, tokenizer o200k', async () => {
    const from = proxy.exchanges.length;
    const run = await aiSdkLoop({
      baseURL: `${proxy.url}/v1`,
      tokenizeUrl: `${proxy.url}/tokenize`,
      session: Session.inMemory(),
      requests: size(50),
      tokenizer: 'o200k_base',
      proc: 'ai-sdk',
      seed: 2,
    });
    report.aiSdk = run;
    expect(run.errors).toEqual([]);
    expect(run.requests).toBeGreaterThanOrEqual(size(50));
    judge('ai-sdk', from);
  }, 3_600_000);

  it('SIGKILL and resume: the drop-in loop in a child process, killed three times, answers after every kill', async () => {
    const from = proxy.exchanges.length;
    const dir = mkdtempSync(join(tmpdir(), 'xcompact-real-kill-'));
    const total = size(45);
    const kills = 3;
    const perRun = Math.max(2, Math.floor(total / (kills + 1)));
    const answeredAfter: number[] = [];
    try {
      for (let k = 0; k <= kills; k++) {
        const last = k === kills;
        const child = spawn(process.execPath, ['--import', 'tsx', join(dirname(fileURLToPath(import.meta.url)), 'child.ts')], {
          env: {
            ...process.env,
            XC_BASE_URL: `${proxy.url}/v1`,
            XC_DIR: dir,
            XC_REQUESTS: String(last ? perRun : perRun * 4),
            XC_PROC: `kill-${k}`,
            XC_TOKENIZER: 'server',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let replies = 0;
        let out = '';
        let err = '';
        child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
        const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
        await new Promise<void>((res) => {
          child.stdout.on('data', (d: Buffer) => {
            out += d.toString();
            replies = (out.match(/^reply /gm) ?? []).length;
            // Killed after a few replies, at a moment that varies: mid-request, mid-summary, mid-write.
            if (!last && replies >= perRun) setTimeout(() => (child.kill('SIGKILL'), res()), (k * 977) % 2500);
          });
          void exited.then(() => res());
        });
        const code = await exited;
        answeredAfter.push(replies);
        if (last) expect(out, `the last run ends normally: ${err}`).toMatch(/^done /m);
        else expect(code === null || code === 0, `run ${k} exit: ${err}`).toBe(true);
        if (last) report.kill = JSON.parse(out.slice(out.indexOf('done ') + 5).split('\n')[0]!);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    report.answeredAfterEachStart = answeredAfter;
    // The session answered in every process: the first, and each one started after a SIGKILL.
    expect(
      answeredAfter.every((n) => n > 0),
      `replies per process: ${answeredAfter.join(', ')}`,
    ).toBe(true);
    judge('sigkill-resume', from);
  }, 3_600_000);
});
