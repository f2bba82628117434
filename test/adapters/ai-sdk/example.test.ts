/**
 * examples/ai-sdk.ts runs as documented: as a process against the local server by default,
 * and as a function (every request the server received valid, a compaction mid tool loop,
 * the answer after it); examples/otel.ts prints the spans and metrics of that run.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { generateSandbox, runExample, scriptedReader } from '../../../examples/ai-sdk';
import { main as otelExample } from '../../../examples/otel';
import { Session } from '../../../src/session/session';
import { startOpenAIServer, type ChatRequestBody } from '../../../src/testing/index';
import { openAIMessageProblems } from '../../helpers/openai-validator';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('examples/ai-sdk.ts', () => {
  it('runs as a process against the local server with no settings', async () => {
    const env = { ...process.env };
    delete env.OPENAI_BASE_URL;
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'examples/ai-sdk.ts'], { env });
    expect(stdout).toMatch(/\[xcompact\] pressure compaction: \d+ messages → 1 checkpoint/);
    expect(stdout).toContain('I read 12 files; HTTP retries are decided in service-11.ts.');
  });

  it('compacts in the middle of the tool loop and every request is valid', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'xcompact-ai-sdk-example-'));
    dirs.push(dir);
    const files = await generateSandbox(dir, 12);
    const prompts = ['Where are HTTP retries decided?', 'And the jitter?'];
    const server = await startOpenAIServer({ scenarios: scriptedReader(files, prompts), defaultModel: 'scripted' });
    try {
      const session = Session.inMemory();
      const run = await runExample({ baseURL: server.baseURL, model: 'scripted', contextWindow: 16_384, session, sandbox: dir, prompts });
      expect(run.answers).toHaveLength(2);
      expect(run.answers[0]).toContain('I read 12 files');
      expect(run.compactions.filter((c) => c.trigger === 'pressure').length).toBeGreaterThanOrEqual(1);
      // The compaction happened before the model's last read: mid tool loop.
      const log = session.events();
      const firstCompaction = log.findIndex((e) => e.type === 'compaction/start');
      const lastResult = log.findLastIndex((e) => e.type === 'tool/result');
      expect(firstCompaction).toBeGreaterThan(0);
      expect(firstCompaction).toBeLessThan(lastResult);
      for (const r of server.requests) expect(openAIMessageProblems((r.json as ChatRequestBody).messages ?? [])).toEqual([]);
    } finally {
      await server.close();
    }
  });

  it('examples/otel.ts records the compaction as a span and counts it', async () => {
    const lines: string[] = [];
    await otelExample((l) => lines.push(l));
    const span = lines.find((l) => l.startsWith('span xcompact.compaction '));
    expect(span).toBeDefined();
    const attrs = JSON.parse(span!.slice('span xcompact.compaction '.length)) as Record<string, unknown>;
    expect(attrs).toMatchObject({ 'xcompact.trigger': 'pressure', 'xcompact.outcome': 'committed' });
    // One count per committed compaction span (background compaction may commit more than one).
    const committed = lines.filter((l) => l.startsWith('span xcompact.compaction ') && l.includes('"xcompact.outcome":"committed"')).length;
    expect(committed).toBeGreaterThanOrEqual(1);
    expect(lines).toContain(`metric xcompact.compactions ${committed}`);
    expect(lines.some((l) => /^metric xcompact.wait.duration \d+$/.test(l))).toBe(true);
  });
});
