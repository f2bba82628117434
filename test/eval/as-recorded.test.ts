/**
 * The harness's own run scored (src/eval/recorded.ts, harness-summaries.ts) and a replay window
 * refused up front (src/eval/window.ts, `xcompact eval --window`): the as-recorded row's memory
 * is what the harness really sent, its own summaries included, measured as every policy is;
 * the harness's summary sits beside xcompact's of the same span; a window smaller than what the
 * harness sent unrecorded is a typed error that says what to pass, before anything is replayed.
 */
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { runEval } from '../../src/cli/eval';
import { CliError } from '../../src/cli/errors';
import { evaluateWindow } from '../../src/eval';
import { calibratedPricer, fitReplayCalibration } from '../../src/eval/calibration';
import { compareHarnessSummaries } from '../../src/eval/harness-summaries';
import { withoutCompactions } from '../../src/eval/lived';
import { Pricer } from '../../src/eval/pricing';
import { recordedMemory } from '../../src/eval/recorded';
import { smallestWindow, WindowTooSmallError } from '../../src/eval/window';
import { isCheckpoint } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { importTranscriptFile } from '../../src/transcripts';
import { CLAUDE_REAL } from '../helpers/transcripts';

function sink(): Writable & { text: string } {
  const w = new Writable({
    write(chunk: Buffer, _enc, done) {
      w.text += chunk.toString();
      done();
    },
  }) as Writable & { text: string };
  w.text = '';
  return w;
}

describe("the harness's own run, scored", () => {
  it('is measured on what the harness sent (its checkpoints in place), against the conversation as lived, as a policy would be', async () => {
    const recorded = Session.inMemory('claude-real');
    await importTranscriptFile(recorded, CLAUDE_REAL);
    const lived = withoutCompactions(recorded);
    const compactions = recorded.events().filter(isCheckpoint).length;
    // A run that never compacted sent everything: every measure is whole.
    expect(recordedMemory(lived, lived)).toMatchObject({ neededRecall: 1, intentRecall: 1, recallAfterCompaction: undefined, compactionsMeasured: 0 });
    // The harness's own run lost what its summaries dropped, measured at the request after each of its compactions.
    const figures = recordedMemory(recorded, lived);
    expect(figures.neededRecall).toBeLessThan(1);
    expect(figures.intentRecall).toBeLessThan(1);
    expect(figures.compactionsMeasured).toBeGreaterThan(0);
    expect(figures.compactionsMeasured).toBeLessThanOrEqual(compactions);
    expect(figures.recallAfterCompaction!).toBeLessThan(figures.neededRecall);
  });

  it("scores the harness's summary and xcompact's of the same span on the same requests", async () => {
    const recorded = Session.inMemory('claude-real');
    await importTranscriptFile(recorded, CLAUDE_REAL);
    const { calibration } = fitReplayCalibration(recorded);
    const pricer = calibratedPricer(recorded, calibration);
    const list = await compareHarnessSummaries(recorded, pricer, { maxTokens: 4_096, userWordsTokens: 4_000 });
    expect(list).toHaveLength(recorded.events().filter(isCheckpoint).length);
    for (const c of list) {
      expect(c.requests).toBeGreaterThan(0);
      expect(c.shadowed).toBeGreaterThan(0);
      for (const s of [c.harness, c.xcompact]) {
        expect(s.tokens).toBeGreaterThan(0);
        for (const x of [s.neededRecall, s.intentRecall]) expect(x >= 0 && x <= 1).toBe(true);
      }
    }
    // The user's own words kept verbatim in xcompact's checkpoints; Claude Code's retells them.
    expect(list.every((c) => c.xcompact.intentRecall >= c.harness.intentRecall)).toBe(true);
  });
});

describe('a window smaller than what the harness sent unrecorded', () => {
  it('is the smallest that holds the unrecorded part, a summary and the output reservation', () => {
    expect(smallestWindow(0)).toBe(0);
    expect(smallestWindow(2_000)).toBe(4_096);
    expect(smallestWindow(42_400)).toBe(50 * 1_024); // 42,400 + 2 × 4,096, to the next k
  });

  it('is refused by the replay with a typed error naming the smallest window', async () => {
    const recorded = Session.inMemory('claude-real');
    await importTranscriptFile(recorded, CLAUDE_REAL);
    const { calibration } = fitReplayCalibration(recorded);
    const pricer = calibratedPricer(recorded, calibration, new Pricer('o200k_base'));
    const err = await evaluateWindow(withoutCompactions(recorded), 32_768, { pricer }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WindowTooSmallError);
    expect(err).toMatchObject({ code: 'eval-window', window: 32_768, unrecorded: calibration.unrecorded, smallest: smallestWindow(calibration.unrecorded) });
    expect((err as Error).message).toMatch(/too small .*Replay at [\d,]+ tokens or more/);
  });

  it('is refused by `xcompact eval --window` before anything runs, saying what to pass; the transcript is untouched', async () => {
    const before = readFileSync(CLAUDE_REAL);
    const out = sink();
    const err = await runEval([CLAUDE_REAL], { window: '32k,128k' }, out, sink()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).exitCode).toBe(2);
    expect((err as Error).message).toMatch(
      /^--window 32,768: real-session\.jsonl sent about [\d,]+ tokens on every request that its transcript does not hold .*Pass --window \d+k \([\d,]+ tokens\) or more, or --unrecorded 0/,
    );
    expect(out.text).toBe('');
    expect(readFileSync(CLAUDE_REAL).equals(before)).toBe(true);
    await expect(runEval([CLAUDE_REAL], { window: '32k', unrecorded: 'lots' }, sink(), sink())).rejects.toThrow(/--unrecorded "lots" is not a token count/);
  });
});
