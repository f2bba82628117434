/**
 * The replay's count fitted to a recorded session's own usage (src/eval/calibration.ts): it
 * recovers what a provider counted from usage alone, reports fidelity exactly as defined (per
 * request |replayed − recorded| ÷ recorded; median and p90 over the file's requests), and meets
 * the goal on the committed real transcripts.
 */
import { describe, expect, it } from 'vitest';
import { calibratedPricer, fitReplayCalibration } from '../../src/eval/calibration';
import { Pricer } from '../../src/eval/pricing';
import type { AppendInput } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { importTranscriptFile } from '../../src/transcripts';
import { CLAUDE_REAL, CODEX_REAL } from '../helpers/transcripts';

const RATIO = 1.3;
const UNRECORDED = 5_000;
const PER_TOOL = 20;

/**
 * A session whose provider counts RATIO × our price + PER_TOOL per tool result + an unrecorded
 * part: UNRECORDED before its compaction, UNRECORDED + 3,000 after (files the harness re-attached).
 */
function recordedSession(): Session {
  const s = Session.inMemory('synthetic-recorded');
  const pricer = new Pricer('o200k_base');
  const add = (type: AppendInput['type'], data: unknown, surface = false) =>
    s.append({ type, data, ...(surface ? { surfaceOp: 'append' } : {}) } as AppendInput);
  let extra = UNRECORDED;
  for (let t = 0; t < 24; t++) {
    if (t === 12) {
      const surface = s.surface;
      const shadowed = surface.slice(0, surface.length);
      const start = add('compaction/start', { turn: null, trigger: 'pressure' });
      const sum = add('compaction/summary', {
        summary: 'the work so far',
        range: { start: shadowed[0], end: shadowed[shadowed.length - 1] },
        shadowedSeqs: shadowed,
        shadowedTokens: 1,
      });
      s.append({
        type: 'user/message',
        data: { content: [{ type: 'text', text: 'Summary: the work so far, in one line.' }], source: 'compaction-checkpoint' },
        surfaceOp: { op: 'replace', start: shadowed[0]!, end: shadowed[shadowed.length - 1]! },
        sourceEventSeqs: [start.seq, sum.seq, ...shadowed],
      });
      add('compaction/end', { turn: null });
      extra = UNRECORDED + 3_000;
    }
    add('turn/start', { turn: t });
    add('user/message', { content: [{ type: 'text', text: `Task ${t}: read module ${t} and fix what fails.` }] }, true);
    add('step/start', { turn: t, step: 0 });
    add('request/header', { provider: 'p', model: 'm', tools: [] });
    const messages = s.deriveMessages();
    const priced = pricer.tokens({ tools: '', messages });
    const tools = messages.filter((m) => m.role === 'tool').length;
    const usage = { promptTokens: Math.round(RATIO * priced + PER_TOOL * tools + extra), completionTokens: 12 };
    add('assistant/message', { content: [{ type: 'tool-call', id: `c${t}`, name: 'read', arguments: JSON.stringify({ path: `src/m${t}.ts` }) }], usage }, true);
    add(
      'tool/result',
      { callId: `c${t}`, toolName: 'read', content: [{ type: 'text', text: `export const m${t} = ${t};\n${'// line\n'.repeat(40 + 10 * t)}` }] },
      true,
    );
    add('step/end', { turn: t, step: 0 });
    add('turn/end', { turn: t });
  }
  return s;
}

describe('the replay count fitted to the recorded usage', () => {
  it('recovers the provider ratio and the unrecorded part of each segment from usage alone, and follows every request', () => {
    const fit = fitReplayCalibration(recordedSession());
    const c = fit.calibration;
    expect(c.ratio).toBeCloseTo(RATIO, 1);
    expect(c.segments.map((g) => g.cause)).toEqual(['start', 'compaction']);
    expect(Math.abs(c.segments[0]!.intercept - UNRECORDED)).toBeLessThan(200);
    expect(Math.abs(c.segments[1]!.intercept - UNRECORDED - 3_000)).toBeLessThan(200);
    // What every request carried: the smaller, not what the harness added after its compaction.
    expect(c.unrecorded).toBe(Math.min(c.segments[0]!.intercept, c.segments[1]!.intercept));
    expect(fit.fidelity!.median).toBeLessThan(0.01);
  });

  it('reports fidelity exactly as defined: per request |replayed − recorded| ÷ recorded, median and p90 by nearest rank', () => {
    const fit = fitReplayCalibration(recordedSession());
    const errors = fit.requests.map((r) => Math.abs(r.replayed - r.recorded) / r.recorded).sort((a, b) => a - b);
    const rank = (p: number) => errors[Math.ceil(p * errors.length) - 1]!;
    expect(fit.requests).toHaveLength(24);
    expect(fit.fidelity).toEqual({ requests: 24, median: rank(0.5), p90: rank(0.9), max: errors[23] });
  });

  it('a session without usage: our own count, nothing unrecorded, no fidelity', () => {
    const s = Session.inMemory('no-usage');
    s.append({ type: 'turn/start', data: { turn: 0 } });
    s.append({ type: 'user/message', data: { content: [{ type: 'text', text: 'hi' }] }, surfaceOp: 'append' });
    const fit = fitReplayCalibration(s);
    expect(fit.fidelity).toBeUndefined();
    expect(fit.calibration).toMatchObject({ ratio: 1, reasoning: 0, unrecorded: 0, requests: 0 });
  });

  it('the calibrated pricer counts messages as the provider did, the unrecorded part on requests that carry the agent prompt', () => {
    const session = recordedSession();
    const { calibration } = fitReplayCalibration(session);
    const raw = new Pricer('o200k_base');
    const pricer = calibratedPricer(session, calibration, raw);
    const m = { role: 'tool' as const, tool_call_id: 'c', content: 'x '.repeat(500) };
    expect(pricer.message(m)).toBe(Math.round(calibration.ratio * raw.message(m) + calibration.perMessage.tool));
    const request = { tools: '', messages: [m] };
    expect(pricer.tokens(request) - pricer.tokens({ ...request, unrecorded: false })).toBe(calibration.unrecorded);
  });

  it.each([
    { name: 'Claude Code', file: CLAUDE_REAL },
    { name: 'Codex', file: CODEX_REAL },
  ])('on the real $name transcript: median at most 5 percent, p90 at most 10', async ({ file }) => {
    const s = Session.inMemory('real');
    await importTranscriptFile(s, file);
    const { fidelity } = fitReplayCalibration(s);
    expect(fidelity!.requests).toBeGreaterThan(30);
    expect(fidelity!.median).toBeLessThanOrEqual(0.05);
    expect(fidelity!.p90).toBeLessThanOrEqual(0.1);
  });
});
