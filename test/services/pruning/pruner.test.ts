import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/services/config';
import { TokenMeter } from '../../../src/services/metering';
import { pruneSurface } from '../../../src/services/pruning';
import { getTokenizer } from '../../../src/services/metering';
import { JsonlStore, Session, SessionWriter, type ContentBlock, type SessionEvent } from '../../../src/session/index';
import {
  PRUNE_MARKER_MAX_CHARS,
  PrunePlanStaleError,
  PrunePricingError,
  PruneSettingsError,
  applyPrune,
  codePointLength,
  planPrune,
  pruneMarker,
  truncateMiddle,
  type PruneSettings,
  type Pricing,
} from '../../../src/services/pruning';

// ---------------------------------------------------------------------------
// Fixtures

/** Small numbers keep the expected texts readable: 20 + 64 (marker reserve) + 10 ≤ 100. */
const SETTINGS: PruneSettings = {
  thresholdChars: 100,
  headChars: 20,
  tailChars: 10,
  protectRecentTokens: 0,
  minReclaimTokens: 0,
  neverPrune: [],
};

const cp = (s: string): number => [...s].length;

/** Deterministic stand-in for the token meter: ceil(code points / 4) + 4 per text block, + 4 per message. */
function priceBlocks(blocks: readonly ContentBlock[]): number {
  let n = 0;
  for (const b of blocks) {
    if (b.type === 'text' || b.type === 'reasoning') n += Math.ceil(cp(b.text) / 4) + 4;
    else if (b.type === 'image') n += 85;
    else n += Math.ceil((b.name.length + b.arguments.length) / 4) + 4;
  }
  return n;
}

function priceOfEvent(e: { type: string; data: unknown }): number {
  if (e.type === 'system/message') return Math.ceil(cp((e.data as { text: string }).text) / 4) + 4;
  return priceBlocks((e.data as { content: ContentBlock[] }).content) + 4;
}

function pricingFor(session: Session): Pricing {
  return {
    priceOf: (seq) => priceOfEvent(session.event(seq)),
    priceEvent: (event) => priceOfEvent(event),
  };
}

interface ResultSpec {
  callId: string;
  content: string | Array<{ type: 'text'; text: string } | { type: 'image'; url: string }>;
  toolName?: string;
  callName?: string;
  isError?: boolean;
}

/** system, user, then for each spec: an assistant message with one call and its result. Returns the result seqs. */
function record(session: Session, specs: ResultSpec[]): number[] {
  const w = new SessionWriter(session);
  w.request({ provider: 'local', model: 'm', systemPrompt: 'You are terse.' });
  w.startTurn();
  w.user('Look at the files.');
  const seqs: number[] = [];
  for (const s of specs) {
    w.startStep();
    w.assistant({ toolCalls: [{ id: s.callId, name: s.callName ?? s.toolName ?? 'read', arguments: '{}' }] });
    const opts: { toolName?: string; isError?: boolean } = {};
    if (s.toolName) opts.toolName = s.toolName;
    if (s.isError) opts.isError = true;
    seqs.push(w.toolResult(s.callId, s.content, opts).seq);
    w.endStep();
  }
  return seqs;
}

/** 150 code points: 20 head, 120 middle, 10 tail. */
const BIG = 'H'.repeat(20) + 'm'.repeat(120) + 'T'.repeat(10);
/** What BIG becomes under SETTINGS. */
const BIG_PRUNED = 'HHHHHHHHHHHHHHHHHHHH\n[… 120 characters pruned by xcompact …]\nTTTTTTTTTT';

function toolResultAt(session: Session, seq: number): SessionEvent<'tool/result'> {
  const e = session.event(seq);
  if (e.type !== 'tool/result') throw new Error(`seq ${seq} is ${e.type}`);
  return e;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

// ---------------------------------------------------------------------------

describe('truncateMiddle', () => {
  const s = { headChars: 20, tailChars: 10 };

  it('keeps head and tail of ASCII around one marker line naming the removed count', () => {
    const text = 'HEAD-'.repeat(4) + 'x'.repeat(71) + '-TAIL'.repeat(2);
    expect(truncateMiddle(text, s)).toBe('HEAD-HEAD-HEAD-HEAD-\n[… 71 characters pruned by xcompact …]\n-TAIL-TAIL');
  });

  it('keeps an emoji that ends the head whole (a UTF-16 slice would split it)', () => {
    const text = 'a'.repeat(19) + '😀' + 'm'.repeat(80) + 'z'.repeat(10);
    expect(LONE_SURROGATE.test(text.slice(0, 20))).toBe(true); // the naive cut is broken
    const out = truncateMiddle(text, s);
    expect(out).toBe('aaaaaaaaaaaaaaaaaaa😀\n[… 80 characters pruned by xcompact …]\nzzzzzzzzzz');
    expect(LONE_SURROGATE.test(out)).toBe(false);
  });

  it('keeps an emoji that starts the tail whole', () => {
    const text = 'a'.repeat(20) + 'm'.repeat(80) + '🎉' + 'z'.repeat(9);
    expect(LONE_SURROGATE.test(text.slice(-10))).toBe(true);
    const out = truncateMiddle(text, s);
    expect(out).toBe('aaaaaaaaaaaaaaaaaaaa\n[… 80 characters pruned by xcompact …]\n🎉zzzzzzzzz');
    expect(LONE_SURROGATE.test(out)).toBe(false);
  });

  it('counts emoji-only text in code points, not UTF-16 units', () => {
    const text = '😀'.repeat(25) + '🙂'.repeat(60) + '🎉'.repeat(15);
    expect(truncateMiddle(text, s)).toBe(`${'😀'.repeat(20)}\n[… 70 characters pruned by xcompact …]\n${'🎉'.repeat(10)}`);
  });

  it('cuts CJK text with supplementary-plane characters at code points', () => {
    // 𠀋 (U+2000B) and 𩸽 (U+29E3D) are surrogate pairs; 中文 are BMP.
    const text = '𠀋'.repeat(20) + '中文'.repeat(40) + '𩸽'.repeat(10);
    expect(text.length).toBe(140);
    const out = truncateMiddle(text, s);
    expect(out).toBe('𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋𠀋\n[… 80 characters pruned by xcompact …]\n𩸽𩸽𩸽𩸽𩸽𩸽𩸽𩸽𩸽𩸽');
    const mixedCut = '中'.repeat(19) + '𩸽' + '文'.repeat(80) + '中'.repeat(9) + '𠀋';
    expect(truncateMiddle(mixedCut, s)).toBe('中中中中中中中中中中中中中中中中中中中𩸽\n[… 80 characters pruned by xcompact …]\n中中中中中中中中中𠀋');
  });

  it('returns the text unchanged when cutting would not make it shorter', () => {
    expect(truncateMiddle('a'.repeat(30), s)).toBe('a'.repeat(30));
    // 40 removed would be replaced by a 40-code-point marker: no gain.
    expect(truncateMiddle('a'.repeat(70), s)).toBe('a'.repeat(70));
    expect(truncateMiddle('a'.repeat(71), s)).toBe('aaaaaaaaaaaaaaaaaaaa\n[… 41 characters pruned by xcompact …]\naaaaaaaaaa');
  });

  it('keeps every marker under PRUNE_MARKER_MAX_CHARS', () => {
    expect(pruneMarker(12345)).toBe('\n[… 12345 characters pruned by xcompact …]\n');
    expect(codePointLength(pruneMarker(Number.MAX_SAFE_INTEGER))).toBeLessThanOrEqual(PRUNE_MARKER_MAX_CHARS);
  });

  it('rejects counts that are not integers ≥ 0', () => {
    expect(() => truncateMiddle('abc', { headChars: -1, tailChars: 0 })).toThrow(PruneSettingsError);
    expect(() => truncateMiddle('abc', { headChars: 1.5, tailChars: 0 })).toThrow(/headChars must be an integer/);
  });

  it('property: head and tail code points kept, valid UTF-16 out, within the threshold, a second cut is a no-op', () => {
    const threshold = SETTINGS.headChars + PRUNE_MARKER_MAX_CHARS + SETTINGS.tailChars;
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), (text) => {
        const out = truncateMiddle(text, s);
        const points = [...text];
        if (out === text) {
          expect(points.length - 30).toBeLessThanOrEqual(40);
          return;
        }
        const kept = [...out];
        expect(kept.slice(0, 20).join('')).toBe(points.slice(0, 20).join(''));
        expect(kept.slice(-10).join('')).toBe(points.slice(-10).join(''));
        expect(out).toContain(`\n[… ${points.length - 30} characters pruned by xcompact …]\n`);
        expect(LONE_SURROGATE.test(out)).toBe(false);
        expect(kept.length).toBeLessThanOrEqual(threshold);
        expect(truncateMiddle(out, s).length <= out.length).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe('planPrune / applyPrune', () => {
  it('treats the threshold per text block: exactly at it is kept, one over is pruned', () => {
    const session = Session.inMemory();
    // 100 code points but 200 UTF-16 units: the count must be code points.
    const at = '𠀋'.repeat(100);
    const over = '𠀋'.repeat(20) + '中'.repeat(71) + '𩸽'.repeat(10);
    const [atSeq, overSeq] = record(session, [
      { callId: 'c1', content: at },
      { callId: 'c2', content: over },
    ]);
    const plan = planPrune(session, SETTINGS, pricingFor(session));
    expect(plan.targets.map((t) => t.seq)).toEqual([overSeq]);
    expect(plan.targets[0]!.content).toEqual([{ type: 'text', text: `${'𠀋'.repeat(20)}\n[… 71 characters pruned by xcompact …]\n${'𩸽'.repeat(10)}` }]);
    expect(plan.targets[0]!.charsBefore).toBe(101);
    expect(plan.targets[0]!.charsAfter).toBe(70);
    expect(session.surface.has(atSeq!)).toBe(true);
  });

  it('does not add up text blocks: two blocks under the threshold are not oversized together', () => {
    const session = Session.inMemory();
    record(session, [
      {
        callId: 'c1',
        content: [
          { type: 'text', text: 'a'.repeat(60) },
          { type: 'text', text: 'b'.repeat(60) },
        ],
      },
    ]);
    const before = session.length;
    const plan = planPrune(session, SETTINGS, pricingFor(session));
    expect(plan).toEqual({ targets: [], argumentTargets: [], tokensFreed: 0, reclaimableTokens: 0, kept: [], skipped: 'nothing-oversized' });
    expect(applyPrune(session, plan)).toEqual({ pruned: [], tokensFreed: 0, skipped: 'nothing-oversized' });
    expect(session.length).toBe(before);
  });

  it('cuts each oversized block of a mixed result and keeps the image and small blocks in place', () => {
    const session = Session.inMemory();
    const image = { type: 'image' as const, url: 'data:image/png;base64,iVBORw0KGgo=' };
    const second = 'S'.repeat(20) + 'n'.repeat(90) + 'E'.repeat(10);
    const [seq] = record(session, [
      {
        callId: 'c1',
        toolName: 'screenshot',
        content: [{ type: 'text', text: BIG }, image, { type: 'text', text: 'caption' }, { type: 'text', text: second }],
      },
    ]);
    const result = applyPrune(session, planPrune(session, SETTINGS, pricingFor(session)));
    const replacement = toolResultAt(session, result.pruned[0]!.replacementSeq);
    expect(replacement.data.content).toEqual([
      { type: 'text', text: BIG_PRUNED },
      { type: 'image', url: 'data:image/png;base64,iVBORw0KGgo=' },
      { type: 'text', text: 'caption' },
      { type: 'text', text: 'SSSSSSSSSSSSSSSSSSSS\n[… 90 characters pruned by xcompact …]\nEEEEEEEEEE' },
    ]);
    expect(result.pruned[0]).toMatchObject({ seq, callId: 'c1', toolName: 'screenshot', charsBefore: 150 + 7 + 120, charsAfter: 71 + 7 + 70 });
  });

  it('writes compaction/prune then a content-only tool/result replacing exactly the node', () => {
    const session = Session.inMemory();
    const [seq] = record(session, [{ callId: 'c1', toolName: 'read', isError: true, content: BIG }]);
    const position = session.surface.positionOf(seq!);
    const generation = session.surface.replaceGeneration;
    const first = session.length;

    const result = applyPrune(session, planPrune(session, SETTINGS, pricingFor(session)));

    expect(session.length).toBe(first + 2);
    const prune = session.event(first);
    expect(prune.type).toBe('compaction/prune');
    expect(prune.data).toEqual({ targetSeq: seq, callId: 'c1', tokensBefore: 46, tokensAfter: 26, charsBefore: 150, charsAfter: 71 });
    expect(prune.surfaceOp).toBeUndefined();
    expect(prune.sourceEventSeqs).toBeUndefined();

    const replacement = toolResultAt(session, first + 1);
    expect(replacement.surfaceOp).toEqual({ op: 'replace', start: seq, end: seq });
    expect(replacement.sourceEventSeqs).toEqual([seq, first]);
    expect(replacement.data).toEqual({ callId: 'c1', toolName: 'read', isError: true, content: [{ type: 'text', text: BIG_PRUNED }] });

    expect(session.surface.has(seq!)).toBe(false);
    expect(session.surface.positionOf(first + 1)).toBe(position);
    expect(session.surface.replaceGeneration).toBe(generation + 1);
    expect(toolResultAt(session, seq!).data.content).toEqual([{ type: 'text', text: BIG }]); // the log keeps the original
    expect(result).toEqual({
      pruned: [
        { seq, kind: 'result', replacementSeq: first + 1, callId: 'c1', toolName: 'read', charsBefore: 150, charsAfter: 71, tokensBefore: 46, tokensAfter: 26 },
      ],
      tokensFreed: 20,
    });
  });

  it('prunes every eligible result in one pass, oldest first', () => {
    const session = Session.inMemory();
    const [a, b, c] = record(session, [
      { callId: 'c1', content: BIG },
      { callId: 'c2', content: 'small' },
      { callId: 'c3', content: BIG },
    ]);
    const first = session.length;
    const result = applyPrune(session, planPrune(session, SETTINGS, pricingFor(session)));
    expect(result.pruned.map((p) => [p.seq, p.replacementSeq])).toEqual([
      [a, first + 1],
      [c, first + 3],
    ]);
    expect(
      session
        .events()
        .slice(first)
        .map((e) => e.type),
    ).toEqual(['compaction/prune', 'tool/result', 'compaction/prune', 'tool/result']);
    expect(result.tokensFreed).toBe(40);
    expect(session.surface.has(b!)).toBe(true);
  });

  it('is idempotent: a second plan over the pruned surface is empty and writes nothing', () => {
    const session = Session.inMemory();
    record(session, [
      { callId: 'c1', content: BIG },
      { callId: 'c2', content: 'x'.repeat(5000) },
    ]);
    const pricing = pricingFor(session);
    expect(applyPrune(session, planPrune(session, SETTINGS, pricing)).pruned).toHaveLength(2);
    const length = session.length;
    const messages = session.deriveMessages();
    const again = planPrune(session, SETTINGS, pricing);
    expect(again.targets).toEqual([]);
    expect(again.skipped).toBe('nothing-oversized');
    applyPrune(session, again);
    expect(session.length).toBe(length);
    expect(session.deriveMessages()).toBe(messages);
  });

  it('replays from a JsonlStore to the same pruned surface', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'xcompact-pruner-'));
    try {
      const store = new JsonlStore(dir, { sync: false });
      const session = await Session.open(store, 'prune-replay');
      record(session, [
        {
          callId: 'c1',
          toolName: 'read',
          content: [
            { type: 'text', text: BIG },
            { type: 'image', url: 'https://example.com/a.png' },
          ],
        },
        { callId: 'c2', toolName: 'grep', isError: true, content: '𠀋'.repeat(300) },
        { callId: 'c3', content: 'tail' },
      ]);
      applyPrune(session, planPrune(session, SETTINGS, pricingFor(session)));
      const messages = structuredClone([...session.deriveMessages()]);
      const seqs = [...session.surface.seqs()];
      const generation = session.surface.replaceGeneration;
      const length = session.length;
      await session.close();

      const reopened = await Session.open(store, 'prune-replay');
      try {
        expect(reopened.length).toBe(length);
        expect([...reopened.surface.seqs()]).toEqual(seqs);
        expect(reopened.surface.replaceGeneration).toBe(generation);
        expect(reopened.deriveMessages()).toEqual(messages);
        expect(messages[3]).toEqual({ role: 'tool', tool_call_id: 'c1', content: `${BIG_PRUNED}\n\n[image omitted: tool messages carry text only]` });
        expect(planPrune(reopened, SETTINGS, pricingFor(reopened)).skipped).toBe('nothing-oversized');
      } finally {
        await reopened.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps tool pairing valid: every call is still answered right after it', () => {
    const session = Session.inMemory();
    const w = new SessionWriter(session);
    w.request({ provider: 'local', model: 'm', systemPrompt: 'sys' });
    w.startTurn();
    w.user('go');
    w.assistant({
      toolCalls: [
        { id: 'p1', name: 'read', arguments: '{}' },
        { id: 'p2', name: 'read', arguments: '{}' },
      ],
    });
    w.toolResult('p1', BIG);
    w.toolResult('p2', BIG);
    w.assistant({ text: 'done' });
    const cuts = session.balancedCuts();

    expect(applyPrune(session, planPrune(session, SETTINGS, pricingFor(session))).pruned).toHaveLength(2);

    expect(session.surface.pendingCalls()).toEqual([]);
    expect(session.balancedCuts()).toEqual(cuts);
    const roles = session.deriveMessages().map((m) => (m.role === 'tool' ? `tool:${m.tool_call_id}` : m.role));
    expect(roles).toEqual(['system', 'user', 'assistant', 'tool:p1', 'tool:p2', 'assistant']);
    const call = session.deriveMessages()[2]!;
    expect(call.role === 'assistant' && call.tool_calls?.map((c) => c.id)).toEqual(['p1', 'p2']);
  });

  describe('protected recent budget', () => {
    // Surface tail: … R1 (46) · A2 (10) · R2 (46). A node is protected when it lies wholly in the budget.
    function setup() {
      const session = Session.inMemory();
      const [r1, r2] = record(session, [
        { callId: 'c1', content: BIG },
        { callId: 'c2', content: BIG },
      ]);
      const pricing = pricingFor(session);
      expect(pricing.priceOf(r2!)).toBe(46);
      expect(pricing.priceOf(session.surface.seqAt(session.surface.length - 2))).toBe(10);
      return { session, pricing, r1: r1!, r2: r2! };
    }

    it('protects the newest result that fits the budget exactly', () => {
      const { session, pricing, r1, r2 } = setup();
      const plan = planPrune(session, { ...SETTINGS, protectRecentTokens: 46 }, pricing);
      expect(plan.targets.map((t) => t.seq)).toEqual([r1]);
      expect(plan.kept).toEqual([{ seq: r2, callId: 'c2', reason: 'protected-recent' }]);
    });

    it('does not protect a node straddling the budget edge (so a giant newest output stays prunable)', () => {
      const { session, pricing, r1, r2 } = setup();
      expect(planPrune(session, { ...SETTINGS, protectRecentTokens: 45 }, pricing).targets.map((t) => t.seq)).toEqual([r1, r2]);
      const plan = planPrune(session, { ...SETTINGS, protectRecentTokens: 46 + 10 + 45 }, pricing);
      expect(plan.targets.map((t) => t.seq)).toEqual([r1]);
    });

    it('protects everything inside the budget and then has nothing to do', () => {
      const { session, pricing, r1, r2 } = setup();
      const before = session.length;
      const plan = planPrune(session, { ...SETTINGS, protectRecentTokens: 46 + 10 + 46 }, pricing);
      expect(plan.targets).toEqual([]);
      expect(plan.skipped).toBe('nothing-oversized');
      expect(plan.kept.map((k) => [k.seq, k.reason])).toEqual([
        [r1, 'protected-recent'],
        [r2, 'protected-recent'],
      ]);
      applyPrune(session, plan);
      expect(session.length).toBe(before);
    });
  });

  describe("budgets in the provider's tokens (prices × providerRatio, docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have)", () => {
    // Surface tail as above: … R1 (46) · A2 (10) · R2 (46); each pruned result frees 20.
    function setup() {
      const session = Session.inMemory();
      const [r1, r2] = record(session, [
        { callId: 'c1', content: BIG },
        { callId: 'c2', content: BIG },
      ]);
      return { session, r1: r1!, r2: r2! };
    }

    it('the protected budget holds half the priced tokens when the provider counts twice ours', () => {
      const { session, r1, r2 } = setup();
      const at = (providerRatio: number, protectRecentTokens: number) =>
        planPrune(session, { ...SETTINGS, protectRecentTokens }, { ...pricingFor(session), providerRatio }).targets.map((t) => t.seq);
      expect(at(1, 46 + 10 + 46)).toEqual([]);
      expect(at(2, 46 + 10 + 46)).toEqual([r1]); // R2 alone is 92 provider tokens: A2 no longer fits
      expect(at(2, 92)).toEqual([r1]);
      expect(at(2, 91)).toEqual([r1, r2]); // R2 straddles the edge
      expect(at(0.5, 46 + 10 + 46 + 50)).toEqual([]); // a provider counting half: more fits
    });

    it('the minimum reclaim is judged in provider tokens; the plan still reports our prices', () => {
      const { session } = setup();
      const plan = (providerRatio: number, minReclaimTokens: number) =>
        planPrune(session, { ...SETTINGS, minReclaimTokens }, { ...pricingFor(session), providerRatio });
      expect(plan(1, 41).skipped).toBe('below-min-reclaim');
      expect(plan(2, 80).tokensFreed).toBe(40); // 40 priced = 80 provider tokens
      expect(plan(2, 81)).toMatchObject({ skipped: 'below-min-reclaim', reclaimableTokens: 40 });
    });

    it('a providerRatio that is not a positive number is a pricing error, and nothing is written', () => {
      const { session } = setup();
      const before = session.length;
      for (const providerRatio of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
        expect(() => planPrune(session, SETTINGS, { ...pricingFor(session), providerRatio })).toThrow(PrunePricingError);
      }
      expect(session.length).toBe(before);
    });

    it("the engine's prune step uses the meter's calibration: a result our prices protect is pruned when the provider counts more", () => {
      const session = Session.inMemory();
      const w = new SessionWriter(session);
      const meter = new TokenMeter(session, { tokenizerFor: () => getTokenizer('o200k_base') });
      const models = { 'acme/m': { contextWindow: 200_000, maxOutputTokens: 1000 } };
      w.request({ provider: 'acme', model: 'm', systemPrompt: 'You are a coding agent.' });
      w.startTurn();
      w.user('Read the logs.');
      // A provider that counts twice our price of everything (its reports say so).
      let completion = 0;
      for (let i = 0; i < 12; i++) {
        w.startStep();
        w.request({ provider: 'acme', model: 'm' });
        const call = { id: `c${i}`, name: 'read', arguments: JSON.stringify({ path: `log${i}.txt` }) };
        const prompt = 2 * meter.measure().estimatedTokens;
        completion = 2 * meter.priceEvent({ type: 'assistant/message', data: { content: [{ type: 'tool-call', ...call }] } });
        w.assistant({ toolCalls: [call], usage: { promptTokens: prompt, completionTokens: completion } });
        w.toolResult(call.id, `line ${i}: the service restarted after a timeout of ${i * 7} ms.\n`.repeat(40), { toolName: 'read' });
        w.endStep();
      }
      expect(meter.providerRatio).toBeCloseTo(2, 1);
      const newest = session.surface.seqAt(session.surface.length - 1);
      const priced = meter.priceOf(newest);
      // The newest result fits the budget in our tokens, not in the provider's.
      const prune = { thresholdChars: 400, headChars: 100, tailChars: 100, protectRecentTokens: Math.round(priced * 1.5), minReclaimTokens: 0 };
      const config = parseConfig({ models, prune });
      const uncalibrated = planPrune(session, { ...prune, neverPrune: [] }, { priceOf: (s) => meter.priceOf(s), priceEvent: (e) => meter.priceEvent(e) });
      expect(uncalibrated.kept).toContainEqual({ seq: newest, callId: 'c11', reason: 'protected-recent' });
      const summary = pruneSurface({ session, meter, config }, { trigger: 'pressure', protectRecent: true });
      expect(summary.count).toBe(12);
      expect(session.surface.has(newest)).toBe(false); // replaced by its pruned copy
    });
  });

  describe('minReclaimTokens', () => {
    it('skips a pass that frees less and writes nothing', () => {
      const session = Session.inMemory();
      const [seq] = record(session, [{ callId: 'c1', content: BIG }]);
      const before = session.length;
      const plan = planPrune(session, { ...SETTINGS, minReclaimTokens: 21 }, pricingFor(session));
      expect(plan).toEqual({ targets: [], argumentTargets: [], tokensFreed: 0, reclaimableTokens: 20, kept: [], skipped: 'below-min-reclaim' });
      expect(applyPrune(session, plan)).toEqual({ pruned: [], tokensFreed: 0, skipped: 'below-min-reclaim' });
      expect(session.length).toBe(before);
      expect(session.surface.has(seq!)).toBe(true);
    });

    it('prunes when the pass frees exactly minReclaimTokens', () => {
      const session = Session.inMemory();
      record(session, [{ callId: 'c1', content: BIG }]);
      const plan = planPrune(session, { ...SETTINGS, minReclaimTokens: 20 }, pricingFor(session));
      expect(plan.tokensFreed).toBe(20);
      expect(applyPrune(session, plan).tokensFreed).toBe(20);
    });

    it('leaves a result whose rewrite would not free tokens (a cache miss for nothing)', () => {
      const session = Session.inMemory();
      const [seq] = record(session, [{ callId: 'c1', content: BIG }]);
      const flat: Pricing = { priceOf: () => 50, priceEvent: () => 50 };
      const plan = planPrune(session, SETTINGS, flat);
      expect(plan).toEqual({
        targets: [],
        argumentTargets: [],
        tokensFreed: 0,
        reclaimableTokens: 0,
        kept: [{ seq, callId: 'c1', reason: 'no-gain' }],
        skipped: 'below-min-reclaim',
      });
    });
  });

  it('never prunes tools named in neverPrune, by the result toolName or else the call name', () => {
    const session = Session.inMemory();
    const [read, bash, grep] = record(session, [
      { callId: 'c1', toolName: 'read', content: BIG },
      { callId: 'c2', callName: 'bash', content: BIG }, // the result has no toolName: the call names it
      { callId: 'c3', toolName: 'grep', content: BIG },
    ]);
    const plan = planPrune(session, { ...SETTINGS, neverPrune: ['read', 'bash'] }, pricingFor(session));
    expect(plan.targets.map((t) => [t.seq, t.toolName])).toEqual([[grep, 'grep']]);
    expect(plan.kept).toEqual([
      { seq: read, callId: 'c1', reason: 'never-prune' },
      { seq: bash, callId: 'c2', reason: 'never-prune' },
    ]);
  });

  it('rejects settings whose pruned text would still be oversized', () => {
    const session = Session.inMemory();
    record(session, [{ callId: 'c1', content: BIG }]);
    const bad = { ...SETTINGS, headChars: 20, tailChars: 17 }; // 20 + 64 + 17 = 101 > 100
    expect(() => planPrune(session, bad, pricingFor(session))).toThrow(PruneSettingsError);
    expect(() => planPrune(session, { ...SETTINGS, tailChars: 16 }, pricingFor(session))).not.toThrow();
  });

  it('rejects a price that is not a token count', () => {
    const session = Session.inMemory();
    record(session, [{ callId: 'c1', content: BIG }]);
    const fractional: Pricing = { priceOf: () => 50, priceEvent: () => 12.5 };
    expect(() => planPrune(session, SETTINGS, fractional)).toThrow(PrunePricingError);
  });

  describe('stale plans', () => {
    it('rejects a plan applied twice, without any append', () => {
      const session = Session.inMemory();
      const [seq] = record(session, [{ callId: 'c1', content: BIG }]);
      const plan = planPrune(session, SETTINGS, pricingFor(session));
      applyPrune(session, plan);
      const length = session.length;
      let error: unknown;
      try {
        applyPrune(session, plan);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(PrunePlanStaleError);
      expect(error).toMatchObject({ code: 'prune-plan-stale', seq });
      expect(session.length).toBe(length);
    });

    it('rejects the whole plan when a later target changed, leaving earlier targets unwritten', () => {
      const session = Session.inMemory();
      const [r1, r2] = record(session, [
        { callId: 'c1', content: BIG },
        { callId: 'c2', content: BIG },
      ]);
      const plan = planPrune(session, SETTINGS, pricingFor(session));
      expect(plan.targets.map((t) => t.seq)).toEqual([r1, r2]);
      applyPrune(session, { ...plan, targets: [plan.targets[1]!] }); // someone pruned r2 meanwhile
      const length = session.length;
      expect(() => applyPrune(session, plan)).toThrow(PrunePlanStaleError);
      expect(session.length).toBe(length);
      expect(session.surface.has(r1!)).toBe(true);
    });

    it('rejects a plan made from another session whose node has different content', () => {
      const a = Session.inMemory('a');
      const b = Session.inMemory('b');
      record(a, [{ callId: 'c1', content: BIG }]);
      record(b, [{ callId: 'c1', content: BIG.replace('m', 'M') }]);
      const length = b.length;
      expect(() => applyPrune(b, planPrune(a, SETTINGS, pricingFor(a)))).toThrow(/different content/);
      expect(b.length).toBe(length);
    });

    it('rejects a plan whose events would be malformed before writing anything', () => {
      const session = Session.inMemory();
      record(session, [
        { callId: 'c1', content: BIG },
        { callId: 'c2', content: BIG },
      ]);
      const plan = planPrune(session, SETTINGS, pricingFor(session));
      const broken = { ...plan, targets: [plan.targets[0]!, { ...plan.targets[1]!, tokensAfter: -1 }] };
      const length = session.length;
      expect(() => applyPrune(session, broken)).toThrow(/malformed compaction\/prune/);
      expect(session.length).toBe(length);
    });
  });
});
