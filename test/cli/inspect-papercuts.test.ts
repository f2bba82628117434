/**
 * `xcompact inspect` as a new user meets it: a session a drop-in wrote with its own `models`
 * window is measured against that window (the request header carries it), and a background
 * summary a normal `close()` cancelled is reported as cancelled, not as a failure.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonlStore, Session, SessionWriter, withCompaction } from '../../src/index';
import { startOpenAIServer, type LocalOpenAIServer } from '../../src/testing/index';
import { xcompact } from '../helpers/cli';
import { removeTempDirs, tempDir } from '../helpers/session';

let server: LocalOpenAIServer;
beforeAll(async () => {
  server = await startOpenAIServer();
});
afterAll(async () => {
  await server.close();
  removeTempDirs();
});

describe('xcompact inspect, papercuts', () => {
  it('measures a drop-in session against the window of its `models` entry, read from the request header', async () => {
    const dir = tempDir();
    const session = await Session.open(new JsonlStore(dir), 'dropin');
    server.setHandler(() => ({ kind: 'reply', content: 'hello back' }));
    const ai = withCompaction(new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }), {
      session,
      models: { 'my-local-model': { contextWindow: 6_000, maxOutputTokens: 500 } },
    });
    await ai.chat.completions.create({
      model: 'my-local-model',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hello' },
      ],
    });
    await ai.compaction.close();

    const file = join(dir, 'dropin.jsonl');
    const header = readFileSync(file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; data: Record<string, unknown> })
      .find((e) => e.type === 'request/header');
    expect(header?.data.contextWindow).toBe(6_000);
    const r = await xcompact(['inspect', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(/window unknown/);
    expect(r.stdout).toMatch(/window\s+6,000 tokens/);
    expect(r.stdout).toMatch(/threshold\s+[\d,]+/);
    // Without the header's window (an older log) it still says what to pass.
    const old = join(dir, 'old.jsonl');
    writeFileSync(old, readFileSync(file, 'utf8').replace(/,"contextWindow":6000/g, ''));
    expect((await xcompact(['inspect', old])).stdout).toMatch(/window unknown: local\/my-local-model .* pass --context-window/);
  });

  it('reports a background summary cancelled by close() as cancelled, and a real failure as failed', async () => {
    const dir = tempDir();
    const session = await Session.open(new JsonlStore(dir), 'closed');
    const w = new SessionWriter(session);
    w.request({ provider: 'openai', model: 'gpt-4o-mini', systemPrompt: 'sys', tools: [] });
    w.startTurn();
    w.user('first');
    w.assistant({ text: 'one' });
    // What a close() during a background summary leaves, then a summary that failed.
    session.append({ type: 'compaction/start', data: { turn: 0, trigger: 'pressure', background: true } });
    session.append({
      type: 'compaction/end',
      data: { turn: 0, error: { code: 'cancelled', message: 'the background compaction was cancelled: the engine was closed' } },
    });
    session.append({ type: 'compaction/start', data: { turn: 0, trigger: 'pressure' } });
    session.append({ type: 'compaction/end', data: { turn: 0, error: { code: 'summary', message: 'the summarizer answered with an empty text' } } });
    w.endTurn();
    await session.flush();

    const r = await xcompact(['inspect', join(dir, 'closed.jsonl'), '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as { failedCompactions: Array<{ code: string }>; cancelledCompactions: Array<{ message: string }> };
    expect(report.failedCompactions.map((f) => f.code)).toEqual(['summary']);
    expect(report.cancelledCompactions).toHaveLength(1);
    const text = await xcompact(['inspect', join(dir, 'closed.jsonl')]);
    expect(text.stdout).toMatch(/, 1 failed, 1 cancelled/);
    expect(text.stdout).toMatch(/cancelled at seq \d+: the background compaction was cancelled/);
    expect(text.stdout.match(/failed at seq/g)).toHaveLength(1);
  });

  it('`inspect --help` names every transcript it reads', async () => {
    const r = await xcompact(['inspect', '--help']);
    for (const name of ['xcompact', 'pi', 'Claude Code', 'Codex']) expect(r.stdout).toContain(name);
  });
});
