/**
 * The example agent loop's input: lines typed or piped at its prompt. Piped input is usually
 * all there (and closed) before the loop first asks for a line, while the session is still
 * opening; readline's own async iterator only sees lines emitted after it is attached, so those
 * lines were dropped (3 of 10 runs on Node 20), and the prompt written after the end of input
 * threw "readline was closed" on Node 24. Checked in-process with the input written and ended
 * before the first read, and end to end by piping into real processes.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { promptedLines } from '../../examples/agent-loop';
import { startOpenAIServer } from '../../src/testing/openai-server';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const EXAMPLE = join(ROOT, 'examples', 'agent-loop.ts');
const dir = mkdtempSync(join(tmpdir(), 'xcompact-agent-input-'));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Reads every line the way the loop does: asks late, and does slow work between lines. */
async function consume(lines: AsyncIterable<string>, workMs = 5): Promise<string[]> {
  await sleep(30); // the session opens, the engine starts: I/O before the first read
  const got: string[] = [];
  for await (const line of lines) {
    got.push(line);
    await sleep(workMs); // a turn: requests, tools
  }
  return got;
}

function outputOf(): { stream: PassThrough; text: () => string } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (d: Buffer) => (text += d.toString()));
  return { stream, text: () => text };
}

describe("promptedLines: the lines at the example loop's prompt", () => {
  it('keeps lines that were piped and closed before the loop first asked', async () => {
    const input = new PassThrough();
    input.end('first request\nsecond request\n/compact the retry logic\nthird request\n/exit\nnever read\n');
    const out = outputOf();
    const prompt = promptedLines(input, out.stream);
    await expect(consume(prompt.lines)).resolves.toEqual(['first request', 'second request', '/compact the retry logic', 'third request']);
    prompt.close();
  });

  it('ends cleanly at the end of input without /exit, keeping a last line with no newline', async () => {
    const input = new PassThrough();
    input.end('only request\nlast without newline');
    const prompt = promptedLines(input, outputOf().stream);
    await expect(consume(prompt.lines)).resolves.toEqual(['only request', 'last without newline']);
    // Closing after the input has ended is not an error (the CLI closes in its finally).
    expect(() => prompt.close()).not.toThrow();
  });

  it('shows the prompt while waiting for a typed line, and reads lines typed during a turn', async () => {
    const input = new PassThrough();
    const out = outputOf();
    const prompt = promptedLines(input, out.stream, '> ');
    const reading = consume(prompt.lines, 40);
    await sleep(50);
    expect(out.text()).toBe('> ');
    input.write('hi\n');
    await sleep(10);
    input.write('typed while the first turn runs\n');
    await sleep(100);
    input.end('/exit\n');
    await expect(reading).resolves.toEqual(['hi', 'typed while the first turn runs']);
    prompt.close();
  });

  it('keeps every line, in order, of a large pipe read by a slow loop', async () => {
    const sent = Array.from({ length: 5000 }, (_, i) => `request ${i}`);
    const input = new PassThrough();
    input.end(`${sent.join('\n')}\n`);
    const prompt = promptedLines(input, outputOf().stream);
    const got: string[] = [];
    await sleep(30);
    for await (const line of prompt.lines) {
      got.push(line);
      if (got.length % 500 === 0) await sleep(5);
    }
    expect(got).toEqual(sent);
    prompt.close();
  });
});

/** The example as its header shows it: `printf '…' | npx tsx examples/agent-loop.ts`. */
function pipeInto(env: Record<string, string>, stdin: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['--import', 'tsx', EXAMPLE], {
      cwd: ROOT,
      env: { ...process.env, NO_COLOR: '1', OPENAI_API_KEY: 'test', PROVIDER: 'local', MODEL: 'piped-model', CONTEXT_WINDOW: '32000', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
    // Written and closed at once: all of it is in the pipe before the process reads anything.
    child.stdin.end(stdin);
  });
}

describe('examples/agent-loop.ts with piped input', () => {
  it('sends every piped request and exits 0, in each of several runs', async () => {
    const server = await startOpenAIServer({
      scenarios: ({ body }) => {
        const last = body.messages?.at(-1);
        return { kind: 'reply', content: `answered: ${typeof last?.content === 'string' ? last.content : '?'}` };
      },
    });
    try {
      // Each run lost its input with some probability (about 1 in 3 on Node 20); several runs
      // make a regression near-certain to show.
      const runs = await Promise.all(
        Array.from({ length: 4 }, (_, i) => {
          const at = join(dir, `run-${i}`);
          mkdirSync(join(at, 'sandbox'), { recursive: true });
          return pipeInto(
            { OPENAI_BASE_URL: server.baseURL, SANDBOX: join(at, 'sandbox'), SESSION_DIR: join(at, 'sessions'), SESSION: `piped-${i}` },
            `hi ${i}\nagain ${i}\n/exit\n`,
          );
        }),
      );
      runs.forEach((r, i) => {
        expect(r.code, r.stderr).toBe(0);
        expect(r.stderr).toBe('');
        expect(r.stdout).toContain(`answered: hi ${i}`);
        expect(r.stdout).toContain(`answered: again ${i}`);
      });
      expect(server.requests.filter((r) => r.path === '/v1/chat/completions')).toHaveLength(8);
    } finally {
      await server.close();
    }
  });
});
