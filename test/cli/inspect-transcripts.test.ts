/**
 * `xcompact inspect` on recorded sessions: the windows of the models the shipped transcripts
 * use are known, the gap between the anchored figure and our own estimate is explained, the
 * window says where it comes from and what the writer recorded, and the writer's own
 * tokenizer (from the meter snapshot a JsonlStore writer saves) is shown and used.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { runInspect } from '../../src/cli/inspect';
import { createCompactionEngine } from '../../src/engine/facade';
import { JsonlStore, Session, SessionWriter } from '../../src/session/index';
import { recordingSummarizer, SMALL_CONFIG, SYSTEM_PROMPT } from '../helpers/engine';
import { removeTempDirs, tempDir } from '../helpers/session';
import { CLAUDE_REAL, CODEX_REAL } from '../helpers/transcripts';

afterAll(removeTempDirs);

function sink(): NodeJS.WriteStream & { text: string } {
  const w = new Writable({
    write(chunk: Buffer, _enc, done) {
      w.text += chunk.toString();
      done();
    },
  }) as unknown as NodeJS.WriteStream & { text: string };
  w.text = '';
  return w;
}

describe('inspect on recorded sessions', () => {
  it('knows the window of claude-opus-4-5 and explains the gap between the anchored figure and its own estimate', async () => {
    const out = sink();
    const r = await runInspect(CLAUDE_REAL, { color: false }, out);
    expect(r.route).toMatchObject({ provider: 'anthropic', model: 'claude-opus-4-5-20251101' });
    expect(r.pressure).toMatchObject({ window: 200_000, windowSource: 'model entry', anchored: true });
    const gap = r.pressure.gap!;
    expect(gap.tokens).toBe(r.pressure.totalTokens - r.pressure.estimatedTokens);
    expect(gap.tokenizer + gap.unrecorded).toBe(gap.tokens);
    expect(gap.unrecorded).toBeGreaterThan(gap.tokenizer);
    expect(out.text).toMatch(
      /gap +[\d,]+ tokens between the two: -?[\d,]+ the provider's tokenizer counts beyond ours \(×\d\.\d{3}\), [\d,]+ the provider counted that the log does not hold \(what the harness sends without recording it/,
    );
    expect(out.text).not.toMatch(/window unknown/);
  });

  it("shows gpt-5.1-codex's window beside the one Codex recorded", async () => {
    const out = sink();
    const r = await runInspect(CODEX_REAL, { color: false }, out);
    const recorded = Number(/"model_context_window":(\d+)/.exec(readFileSync(CODEX_REAL, 'utf8'))![1]);
    expect(r.pressure).toMatchObject({ window: 400_000, recordedWindow: recorded });
    expect(out.text).toMatch(
      new RegExp(`window +400,000 tokens .* · from the model entry \\(config or built-in\\); the writer recorded ${recorded.toLocaleString('en-US')}`),
    );
  });

  it("reads the writer's tokenizer from the session's meter snapshot and measures with it", async () => {
    const dir = tempDir();
    const session = await Session.open(new JsonlStore(dir, { sync: false }), 's');
    const engine = createCompactionEngine({
      session,
      models: { 'test/wide': { contextWindow: 9_000, maxOutputTokens: 500, tokenizer: 'cl100k_base' } },
      config: SMALL_CONFIG,
      summarizer: recordingSummarizer(),
    });
    const w = new SessionWriter(session);
    w.startTurn();
    w.request({ provider: 'test', model: 'wide', systemPrompt: SYSTEM_PROMPT, tools: [], maxTokens: 500 });
    w.user('Build the module.');
    for (let i = 0; i < 3; i++) {
      w.startStep();
      w.request({ provider: 'test', model: 'wide', systemPrompt: SYSTEM_PROMPT, tools: [], maxTokens: 500 });
      const m = engine.measure();
      w.assistant({
        text: `step ${i}`,
        toolCalls: [{ id: `c${i}`, name: 'bash', arguments: '{"command":"make"}' }],
        usage: { promptTokens: m.calibratedTokens + 3, completionTokens: 5 },
      });
      w.toolResult(`c${i}`, `built part ${i}`, { toolName: 'bash' });
      await engine.afterStep();
      w.endStep();
    }
    w.endTurn();
    engine.stop();
    await session.close();
    const r = await runInspect(join(dir, 's.jsonl'), { json: true }, sink());
    expect(r.pressure.recordedTokenizer).toBe('cl100k_base');
    expect(r.pressure.tokenizer).toBe('cl100k_base');
  });
});
