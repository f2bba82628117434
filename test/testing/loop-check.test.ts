/**
 * checkLoop against a small loop written against the control API and against that loop broken on
 * purpose: each generated scenario must pass for the correct loop, and each broken loop must fail
 * with a report naming the scenario and the invariant it broke. The project's examples and
 * adapters run the same scenarios in test/loop-check-*.test.ts, one file per loop, so that their
 * waits on the scripted server overlap in parallel workers.
 */
import { describe, expect, it } from 'vitest';
import { checkLoop, loopScenarios, assertLoop } from '../../src/testing';
import { controlLoop, type ControlBreakage } from '../helpers/reference-loops';
import { LOOP_RUN_MS } from '../helpers/suite-plan';

const scenarios = loopScenarios();
const first = (name: string) => scenarios.find((s) => s.name.includes(name))!;

// A small loop written against the engine's control API (test/helpers/reference-loops.ts), and ways to get it wrong
// (the rest of them, and the other loops', are the mutation score: test/testing/loop-check-score.test.ts).
const referenceLoop = controlLoop;
type Breakage = ControlBreakage;

describe('a loop written against the control API passes every scenario; broken ones are named', () => {
  it.each(scenarios.map((s) => [s.name, s] as const))('%s', async (_name, scenario) => {
    assertLoop(await checkLoop(referenceLoop(), scenario, { timeoutMs: LOOP_RUN_MS }));
  });

  const failing = async (broken: Breakage, scenarioName: string) => {
    const report = await checkLoop(referenceLoop(broken), first(scenarioName), { timeoutMs: LOOP_RUN_MS });
    expect(report.ok).toBe(false);
    expect(() => assertLoop(report)).toThrow(report.scenario);
    return report.violations.map((v) => v.invariant);
  };

  it('no onRequestError: an overflow the engine would recover ends the loop', async () => {
    expect(await failing({ noRequestError: true }, 'openai overflow → engine retries')).toContain('expected-outcome');
  });
  it('afterStep after step/end is named', async () => {
    expect(await failing({ afterStepAfterStepEnd: true }, 'pressure compacts → summary succeeds')).toContain('after-step-inside-step');
  });
  it('a retry that re-sends without the tool result breaks the pairing', async () => {
    expect(await failing({ retryWithoutToolResults: true }, 'openai overflow → engine retries')).toContain('tool-results-paired');
  });
  it('its own array re-sent after an overflow: the resend is no smaller than the refused request', async () => {
    expect(await failing({ ownArray: true }, 'openai overflow → engine retries')).toContain('resend-smaller');
  });
  it('its own array after a restart: the first request after it drops what the session held', async () => {
    expect(await failing({ ownArray: true }, 'process crashes (parallel batch half answered)')).toContain('resume-keeps-history');
  });
  it('no recover() on reopen: the loop does not resume after a crash', async () => {
    expect(await failing({ noRecover: true }, 'process crashes → process reopens')).toContain('resumes-after-crash');
  });
});

describe('a slow loop is told from a broken one', () => {
  const slow =
    (loop: ReturnType<typeof referenceLoop>, ms: number): typeof loop =>
    async (ctx) => {
      await new Promise((r) => setTimeout(r, ms));
      return loop(ctx);
    };

  it('a right loop out of time is reported as that alone, saying to raise timeoutMs', async () => {
    // The run's limit fires before the loop even starts: the order of two timers, not the machine's speed.
    const report = await checkLoop(slow(referenceLoop(), 200), first('pressure prunes'), { timeoutMs: 20 });
    expect(report.ended).toEqual({ kind: 'timeout' });
    expect(report.violations).toEqual([
      { invariant: 'finishes', message: expect.stringMatching(/did not finish within 0\.02 s — raise timeoutMs on a loaded machine/) },
    ]);
  });

  it('a loop that hands ctx.signal to nothing is named at once, however long the run may take', async () => {
    const report = await checkLoop(referenceLoop({ ignoresSignal: true }), first('loop cancels'), { timeoutMs: LOOP_RUN_MS });
    expect(report.violations.map((v) => v.invariant)).toContain('stops-on-abort');
    expect(report.violations.map((v) => v.invariant)).not.toContain('finishes');
  });

  it('a right loop that is cancelled passes, with no time limit on how soon it stops', async () => {
    assertLoop(await checkLoop(referenceLoop(), first('loop cancels'), { timeoutMs: LOOP_RUN_MS }));
  });
});

describe('checkLoop under node:test', () => {
  it('runs the scenarios as node:test tests', async () => {
    const { spawnSync } = await import('node:child_process');
    const run = (only: string) =>
      spawnSync(process.execPath, ['--import', 'tsx', '--test', 'test/fixtures/loop-check/node-test.mts'], {
        encoding: 'utf8',
        env: { ...process.env, XCOMPACT_LOOP_ONLY: only },
      });
    const ok = run('pressure prunes|openai overflow → engine retries');
    expect(ok.stdout).toMatch(/# pass 2/);
    expect(ok.status).toBe(0);
  });
});
