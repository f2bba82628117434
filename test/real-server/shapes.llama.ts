/**
 * docs/drop-in.md against the real llama-server (`-c 4096`, one slot, the tiny model): a tool loop on
 * each request shape (Chat Completions, Responses, Anthropic Messages), streamed and not, that
 * compacts, recovers a real overflow (the proxy lengthens one request past the window, the server
 * answers it with its own 400) and resumes after a SIGKILL; and a session begun on Chat
 * Completions that finishes on Messages. Everything is counted from the server's side (the
 * proxy's exchanges): 0 requests over the window but the padded ones, every tool call answered in
 * every request. Not in `npm test`: `npm run test:real-server:shapes` (XC_REQUESTS per loop, default 50).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonlStore, Session } from '../../src/index';
import { llamaDir, startLlamaProxy, type Exchange, type LlamaProxy } from '../helpers/llama';
import { runLoop, type Shape } from './shapes-loops';

const CTX = 4096;
const REQUESTS = Number(process.env.XC_REQUESTS ?? 50);
const have = llamaDir() !== undefined;
let llama: LlamaProxy;
let dir: string;
beforeAll(async () => {
  if (!have) return;
  llama = await startLlamaProxy(CTX);
  dir = mkdtempSync(join(tmpdir(), 'xcompact-shapes-'));
}, 180_000);
afterAll(async () => {
  await llama?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const PATHS: Record<Shape, string> = { chat: '/v1/chat/completions', responses: '/v1/responses', messages: '/v1/messages' };

/** What the server saw of one loop: its exchanges since `from`. */
function audit(from: number, shape: Shape) {
  const seen = llama.exchanges.slice(from);
  const agent = seen.filter((e) => e.path === PATHS[shape] && !e.summary);
  const over = seen.filter((e) => !e.padded && (e.status === 400 || (e.promptTokens ?? 0) + (e.completionTokens ?? 0) > CTX));
  const unbalanced = seen.filter((e) => e.unanswered.length > 0 || e.orphans.length > 0);
  return {
    seen,
    agent,
    over,
    unbalanced,
    padded: seen.filter((e) => e.padded),
    summaries: seen.filter((e) => e.summary),
    maxPrompt: Math.max(0, ...seen.filter((e) => !e.padded).map((e) => e.promptTokens ?? 0)),
  };
}
const brief = (e: Exchange) => ({ index: e.index, path: e.path, status: e.status, prompt: e.promptTokens, unanswered: e.unanswered, orphans: e.orphans });

describe.skipIf(!have)('the three shapes against the real llama-server (-c 4096)', () => {
  for (const shape of ['chat', 'responses', 'messages'] as const) {
    for (const stream of [false, true]) {
      it(`${shape} ${stream ? 'streamed' : 'not streamed'}: ${REQUESTS} requests compact, an overflow is recovered, 0 over -c, every call answered`, async () => {
        const from = llama.exchanges.length;
        const session = Session.inMemory();
        const run = await runLoop({
          shape,
          stream,
          url: llama.url,
          session,
          requests: REQUESTS,
          seed: 3,
          ctx: CTX,
          onReply: (n) => {
            if (n === Math.floor(REQUESTS / 2)) llama.padNext(PATHS[shape]);
          },
        });
        const a = audit(from, shape);
        console.log(
          `${shape}${stream ? ' streamed' : ''}: ${run.requests} agent requests, ${run.toolCalls} tool calls, ${a.summaries.length} summaries, ${a.padded.length} padded, ${a.over.length} over -c, max prompt ${a.maxPrompt}, compactions ${session.events().filter((e) => e.type === 'compaction/summary').length}`,
        );
        expect(run.requests).toBe(REQUESTS);
        expect(run.toolCalls).toBeGreaterThan(0);
        expect(a.over.map(brief)).toEqual([]);
        expect(a.unbalanced.map(brief)).toEqual([]);
        expect(a.padded).toHaveLength(1);
        expect(a.padded[0]!.status).toBe(400);
        expect(session.events().filter((e) => e.type === 'compaction/summary').length).toBeGreaterThan(0);
        expect(session.events().filter((e) => e.type === 'compaction/start' && e.data.trigger === 'overflow').length).toBeGreaterThanOrEqual(1);
        // Every agent request the server answered is one the loop counted, and the padded one was sent again.
        expect(a.agent.filter((e) => e.status === 200).length).toBe(REQUESTS);
      }, 1_800_000);
    }
  }

  it('a session begun on chat completions finishes on messages', async () => {
    const from = llama.exchanges.length;
    const store = new JsonlStore(join(dir, 'switch'));
    let session = await Session.open(store, 'switch');
    await runLoop({ shape: 'chat', stream: false, url: llama.url, session, requests: Math.ceil(REQUESTS / 2), seed: 5, ctx: CTX });
    await session.close();
    session = await Session.open(store, 'switch');
    const before = session.length;
    const run = await runLoop({ shape: 'messages', stream: true, url: llama.url, session, requests: Math.ceil(REQUESTS / 2), seed: 6, ctx: CTX });
    const a = audit(from, 'messages');
    expect(run.requests).toBe(Math.ceil(REQUESTS / 2));
    expect(session.length).toBeGreaterThan(before);
    expect(a.over.map(brief)).toEqual([]);
    expect(a.unbalanced.map(brief)).toEqual([]);
    // The first Messages request carried the conversation recorded through chat completions.
    const first = a.seen.find((e) => e.path === '/v1/messages' && !e.summary)!;
    expect(first.body!.messages!.length).toBeGreaterThan(2);
    await session.close();
  }, 1_800_000);

  for (const shape of ['responses', 'messages'] as const) {
    it(`${shape}: a loop killed with SIGKILL resumes from its session`, async () => {
      const from = llama.exchanges.length;
      const sessionDir = join(dir, `kill-${shape}`);
      const child = (requests: number, killAt?: number) =>
        new Promise<{ replies: number; killed: boolean }>((resolve, reject) => {
          const p = spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'shapes-child.ts')], {
            env: {
              ...process.env,
              XC_URL: llama.url,
              XC_DIR: sessionDir,
              XC_SHAPE: shape,
              XC_STREAM: shape === 'messages' ? '1' : '0',
              XC_REQUESTS: String(requests),
              XC_SEED: '9',
              XC_CTX: String(CTX),
            },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          let replies = 0;
          let err = '';
          p.stderr.on('data', (d: Buffer) => (err += d.toString()));
          p.stdout.on('data', (d: Buffer) => {
            for (const m of d.toString().matchAll(/reply (\d+)/g)) {
              replies = Number(m[1]);
              if (killAt !== undefined && replies >= killAt) p.kill('SIGKILL');
            }
          });
          p.on('exit', (code, signal) =>
            signal === 'SIGKILL'
              ? resolve({ replies, killed: true })
              : code === 0
                ? resolve({ replies, killed: false })
                : reject(new Error(`child exited ${code}: ${err.slice(-2000)}`)),
          );
        });
      const first = await child(1000, Math.ceil(REQUESTS / 3));
      expect(first.killed).toBe(true);
      const second = await child(Math.ceil(REQUESTS / 3));
      expect(second.killed).toBe(false);
      const session = await Session.open(new JsonlStore(sessionDir), 'resume');
      expect(session.needsRecovery).toBe(false);
      const a = audit(from, shape);
      expect(a.over.map(brief)).toEqual([]);
      expect(a.unbalanced.map(brief)).toEqual([]);
      expect(session.events().filter((e) => e.type === 'assistant/message').length).toBeGreaterThanOrEqual(first.replies + second.replies);
      await session.close();
    }, 1_800_000);
  }
});
