/**
 * docs/local-models.md#replies-cut-inside-a-tool-call: llama.cpp answers 500 "Failed to parse tool call arguments as JSON" when
 * max_tokens cuts a reply inside a tool call. It is classified as a truncated reply (not a
 * server fault, not an overflow: nothing is compacted), and examples/agent-loop.ts resends the
 * request with a larger budget instead of dying.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { runAgent } from '../../examples/agent-loop';
import { Session } from '../../src/session/session';
import { classifyRequestError } from '../../src/services/overflow';
import { OTHER_ERROR_BODIES, startOpenAIServer } from '../../src/testing/openai-server';

describe("llama.cpp's 500 for a tool call cut by max_tokens", () => {
  it('is classified as a truncated reply', async () => {
    const server = await startOpenAIServer({ scenarios: [{ kind: 'status', ...OTHER_ERROR_BODIES.llamaToolCallTruncated }] });
    try {
      const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
      const err = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
      expect(classifyRequestError(err)).toMatchObject({ kind: 'truncated-reply', status: 500 });
    } finally {
      await server.close();
    }
  });

  it('the example agent loop resends with a larger max_tokens and finishes the turn', async () => {
    const server = await startOpenAIServer({ scenarios: [{ kind: 'status', ...OTHER_ERROR_BODIES.llamaToolCallTruncated }, { kind: 'reply', content: 'Done: nothing to change.' }] });
    const sandbox = mkdtempSync(join(tmpdir(), 'xcompact-trunc-'));
    writeFileSync(join(sandbox, 'a.txt'), 'a');
    const lines: string[] = [];
    try {
      const run = await runAgent({
        client: new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }),
        provider: 'local',
        model: 'qwen',
        contextWindow: 8192,
        maxOutputTokens: 256,
        session: Session.inMemory(),
        sandbox,
        inputs: ['look at a.txt'],
        log: (l) => lines.push(l),
      });
      expect(run.answers).toEqual(['Done: nothing to change.']);
      const sent = server.requests.map((r) => (r.json as { max_tokens?: number }).max_tokens);
      expect(sent).toEqual([256, 512]);
      expect(lines.join('\n')).toContain('cut inside a tool call');
    } finally {
      await server.close();
      rmSync(sandbox, { recursive: true, force: true });
    }
  });
});
