/**
 * xcompact/ai-sdk after a real SIGKILL between a tool-call reply and its results: the adapter had
 * recorded (and flushed) the reply with its calls; the tools never returned. On restart the
 * documented loop `[...compaction.messages(), prompt]` must go on (the adapter closes the open
 * step as the openai drop-in does: each call gets an "interrupted" error result), not throw the
 * AI SDK's AI_MissingToolResultsError on every restart. Both points of a tool step: a single call,
 * and a parallel batch with one result in and one still running.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonlStore, Session } from '../../../src/index';
import { startOpenAIServer, type LocalOpenAIServer, type Scenario } from '../../../src/testing/index';
import { nodeBundle } from '../../helpers/node-bundle';

const AGENT = join(import.meta.dirname, '../../fixtures/ai-sdk-kill/agent.ts');

let server: LocalOpenAIServer;
let dir: string;
/** Which tools the scripted model calls in reply to a user message (one step); a tool result is answered in text. */
let calls: string[] = [];
let answers = 0;
beforeAll(async () => {
  server = await startOpenAIServer({
    defaultModel: 'm',
    scenarios: (req): Scenario => {
      const last = req.body.messages?.[req.body.messages.length - 1];
      if (last?.role === 'user' && calls.length > 0)
        return { kind: 'reply', toolCalls: calls.map((name, k) => ({ id: `call_${req.index}_${k}`, name, arguments: '{"at":"home"}' })) };
      return { kind: 'reply', content: `Answer ${++answers}.` };
    },
  });
  dir = mkdtempSync(join(tmpdir(), 'xcompact-ai-sdk-kill-'));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** One process of the documented loop; with `killAtTool`, SIGKILLed as soon as that tool runs. */
async function run(prompt: string, killAtTool?: string): Promise<Run> {
  // Bundled once for the file's several starts (test/helpers/node-bundle.ts): the same code, without tsx's ~2.5 s of CPU a start.
  const agent = await nodeBundle(AGENT);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [agent], {
      env: {
        ...process.env,
        XCOMPACT_BASE_URL: server.baseURL,
        XCOMPACT_SESSION_DIR: dir,
        XCOMPACT_PROMPT: prompt,
        ...(killAtTool ? { XCOMPACT_HANG_TOOL: killAtTool } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (killAtTool && stdout.includes('TOOL ')) child.kill('SIGKILL');
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

async function log() {
  const session = await Session.open(new JsonlStore(dir), 'killed');
  const events = [...session.events()];
  await session.close();
  return events;
}

describe('xcompact/ai-sdk: a process SIGKILLed mid tool step is continued by the documented loop', () => {
  it('killed after the tool-call reply was recorded: the restart answers the interrupted call and goes on', async () => {
    calls = ['room'];
    const killed = await run('Look at the room.', 'room');
    expect(killed.signal).toBe('SIGKILL');
    const before = await log();
    const callIds = before.flatMap((e) => (e.type === 'assistant/message' ? e.data.content.flatMap((b) => (b.type === 'tool-call' ? [b.id] : [])) : []));
    expect(callIds).toHaveLength(1);
    expect(before.some((e) => e.type === 'tool/result')).toBe(false);

    calls = [];
    const restarted = await run('Go on.');
    expect(restarted.stderr).not.toMatch(/MissingToolResults|history-diverged/);
    expect(restarted.code).toBe(0);
    expect(restarted.stdout).toMatch(/ANSWER Answer \d+\./);
    const after = await log();
    // The interrupted call has its error result, and the request after the restart sent it.
    const result = after.find((e) => e.type === 'tool/result' && e.data.callId === callIds[0]);
    expect(result).toMatchObject({ data: { isError: true } });
    const sent = JSON.parse(server.requests[server.requests.length - 1]!.raw) as { messages: Array<{ role: string; tool_call_id?: string }> };
    expect(sent.messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id)).toEqual(callIds);
    // Nothing recorded twice: each user prompt once.
    const users = after.filter((e) => e.type === 'user/message').map((e) => JSON.stringify(e.data.content));
    expect(new Set(users).size).toBe(users.length);
  });

  it('killed with one result of a parallel batch in and one still running: the restart closes the batch and goes on', async () => {
    calls = ['room', 'desk'];
    const killed = await run('Look at the room and the desk.', 'desk');
    expect(killed.signal).toBe('SIGKILL');
    const before = await log();
    const pending = before.flatMap((e) => (e.type === 'assistant/message' ? e.data.content.flatMap((b) => (b.type === 'tool-call' ? [b.id] : [])) : []));
    expect(pending.length).toBeGreaterThanOrEqual(3);

    calls = [];
    const restarted = await run('And now?');
    expect(restarted.stderr).not.toMatch(/MissingToolResults|history-diverged/);
    expect(restarted.code).toBe(0);
    expect(restarted.stdout).toMatch(/ANSWER Answer \d+\./);
    const after = await log();
    for (const id of pending) expect(after.filter((e) => e.type === 'tool/result' && e.data.callId === id)).toHaveLength(1);
    expect(after.filter((e) => e.type === 'turn/end').map((e) => e.data.reason)).toEqual(['interrupted', 'completed', 'interrupted', 'completed']);
  });
});
