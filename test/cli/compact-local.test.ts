/**
 * The CLI's small ones (docs/cli.md): a failed `xcompact compact` leaves no file behind (not
 * even the meter's `<output>.prices` sidecar), and `compact` accepts `--no-color` as `inspect` does.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCompact } from '../../src/cli/compact';
import { Session } from '../../src/session/session';
import { JsonlStore } from '../../src/session/stores/jsonl';
import { SessionWriter } from '../../src/session/writer';
import { startOpenAIServer, type LocalOpenAIServer } from '../../src/testing/openai-server';
import { spawnXcompact } from '../helpers/cli';

let server: LocalOpenAIServer;
let dir: string;

async function writeSession(at: string, id: string): Promise<string> {
  const session = await Session.open(new JsonlStore(at), id);
  const w = new SessionWriter(session);
  w.system('You are a coding agent.');
  for (let t = 0; t < 6; t++) {
    w.startTurn();
    w.user(`Please look at module ${t} and tell me what its exports do; ${'details '.repeat(60)}`);
    w.startStep();
    w.request({ provider: 'local', model: 'm', systemPrompt: 'You are a coding agent.', tools: [] });
    w.assistant({ text: `Module ${t} exports two functions. ${'explained '.repeat(60)}` });
    w.endStep();
    w.endTurn('completed');
  }
  await session.close();
  return join(at, `${id}.jsonl`);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'xcompact-cli-local-'));
  // A summary cut by max_tokens: the compaction fails.
  server = await startOpenAIServer({ scenarios: () => ({ kind: 'reply', content: 'The', finishReason: 'length' }) });
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('xcompact compact, small ones (docs/cli.md)', () => {
  it('a failed compact leaves no output and no .prices sidecar', async () => {
    const at = join(dir, 'failed');
    const input = await writeSession(at, 'work');
    const before = readdirSync(at).sort();
    const sink = { write: () => true } as unknown as NodeJS.WritableStream;
    await expect(
      runCompact(
        input,
        { summarizer: 'openai', baseUrl: server.baseURL, model: 'local/m', apiKeyEnv: 'XCOMPACT_TEST_NO_KEY', contextWindow: 32768, maxTokens: 1 },
        sink,
      ),
    ).rejects.toThrow();
    expect(readdirSync(at).sort()).toEqual(before);
  });

  it('compact accepts --no-color', async () => {
    const at = join(dir, 'color');
    const input = await writeSession(at, 'plain');
    const r = await spawnXcompact(['compact', input, '--summarizer', 'extractive', '--no-color']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('compacted');
  });
});
