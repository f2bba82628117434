/**
 * `runEval` in-process: real summaries from the local OpenAI-compatible server over HTTP
 * (`--summarizer openai --base-url`), and the progress bar, drawn on a TTY only.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { progressBar, runEval } from '../../src/cli/eval';
import { startOpenAIServer } from '../../src/testing/openai-server';
import { CODEX_REAL } from '../helpers/transcripts';

function sink(isTTY = false): Writable & { text: string; isTTY?: boolean } {
  const w = new Writable({
    write(chunk: Buffer, _enc, done) {
      w.text += chunk.toString();
      done();
    },
  }) as Writable & { text: string; isTTY?: boolean };
  w.text = '';
  if (isTTY) w.isTTY = true;
  return w;
}

describe('xcompact eval, in-process', () => {
  it('--summarizer openai writes the summaries through a real endpoint (the openai SDK over HTTP)', async () => {
    const server = await startOpenAIServer({
      scenarios: () => ({ kind: 'reply', content: 'SUMMARY FROM THE SERVER: the agent rewired chatbot-ui from ollama to lmstudio.' }),
    });
    try {
      const out = sink();
      // The replay lets each background summary land before its next step (src/eval/replay.ts): over
      // HTTP it would otherwise still be on its way when the rollout ends, past the threshold but short
      // of the wait point, and nothing would be committed.
      const results = await runEval([CODEX_REAL], { window: '32k', summarizer: 'openai', baseUrl: server.baseURL }, out, sink());
      const ours = results[0]!.windows[0]!.runs[0]!;
      expect(ours.policy).toBe('xcompact');
      expect(ours.compactions).toBeGreaterThan(0);
      expect(server.requests.length).toBeGreaterThanOrEqual(ours.compactions);
      expect(out.text).toMatch(/real-rollout\.jsonl \(codex, 39 requests\) — window 32,768 tokens/);
    } finally {
      await server.close();
    }
  });

  it("--config is xcompact's: a lower threshold makes it compact more; the peers are unchanged; a bad config is refused", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'xcompact-eval-config-'));
    try {
      const config = join(dir, 'xcompact.config.json');
      writeFileSync(config, JSON.stringify({ thresholdRatio: 0.3, retainRatio: 0.1 }));
      const [base] = await runEval([CODEX_REAL], { window: '32k' }, sink(), sink());
      const [tuned] = await runEval([CODEX_REAL], { window: '32k', config }, sink(), sink());
      const runs = (r: typeof base) => r!.windows[0]!.runs;
      expect(runs(tuned)[0]!.compactions).toBeGreaterThan(runs(base)[0]!.compactions);
      expect(
        runs(tuned)
          .slice(1)
          .map((r) => r.ledger.cost),
      ).toEqual(
        runs(base)
          .slice(1)
          .map((r) => r.ledger.cost),
      );
      writeFileSync(config, JSON.stringify({ thresholdRatio: 7 }));
      await expect(runEval([CODEX_REAL], { window: '32k', config }, sink(), sink())).rejects.toThrow(/thresholdRatio = 7 must be at most 1/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('--summarizer openai without an endpoint is refused before anything runs', async () => {
    const saved = process.env.OPENAI_BASE_URL;
    delete process.env.OPENAI_BASE_URL;
    try {
      await expect(runEval([CODEX_REAL], { summarizer: 'openai' }, sink(), sink())).rejects.toThrow(/--summarizer openai needs --base-url/);
    } finally {
      if (saved !== undefined) process.env.OPENAI_BASE_URL = saved;
    }
  });

  it('the progress bar draws on a TTY and writes nothing to a pipe', () => {
    const tty = sink(true);
    const bar = progressBar(tty, 4);
    for (let i = 0; i < 4; i++) bar.tick(`step ${i}`);
    bar.done();
    expect(tty.text).toContain('\r[#######.....................]  25% step 0');
    expect(tty.text).toContain('100% step 3');
    const pipe = sink(false);
    const quiet = progressBar(pipe, 4);
    quiet.tick('x');
    quiet.done();
    expect(pipe.text).toBe('');
  });
});
