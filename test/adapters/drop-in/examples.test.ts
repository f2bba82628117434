/**
 * examples/openai-drop-in.ts and examples/ai-sdk-drop-in.ts run end to end as a user runs them
 * (`npx tsx …`, the scripted local model of examples/local-model.ts): the tool loop finishes
 * through a compaction and a vLLM-style empty-body overflow, and a second run with the same
 * SESSION continues the first conversation from the session file alone.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'xcompact-drop-in-examples-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(example: string, args: string[] = []): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, SESSION_DIR: dir, OPENAI_BASE_URL: '', NODE_OPTIONS: '' };
  delete (env as Record<string, string | undefined>).OPENAI_BASE_URL;
  return new Promise((done) => {
    execFile(process.execPath, ['node_modules/tsx/dist/cli.mjs', `examples/${example}`, ...args], { env }, (err, stdout, stderr) =>
      done({ code: err ? 1 : 0, stdout: String(stdout), stderr: String(stderr) }),
    );
  });
}

const recordedTypes = (id: string) =>
  readFileSync(join(dir, `${id}.jsonl`), 'utf8')
    .trim()
    .split('\n')
    .map((l) => (JSON.parse(l) as { type: string }).type);

describe('the drop-in examples, run as a user runs them', () => {
  for (const [example, id] of [
    ['openai-drop-in.ts', 'drop-in'],
    ['ai-sdk-drop-in.ts', 'ai-sdk-drop-in'],
  ] as const) {
    it(`${example}: the loop finishes through a compaction and a recovered overflow; a second run continues the session`, async () => {
      const first = await run(example);
      expect(first.stderr).toBe('');
      expect(first.code).toBe(0);
      expect(first.stdout).toContain('I looked up 12 topics; the answer is in topic 12.');
      expect(first.stdout).toMatch(/local model: 14 requests, [1-9]\d* summary requests, 1 overflow recovered/);
      const types = recordedTypes(id);
      expect(types.filter((t) => t === 'compaction/summary').length).toBeGreaterThan(0);
      expect(types.filter((t) => t === 'assistant/message')).toHaveLength(13);

      const second = await run(example, ['And again?']);
      expect(second.code, second.stderr).toBe(0);
      expect(second.stdout).toContain('I looked up 12 topics');
      const after = recordedTypes(id);
      // The second run appended to the first conversation: one more user message, nothing recorded twice.
      expect(after.slice(0, types.length)).toEqual(types);
      expect(after.filter((t) => t === 'user/message').length).toBeGreaterThanOrEqual(2);
      expect(after.filter((t) => t === 'assistant/message')).toHaveLength(26);
    });
  }
});
