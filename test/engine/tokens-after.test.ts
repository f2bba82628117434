/**
 * A compaction's `tokensAfter` is what the next request costs: compared with the prompt tokens
 * the provider (the local server) reports for that request, over HTTP through the AI SDK
 * adapter (examples/ai-sdk.ts). The meter carries its provider anchor across the replace by
 * what the provider counted for the nodes that left; carried by our price of them times a
 * ratio learned on other text, a span of prose removed after steps of code left the figure
 * 79% above the server's next report.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generateSandbox, runExample, scriptedReader } from '../../examples/ai-sdk';
import type { SessionEvent } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { startOpenAIServer } from '../../src/testing/index';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Design notes in plain prose, under the pruner's threshold so only a compaction removes them. */
function notes(chars: number, seed: number): string {
  const words =
    'the retry policy decides when a failed request is sent again and how long the client waits before it tries once more while the server recovers from load'.split(
      ' ',
    );
  let text = '# Design notes\n\n';
  for (let i = 0; text.length < chars; i++) text += words[(i * 7 + seed) % words.length] + (i % 17 === 16 ? '.\n' : ' ');
  return text;
}

/** Each compaction's tokensAfter and the prompt the server reported for the next request. */
function afterAndReported(
  session: Session,
  records: ReadonlyArray<{ checkpointSeq: number; tokensAfter: number }>,
): Array<{ after: number; reported: number }> {
  const log = session.events();
  return records.map((r) => {
    const next = log.find(
      (e): e is SessionEvent<'assistant/message'> => e.seq > r.checkpointSeq && e.type === 'assistant/message' && e.data.usage !== undefined,
    );
    return { after: r.tokensAfter, reported: next!.data.usage!.promptTokens };
  });
}

describe('tokensAfter is the next request’s prompt, as the provider reports it', () => {
  it.each([
    { name: '12 source files', noteCount: 0 },
    { name: '3 prose notes, then 12 source files', noteCount: 3 },
  ])(
    'AI SDK example, $name: within 5 percent of the server’s next report',
    async ({ noteCount }) => {
      const dir = mkdtempSync(join(tmpdir(), 'xcompact-tokens-after-'));
      dirs.push(dir);
      const files: string[] = [];
      for (let k = 0; k < noteCount; k++) {
        writeFileSync(join(dir, `a-notes-${k}.md`), notes(7800, k));
        files.push(`a-notes-${k}.md`);
      }
      files.push(...(await generateSandbox(dir, 12)));
      const prompts = ['Where are HTTP retries decided? Read every file first.'];
      const server = await startOpenAIServer({ scenarios: scriptedReader(files, prompts), defaultModel: 'scripted' });
      try {
        const session = Session.inMemory();
        // Foreground: only there does the next request directly follow the commit. A background
        // commit lands while the agent goes on, so the next request also carries what it appended since.
        const run = await runExample({
          baseURL: server.baseURL,
          model: 'scripted',
          contextWindow: 16_384,
          session,
          sandbox: dir,
          prompts,
          config: { background: false },
        });
        expect(run.compactions.length).toBeGreaterThanOrEqual(1);
        for (const { after, reported } of afterAndReported(session, run.compactions)) {
          expect(Math.abs(after - reported) / reported, `tokensAfter ${after}, the server then reported ${reported}`).toBeLessThanOrEqual(0.05);
        }
      } finally {
        await server.close();
      }
    },
    60_000,
  );
});
