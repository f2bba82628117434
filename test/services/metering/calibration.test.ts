/**
 * Online calibration and the suspect-usage rule (docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have, docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have). The "provider"
 * here counts with another real tokenizer (the reference heuristic over the same messages),
 * the way Claude or Qwen count differently from our o200k prices.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { CALIBRATION, CalibrationState, emptyCounts } from '../../../src/services/metering';
import { SUSPECT_TOLERANCE, TokenMeter } from '../../../src/services/metering';
import { retainedCut } from '../../../src/services/selection';
import { getTokenizer, type TokenizerName } from '../../../src/services/metering';
import { JsonlStore, Session, SessionWriter } from '../../../src/session/index';
import { importPiTranscript } from '../../../src/transcripts/index';
import { readFileSync } from 'node:fs';
import { removeTempDirs, tempDir } from '../../helpers/session';

afterAll(removeTempDirs);

const meterOf = (session: Session, name: TokenizerName = 'o200k_base') => new TokenMeter(session, { tokenizerFor: () => getTokenizer(name) });

/**
 * Tool output of mixed content (code, prose, numbers, JSON) whose amounts vary by step, as a
 * coding agent's outputs do.
 */
function toolOutput(i: number): string {
  const code = `export function f${i}(x: number): number {\n  return x * ${i} + ${i * 7};\n}\n`.repeat(2 + (i % 5));
  const prose = `The build of module ${i} finished with warnings about unused imports in several files. `.repeat(1 + (i % 3));
  const numbers = Array.from({ length: 4 + (i % 7) }, (_, k) => `${k * i} ${(k * 1.5).toFixed(2)} ${k ** 2}`).join('\n');
  const json = JSON.stringify(Array.from({ length: 1 + (i % 4) }, (_, k) => ({ id: k, path: `src/m${i}/f${k}.ts`, ok: k % 2 === 0 })));
  return [code, prose, numbers, json].join('\n');
}

/**
 * Runs `steps` agent steps; the provider reports the prompt as its tokenizer counts it.
 * Returns, per step, our measurement just before the report and the provider's figure.
 */
function run(session: Session, meter: TokenMeter, steps: number, provider = { name: 'heuristic' as TokenizerName, route: ['acme', 'model-1'] as const }) {
  const w = new SessionWriter(session);
  const counter = meterOf(session, provider.name); // the provider's own count of the same request
  /** Growth since the previous report: ours calibrated, ours raw, and what the provider counted. */
  const rows: Array<{ predicted: number; raw: number; actual: number }> = [];
  let anchorProvider = 0;
  let rawAtAnchor: { provider: number; estimate: number } | undefined;
  if (session.surface.length === 0) w.system('You are a coding agent.');
  w.startTurn();
  w.user('Refactor the modules one by one.');
  for (let i = 0; i < steps; i++) {
    w.startStep();
    w.request({ provider: provider.route[0], model: provider.route[1], tools: [] });
    const m = meter.measure();
    const actual = counter.measure().estimatedTokens;
    const raw = rawAtAnchor ? rawAtAnchor.provider + (m.estimatedTokens - rawAtAnchor.estimate) : m.estimatedTokens;
    if (i > 0) rows.push({ predicted: m.totalTokens - anchorProvider, raw: raw - anchorProvider, actual: actual - anchorProvider });
    const data = { content: [{ type: 'tool-call' as const, id: `c${i}`, name: 'bash', arguments: JSON.stringify({ command: `make m${i}` }) }] };
    const completion = counter.priceEvent({ type: 'assistant/message', data });
    w.assistant({
      toolCalls: [{ id: `c${i}`, name: 'bash', arguments: data.content[0]!.arguments }],
      usage: { promptTokens: actual, completionTokens: completion },
    });
    rawAtAnchor = { provider: actual + completion, estimate: meter.measure().estimatedTokens };
    anchorProvider = actual + completion;
    w.toolResult(`c${i}`, toolOutput(i));
    w.endStep();
  }
  return rows;
}

const relError = (r: { predicted: number; actual: number }) => Math.abs(r.predicted - r.actual) / r.actual;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

describe('online calibration', () => {
  it("learns the provider/ours ratio and predicts the growth to the provider's next report closer than raw prices", () => {
    const session = Session.inMemory();
    const meter = meterOf(session);
    const rows = run(session, meter, 40).slice(8);
    const calibrated = median(rows.map(relError));
    const raw = median(rows.map((r) => relError({ predicted: r.raw, actual: r.actual })));
    expect(raw).toBeGreaterThan(0.05); // the two tokenizers really differ on this content
    expect(calibrated).toBeLessThan(raw / 2);
    const m = meter.measure();
    expect(m.calibration.route).toBe('acme/model-1');
    expect(m.calibration.samples).toBeGreaterThanOrEqual(30);
    expect(m.calibration.ratio).not.toBe(1);
    expect(m.calibratedTokens).toBe(Math.round(m.estimatedTokens * m.calibration.ratio));
    expect(meter.providerRatio).toBe(m.calibration.ratio);
  });

  it('is a fold of the log: measuring once at the end, or reopening the stored session, gives the same figure', async () => {
    const dir = tempDir();
    const session = await Session.open(new JsonlStore(dir), 'cal');
    const live = meterOf(session);
    run(session, live, 25); // measured after every step
    const a = live.measure();
    await session.close();
    const reopened = await Session.open(new JsonlStore(dir), 'cal');
    const b = meterOf(reopened).measure(); // one fold of the whole log
    expect(b.calibration).toEqual(a.calibration);
    expect(b.totalTokens).toBe(a.totalTokens);
    expect(b.anchor).toEqual(a.anchor);
    await reopened.close();
  });

  it('keeps one ratio per route, seeded at 1.0', () => {
    const session = Session.inMemory();
    const meter = meterOf(session);
    run(session, meter, 12);
    const w = new SessionWriter(session);
    w.startStep();
    w.request({ provider: 'other', model: 'm', tools: [] });
    expect(meter.measure().calibration).toEqual({ route: 'other/m', ratio: 1, perNode: { user: 0, assistant: 0, tool: 0, toolError: 0 }, samples: 0 });
  });

  it('clamps the ratio to a sane range', () => {
    const session = Session.inMemory();
    const meter = meterOf(session);
    const w = new SessionWriter(session);
    w.startTurn();
    w.user('go');
    let prompt = 100;
    for (let i = 0; i < 6; i++) {
      w.startStep();
      w.request({ provider: 'p', model: 'm', tools: [] });
      const grown = meter.measure();
      // A provider that counts ten times our growth.
      if (i > 0)
        prompt += 10 * (grown.estimatedTokens - (grown.anchor ? grown.estimatedTokens - Math.round(grown.anchor.growthTokens / grown.calibration.ratio) : 0));
      w.assistant({
        toolCalls: [{ id: `c${i}`, name: 'bash', arguments: '{}' }],
        usage: { promptTokens: Math.max(prompt, grown.estimatedTokens * 3), completionTokens: 0 },
      });
      prompt = Math.max(prompt, grown.estimatedTokens * 3);
      w.toolResult(`c${i}`, toolOutput(1));
      w.endStep();
    }
    expect(meter.measure().calibration.ratio).toBe(CALIBRATION.maxRatio);
  });
});

describe('framing per message kind (a ratio alone cannot model a constant per message)', () => {
  /**
   * A provider with its own template and tokenizer: it wraps each tool result in tags (an
   * error result in more), prefixes user text, and counts with the reference heuristic. Steps
   * are mostly short tool results, as a coding agent's are, where framing is most of the step.
   */
  const provider = getTokenizer('heuristic');
  const render = {
    tool: (id: string, text: string) => `<tool_result tool_use_id="${id}">${text}</tool_result>`,
    toolError: (id: string, text: string) => `<tool_result tool_use_id="${id}" is_error="true"><error>${text}</error></tool_result>`,
    user: (text: string) => `\n\nHuman: ${text}`,
  };
  const SHORT = [
    '(no output)',
    'Command exited with code 1',
    'Fixed!',
    '      77',
    'Successfully wrote 1092 bytes to src/a.ts',
    'grep: src/b.ts: No such file or directory',
  ];

  function session(steps: number) {
    const session = Session.inMemory();
    const meter = meterOf(session);
    const w = new SessionWriter(session);
    const rows: Array<{ predicted: number; raw: number; actual: number }> = [];
    let prompt = 500;
    let pending = 0; // what the provider counts for what was appended since its last report
    let pricedAtReport = 0;
    w.system('You are a coding agent.');
    w.startTurn();
    w.user('Fix the build.');
    for (let i = 0; i < steps; i++) {
      w.startStep();
      w.request({ provider: 'acme', model: 'm', tools: [] });
      const m = meter.measure();
      if (m.anchor) rows.push({ predicted: m.anchor.growthTokens, raw: m.surfaceTokens - pricedAtReport, actual: pending });
      prompt += pending;
      const call = { id: `call_${i}`, name: 'bash', arguments: JSON.stringify({ command: `make step${i}` }) };
      const completion = provider.count(`<invoke name="bash"><parameter name="command">make step${i}</parameter></invoke>`);
      w.assistant({ toolCalls: [call], usage: { promptTokens: prompt, completionTokens: completion } });
      prompt += completion;
      pricedAtReport = meter.measure().surfaceTokens;
      const text = i % 5 === 4 ? toolOutput(i) : SHORT[i % SHORT.length]!;
      const isError = i % 3 === 1;
      w.toolResult(call.id, text, { isError });
      pending = provider.count((isError ? render.toolError : render.tool)(call.id, text));
      w.endStep();
      if (i % 7 === 6) {
        const note = `Step ${i} looks fine, go on.`;
        w.user(note);
        pending += provider.count(render.user(note));
      }
    }
    return { meter, rows };
  }

  it('learns a constant per kind of node next to the ratio, and predicts small steps within a few percent', () => {
    const { meter, rows } = session(90);
    const tail = rows.slice(40);
    const err = (of: 'predicted' | 'raw') => tail.map((r) => Math.abs(r[of] - r.actual) / r.actual).sort((a, b) => a - b);
    const calibrated = err('predicted');
    const raw = err('raw');
    const p90 = (xs: number[]) => xs[Math.floor(xs.length * 0.9)]!;
    expect(median(raw)).toBeGreaterThan(0.2); // framing really is a large share of these steps
    expect(median(calibrated)).toBeLessThan(0.05);
    expect(p90(calibrated)).toBeLessThan(0.15);
    const c = meter.measure().calibration;
    // The error wrapper costs more than the plain one; both more than our 4 tokens of framing.
    expect(c.perNode.toolError).toBeGreaterThan(c.perNode.tool + 3);
    expect(c.perNode.tool).toBeGreaterThan(2);
  });

  it('a ratio fitted alone (no per-node constants) is far off on the same steps', () => {
    const { rows } = session(90);
    const tail = rows.slice(40);
    // The best single ratio for these steps, fitted in hindsight on the very steps it is judged on.
    const ratios = tail.map((r) => r.actual / r.raw).sort((a, b) => a - b);
    const best = median(ratios);
    const ratioOnly = tail.map((r) => Math.abs(best * r.raw - r.actual) / r.actual).sort((a, b) => a - b);
    const calibrated = tail.map((r) => Math.abs(r.predicted - r.actual) / r.actual).sort((a, b) => a - b);
    expect(ratioOnly[Math.floor(ratioOnly.length * 0.9)]!).toBeGreaterThan(2 * calibrated[Math.floor(calibrated.length * 0.9)]!);
  });
});

describe('suspect usage (the larger figure wins)', () => {
  function requestOf117() {
    const session = Session.inMemory();
    const meter = meterOf(session);
    const w = new SessionWriter(session);
    w.startTurn();
    w.startStep();
    w.request({ provider: 'proxy', model: 'm', systemPrompt: 'You are a coding agent working in a large repository.', tools: [] });
    w.user('Explain what the retry helper in src/net/retry.ts does, and list every caller of it in the code base. '.repeat(2));
    return { session, meter, w };
  }

  it('a report far below our estimate (6 against ~117) is refused: the estimate stands', () => {
    const { meter, w } = requestOf117();
    const estimate = meter.measure().calibratedTokens;
    expect(estimate).toBeGreaterThan(50);
    w.assistant({ text: 'ok', usage: { promptTokens: 6, completionTokens: 2 } });
    const m = meter.measure();
    expect(m.totalTokens).not.toBe(8);
    expect(m.totalTokens).toBe(m.calibratedTokens);
    expect(m.totalTokens).toBeGreaterThan(estimate);
    expect(m.suspectUsage).toBe(true);
    expect(m.anchor).toBeUndefined();
    expect(m.calibration.samples).toBe(0); // a suspect report calibrates nothing
  });

  it('a report within the tolerance anchors, even below our estimate', () => {
    const { meter, w } = requestOf117();
    const estimate = meter.measure().calibratedTokens;
    const reported = Math.ceil(estimate * (1 - SUSPECT_TOLERANCE)) + 1;
    const reply = w.assistant({ text: 'ok', usage: { promptTokens: reported, completionTokens: 2 } });
    const m = meter.measure();
    expect(m.suspectUsage).toBe(false);
    expect(m.anchor).toEqual({ seq: reply.seq, providerTokens: reported + 2, growthTokens: 0 });
    expect(m.totalTokens).toBe(reported + 2);
  });

  it('an anchor a replace has made meaningless never measures a non-empty surface as 0', () => {
    const { session, meter, w } = requestOf117();
    // A low report, within the tolerance: it anchors (the first report calibrates nothing).
    const low = Math.ceil(meter.measure().calibratedTokens * 0.55);
    w.assistant({ text: 'ok', toolCalls: [{ id: 'c1', name: 'read', arguments: '{}' }], usage: { promptTokens: low, completionTokens: 1 } });
    w.toolResult('c1', 'done');
    expect(meter.measure().suspectUsage).toBe(false);
    // A compaction then replaced nearly all the provider counted: the anchor carried by what it
    // counted for the nodes that left is a few tokens, far below our estimate of what stays.
    const shadowed = session.surface.slice(1, session.surface.length);
    const [first, last] = [shadowed[0]!, shadowed[shadowed.length - 1]!];
    const start = session.append({ type: 'compaction/start', data: { turn: session.openTurn, trigger: 'pressure' } });
    const sum = session.append({
      type: 'compaction/summary',
      data: { summary: 's', range: { start: first, end: last }, shadowedSeqs: shadowed, shadowedTokens: 1 },
    });
    session.append({
      type: 'user/message',
      data: { content: [{ type: 'text', text: 'summary' }], source: 'compaction-checkpoint' },
      surfaceOp: { op: 'replace', start: first, end: last },
      sourceEventSeqs: [start.seq, sum.seq, ...shadowed],
    });
    session.append({ type: 'compaction/end', data: { turn: session.openTurn } });
    const m = meter.measure();
    expect(m.anchor!.providerTokens + m.anchor!.growthTokens).toBeLessThan(m.calibratedTokens * 0.5);
    expect(m.totalTokens).toBeGreaterThan(0);
    expect(m.totalTokens).toBe(m.calibratedTokens);
    expect(m.suspectUsage).toBe(true);
  });

  it('an imported pi session is anchored to pi usage recorded after its compaction, and not suspect', () => {
    const session = Session.inMemory();
    importPiTranscript(session, readFileSync(new URL('../../fixtures/pi-linear-compaction.jsonl', import.meta.url), 'utf8'));
    const m = meterOf(session).measure();
    expect(m.suspectUsage).toBe(false);
    expect(m.anchor?.providerTokens).toBe(1340 + 4);
    expect(m.totalTokens).toBe(1344);
  });

  it('a measurement serialises as plain data (not the session behind the meter)', () => {
    const { meter } = requestOf117();
    const json = JSON.stringify(meter.measure());
    expect(json.length).toBeLessThan(1000);
    expect(JSON.parse(json).calibration).toEqual({ route: 'proxy/m', ratio: 1, perNode: { user: 0, assistant: 0, tool: 0, toolError: 0 }, samples: 0 });
  });
});

describe('whole-surface budgets in provider tokens', () => {
  it('the retained tail holds retainTokens provider tokens: a ratio of 2 keeps half the priced tokens', () => {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    w.startTurn();
    for (let i = 0; i < 20; i++) w.user(toolOutput(i));
    const meter = meterOf(session);
    const prices = { length: meter.length, priceAt: (p: number) => meter.priceAt(p), priceOf: (s: number) => meter.priceOf(s) };
    const retainedPriced = (ratio: number) => {
      const cut = retainedCut(session, { ...prices, providerRatio: ratio }, 2000, 0);
      let t = 0;
      for (let p = cut; p < session.surface.length; p++) t += meter.priceAt(p);
      return t;
    };
    const one = retainedPriced(1);
    const two = retainedPriced(2);
    expect(one).toBeGreaterThanOrEqual(2000);
    expect(two).toBeGreaterThanOrEqual(1000);
    expect(two).toBeLessThan(one);
    expect(two * 2).toBeLessThan(2000 + 2 * Math.max(...Array.from({ length: 20 }, (_, p) => meter.priceAt(p))));
  });
});

describe('the fit needs evidence', () => {
  it('a few odd steps do not move the ratio off the seed; enough consistent steps do', () => {
    const state = new CalibrationState();
    const added = emptyCounts();
    // One step where the provider counted 6× what we priced (a proxy's odd report, a fuzzed figure).
    state.add('p/m', 600, 100, added);
    expect(state.ratio('p/m')).toBe(1);
    for (let i = 1; i < CALIBRATION.minSamples; i++) state.add('p/m', 125, 100, added);
    expect(state.ratio('p/m')).toBeGreaterThan(1.1);
    expect(state.ratio('p/m')).toBeLessThan(CALIBRATION.maxRatio);
  });
});
