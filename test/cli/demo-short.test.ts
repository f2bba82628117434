/**
 * The demo at any length: short runs lay out fewer turns and stage the scripted overflow only
 * when there is history to condense (saying so when there is not); an overflow recovery cannot
 * fix ends the demo with one clear line and exit code 1, never as an "unexpected error".
 */
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { runDemo } from '../../src/cli/demo';
import { scheduleDemo } from '../../src/cli/demo/schedule';
import { CliError, errorLine, reportError } from '../../src/cli/errors';
import { removeTempDirs, tempDir } from '../helpers/session';

afterAll(removeTempDirs);

function sink(): Writable & { text(): string } {
  let text = '';
  const w = new Writable({
    write(chunk, _enc, cb) {
      text += String(chunk);
      cb();
    },
  });
  return Object.assign(w, { text: () => text });
}

describe('demo schedule', () => {
  it('adds up to the steps asked for, every turn at least one step', () => {
    for (let steps = 1; steps <= 300; steps++) {
      const s = scheduleDemo(steps, 1024);
      expect(s.turns.reduce((a, b) => a + b, 0)).toBe(steps);
      expect(Math.min(...s.turns)).toBeGreaterThanOrEqual(1);
      expect(s.overflowFrom).toBeLessThan(s.turns[0]!);
      if (s.compactBetweenTurns) expect(s.turns).toHaveLength(2);
    }
    expect(scheduleDemo(96, 1024).turns).toEqual([84, 12]); // the long run keeps its layout
  });
});

describe('demo with few steps', () => {
  it.each([1, 2, 3, 4, 5, 8, 9, 10, 12])('%i steps: runs them all, and the overflow is either recovered or reported as not staged', async (steps) => {
    for (const seed of [0, 7]) {
      const out = sink();
      const report = await runDemo({ steps, window: 16384, out: tempDir(), seed, quiet: true, color: false }, out);
      expect(report.steps).toBe(steps);
      expect(report.peakTokens).toBeLessThan(report.window);
      expect(report.compactions.failed).toBe(0);
      const staged = report.requests.rejected === 1;
      expect(report.overflowRecoveries).toBe(staged ? 1 : 0);
      expect(report.overflowSkipped === undefined).toBe(staged);
      expect(out.text()).toMatch(staged ? /overflow recovery\s+1 rejected request recovered/ : /overflow recovery\s+not staged: the run never held/);
    }
  });

  it('a 5-step run is too short for the overflow scene and says so', async () => {
    const out = sink();
    const report = await runDemo({ steps: 5, window: 16384, out: tempDir(), seed: 0, quiet: true, color: false }, out);
    expect(report.turns).toBe(2);
    expect(report.requests.rejected).toBe(0);
    expect(report.compactions.byTrigger).toEqual({ manual: 1 });
    expect(out.text()).toMatch(/steps\s+5 in 2 turns/);
  });

  it('an overflow with nothing worth condensing is recovered model-free: the summary fails, a truncation checkpoint stands in, the demo goes on', async () => {
    // Stage the overflow where the old demo did at 8 steps: step 3, with two steps of history. The
    // summary of that span cannot shrink it (it fails); the truncation fallback (docs/reliability.md)
    // shadows it with the ledger alone, and the rejected request is retried and answered.
    const report = await runDemo({ steps: 8, window: 16384, out: tempDir(), seed: 0, quiet: true, color: false, overflowMinSpanTokens: 0 }, sink());
    expect(report.requests.rejected).toBe(1);
    expect(report.compactions.failed).toBe(1);
    expect(report.compactions.byTrigger.overflow).toBe(1);
    expect(report.requests.agent).toBe(8);
  });
});

describe('demo output', () => {
  it('labels the per-step figures: the context in tokens and the threshold, with a legend', async () => {
    const out = sink();
    await runDemo({ steps: 3, window: 16384, out: tempDir(), seed: 0, quiet: false, color: false }, out);
    const text = out.text();
    expect(text).toMatch(/each step: the context after it, in tokens, against the threshold/);
    const steps = text.split('\n').filter((l) => /^ step +\d+ /.test(l));
    expect(steps).toHaveLength(3);
    for (const line of steps) expect(line).toMatch(/ [\d,]+ tokens \(threshold [\d,]+\) /);
  });
});
