/**
 * The log rules of docs/spec.md#1-the-log-and-the-surface and src/session/session.ts: every rule with a passing and a
 * rejected case, on a MemoryStore and on a JsonlStore session. A rejected append must leave
 * everything observable unchanged, the stored bytes included (see expectRejected).
 */
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Session, SessionRuleError, SessionWriter, StoreError, usageFromOpenAI, type AppendInput, type SessionEvent } from '../../src/session/index';
import { openAIMessageProblems } from '../helpers/openai-validator';
import {
  BACKENDS,
  appendAll,
  assistant,
  checkpoint,
  durableSnapshot,
  expectRejected,
  expectRule,
  header,
  openHarness,
  removeTempDirs,
  replace,
  result,
  snapshot,
  stepEnd,
  stepStart,
  system,
  turnEnd,
  turnStart,
  user,
  type Harness,
} from '../helpers/session';

afterAll(removeTempDirs);

describe.each(BACKENDS)('log rules on a %s store', (backend) => {
  let h: Harness;
  let s: Session;
  beforeEach(async () => {
    h = await openHarness(backend);
    s = h.session;
  });
  afterEach(async () => {
    await h.dispose();
  });

  describe('append', () => {
    it('gives each event its position as seq, freezes it, and notifies observers after the commit', () => {
      const seen: Array<{ seq: number; lengthAtNotify: number; change: unknown }> = [];
      s.subscribe((event, change) => seen.push({ seq: event.seq, lengthAtNotify: s.length, change }));
      const data = { content: [{ type: 'text' as const, text: 'hello' }] };
      const e0 = s.append({ type: 'user/message', data, surfaceOp: 'append' });
      const e1 = s.append(turnStart(0));
      expect([e0.seq, e1.seq]).toEqual([0, 1]);
      expect(s.events().map((e) => e.seq)).toEqual([0, 1]);
      expect(s.event(1)).toBe(e1);
      expect(Object.isFrozen(e0) && Object.isFrozen(e0.data) && Object.isFrozen(e0.data.content[0])).toBe(true);
      expect(new Date(e0.time).toISOString()).toBe(e0.time);
      expect(seen).toEqual([
        { seq: 0, lengthAtNotify: 1, change: { kind: 'append', position: 0, seq: 0 } },
        { seq: 1, lengthAtNotify: 2, change: undefined },
      ]);
      // The caller's object is copied, not frozen or kept: editing it later changes nothing.
      expect(Object.isFrozen(data)).toBe(false);
      data.content[0]!.text = 'edited';
      expect(JSON.stringify(s.deriveMessages())).toBe('[{"role":"user","content":"hello"}]');
    });

    it('a throwing observer does not undo the append or stop other observers', () => {
      const errors: unknown[] = [];
      const session = Session.inMemory('obs', { onListenerError: (e) => errors.push(e) });
      const calls: number[] = [];
      session.subscribe(() => {
        throw new Error('observer bug');
      });
      session.subscribe((e) => calls.push(e.seq));
      session.append(user('hi'));
      expect(session.length).toBe(1);
      expect(calls).toEqual([0]);
      expect(errors).toHaveLength(1);
    });

    it('rejects an unknown event type, including names of Object.prototype', async () => {
      await expectRejected(h, { type: 'user/msg', data: {} } as unknown as AppendInput, 'unknown-type');
      await expectRejected(h, { type: 'toString', data: {} } as unknown as AppendInput, 'unknown-type');
    });

    it('rejects data that does not match the schema of its type, naming the field', async () => {
      s.append(user('ok'));
      const e1 = await expectRejected(h, { type: 'user/message', data: { content: [] }, surfaceOp: 'append' }, 'invalid-data');
      expect(e1.message).toContain('user/message data.content');
      await expectRejected(
        h,
        { type: 'assistant/message', data: { content: [{ type: 'tool-call', id: '', name: 'x', arguments: '{}' }] }, surfaceOp: 'append' },
        'invalid-data',
      );
      await expectRejected(h, { type: 'turn/start', data: { turn: 0, extra: true } } as unknown as AppendInput, 'invalid-data');
      await expectRejected(h, { type: 'turn/start', data: { turn: -1 } }, 'invalid-data');
      const bigint = { ...header(), data: { ...header().data, tools: [{ n: 1n }] } } as unknown as AppendInput;
      // Not JSON at all is the storable rule's (test/session/storable.test.ts).
      await expectRejected(h, bigint, 'not-storable');
    });
  });

  describe('surfaceOp', () => {
    it('surface events must carry it', async () => {
      const inputs: AppendInput[] = [
        { type: 'system/message', data: { text: 's' } },
        { type: 'user/message', data: { content: [{ type: 'text', text: 'u' }] } },
        { type: 'assistant/message', data: { content: [] } },
        { type: 'tool/result', data: { callId: 'c', content: [] } },
      ];
      for (const input of inputs) await expectRejected(h, input, 'missing-surface-op');
      appendAll(s, [system('s'), user('u'), assistant('a')]);
      expect(s.surface.length).toBe(3);
    });

    it('log-only events carry neither surfaceOp nor sourceEventSeqs', async () => {
      await expectRejected(h, { ...turnStart(0), surfaceOp: 'append' }, 'log-only-event');
      await expectRejected(h, { ...header(), sourceEventSeqs: [0] }, 'log-only-event');
      s.append(turnStart(0));
      s.append(header());
      expect(s.length).toBe(2);
      expect(s.surface.length).toBe(0);
    });

    it('must be "append" or {op: "replace", start, end}, nothing else (it is stored as given)', async () => {
      s.append(user('u'));
      await expectRejected(h, { ...user('x'), surfaceOp: 'prepend' } as unknown as AppendInput, 'surface-op-shape');
      await expectRejected(
        h,
        { ...user('x'), surfaceOp: { op: 'replace', start: 0, end: 0, note: 'x' }, sourceEventSeqs: [0] } as unknown as AppendInput,
        'surface-op-shape',
      );
      await expectRejected(h, { ...user('x'), surfaceOp: { op: 'replace', start: -1, end: 0 }, sourceEventSeqs: [0] }, 'surface-op-shape');
    });
  });

  describe('sourceEventSeqs', () => {
    it('may name earlier events; an assistant/message may say [] for a known empty stream', () => {
      s.append(user('u'));
      s.append(turnStart(0));
      const a = s.append({ ...assistant('a'), sourceEventSeqs: [0, 1] });
      const empty = s.append({ ...assistant(''), sourceEventSeqs: [] });
      expect(a.sourceEventSeqs).toEqual([0, 1]);
      expect(empty.sourceEventSeqs).toEqual([]);
    });

    it('must not be empty on other surface events', async () => {
      s.append(user('u'));
      await expectRejected(h, { ...user('x'), sourceEventSeqs: [] }, 'source-seqs');
      await expectRejected(h, { ...system('x'), sourceEventSeqs: [] }, 'source-seqs');
      s.append(assistant('', ['c']));
      await expectRejected(h, { ...result('c'), sourceEventSeqs: [] }, 'source-seqs');
    });

    it('must name only earlier seqs, each once, as integers', async () => {
      s.append(user('u'));
      s.append(user('v'));
      await expectRejected(h, { ...user('x'), sourceEventSeqs: [2] }, 'source-seqs'); // its own seq
      await expectRejected(h, { ...user('x'), sourceEventSeqs: [7] }, 'source-seqs'); // the future
      await expectRejected(h, { ...user('x'), sourceEventSeqs: [0, 1, 0] }, 'source-seqs');
      await expectRejected(h, { ...user('x'), sourceEventSeqs: [-1] }, 'source-seqs');
      await expectRejected(h, { ...user('x'), sourceEventSeqs: [0.5] }, 'source-seqs');
      await expectRejected(h, { ...user('x'), sourceEventSeqs: '0' } as unknown as AppendInput, 'source-seqs');
      expect(s.append({ ...user('x'), sourceEventSeqs: [1, 0] }).seq).toBe(2);
    });
  });

  describe('turns and steps', () => {
    it('nest and number correctly: turns increase, steps increase within a turn and restart in the next', () => {
      appendAll(s, [turnStart(0), stepStart(0, 0), stepEnd(0, 0), stepStart(0, 1)]);
      expect(s.openTurn).toBe(0);
      expect(s.openStep).toEqual({ turn: 0, step: 1 });
      expect(s.lastStep).toBe(1);
      appendAll(s, [stepEnd(0, 1), turnEnd(0), turnStart(3), stepStart(3, 0)]);
      expect([s.openTurn, s.lastTurn, s.lastStep]).toEqual([3, 3, 0]);
      s.append({ type: 'step/end', data: { turn: 3, step: 0, reason: 'aborted' } });
      s.append({ type: 'turn/end', data: { turn: 3, reason: 'error' } });
      expect([s.openTurn, s.openStep]).toEqual([null, null]);
    });

    it('rejects a turn/start while a turn is open, or with a number not above the last', async () => {
      s.append(turnStart(1));
      await expectRejected(h, turnStart(2), 'turn-already-open');
      s.append(turnEnd(1));
      await expectRejected(h, turnStart(1), 'turn-number');
      await expectRejected(h, turnStart(0), 'turn-number');
    });

    it('rejects a turn/end for a turn that is not open, or while its step is open', async () => {
      await expectRejected(h, turnEnd(0), 'turn-not-open');
      appendAll(s, [turnStart(0), stepStart(0, 0)]);
      await expectRejected(h, turnEnd(1), 'turn-not-open');
      await expectRejected(h, turnEnd(0), 'step-still-open');
    });

    it('rejects a step outside its turn, a second open step, and a step number not above the last', async () => {
      await expectRejected(h, stepStart(0, 0), 'step-outside-turn');
      s.append(turnStart(0));
      await expectRejected(h, stepStart(1, 0), 'step-outside-turn');
      s.append(stepStart(0, 4));
      await expectRejected(h, stepStart(0, 5), 'step-already-open');
      s.append(stepEnd(0, 4));
      await expectRejected(h, stepStart(0, 4), 'step-number');
      await expectRejected(h, stepStart(0, 2), 'step-number');
    });

    it('rejects a step/end that does not name the open step', async () => {
      await expectRejected(h, stepEnd(0, 0), 'step-not-open');
      appendAll(s, [turnStart(0), stepStart(0, 0)]);
      await expectRejected(h, stepEnd(0, 1), 'step-not-open');
    });
  });

  describe('compaction lock', () => {
    it('start holds it, summary belongs to it, end releases it', () => {
      expect(s.lock).toEqual({ held: false, staleOrphans: [] });
      const start = s.append({ type: 'compaction/start', data: { turn: null, trigger: 'manual' } });
      expect(s.lock).toEqual({ held: true, startSeq: start.seq, turn: null, trigger: 'manual', orphan: false, staleOrphans: [] });
      s.append(user('u'));
      s.append({ type: 'compaction/summary', data: { summary: 'S', range: { start: 1, end: 1 }, shadowedSeqs: [1], shadowedTokens: 3 } });
      s.append({ type: 'compaction/end', data: { turn: null } });
      expect(s.lock).toEqual({ held: false, staleOrphans: [] });
      expect(s.needsRecovery).toBe(false);
    });

    it('an open turn is named by the bracket; a failed compaction ends with an error', () => {
      appendAll(s, [turnStart(4)]);
      s.append({ type: 'compaction/start', data: { turn: 4, trigger: 'pressure' } });
      s.append({ type: 'compaction/end', data: { turn: 4, error: { code: 'summary', message: 'empty' } } });
      expect(s.lock.held).toBe(false);
    });

    it('rejects a second start while held, and a start naming another turn', async () => {
      await expectRejected(h, { type: 'compaction/start', data: { turn: 0, trigger: 'pressure' } }, 'compaction-turn');
      s.append(turnStart(0));
      await expectRejected(h, { type: 'compaction/start', data: { turn: null, trigger: 'manual' } }, 'compaction-turn');
      s.append({ type: 'compaction/start', data: { turn: 0, trigger: 'overflow' } });
      await expectRejected(h, { type: 'compaction/start', data: { turn: 0, trigger: 'overflow' } }, 'compaction-locked');
      await expectRejected(h, { type: 'compaction/end', data: { turn: null } }, 'compaction-turn');
    });

    it('rejects a summary or an end with no open start', async () => {
      s.append(user('u'));
      await expectRejected(
        h,
        { type: 'compaction/summary', data: { summary: 'S', range: { start: 0, end: 0 }, shadowedSeqs: [0], shadowedTokens: 1 } },
        'no-compaction-open',
      );
      await expectRejected(h, { type: 'compaction/end', data: { turn: null } }, 'no-compaction-open');
    });

    it('a later session/end-seed makes an unmatched start stale: not held, its end refused, a new start allowed', async () => {
      const start = s.append({ type: 'compaction/start', data: { turn: null, trigger: 'pressure' } });
      s.append({ type: 'session/end-seed', data: { reason: 'shutdown' } });
      expect(s.lock).toEqual({ held: false, staleOrphans: [start.seq] });
      await expectRejected(h, { type: 'compaction/end', data: { turn: null } }, 'no-compaction-open');
      const again = s.append({ type: 'compaction/start', data: { turn: null, trigger: 'manual' } });
      expect(s.lock).toMatchObject({ held: true, startSeq: again.seq, staleOrphans: [start.seq] });
      // An end-seed with no open start changes nothing about the lock.
      s.append({ type: 'compaction/end', data: { turn: null, error: { code: 'cancelled', message: 'stopped' } } });
      s.append({ type: 'session/end-seed', data: {} });
      expect(s.lock).toEqual({ held: false, staleOrphans: [start.seq] });
    });

    it('staleOrphans handed out cannot be edited to change the lock', () => {
      s.append({ type: 'compaction/start', data: { turn: null, trigger: 'pressure' } });
      s.append({ type: 'session/end-seed', data: {} });
      const orphans = s.lock.staleOrphans as number[];
      expect(() => orphans.push(99)).toThrow(TypeError);
      expect(s.lock.staleOrphans).toEqual([0]);
    });

    it('a start left by a stopped process is an orphan after reopen, and still a live lock', async () => {
      const start = s.append({ type: 'compaction/start', data: { turn: null, trigger: 'manual' } });
      expect(s.lock).toMatchObject({ held: true, orphan: false });
      s = await h.reopen();
      expect(s.openedLength).toBe(1);
      expect(s.lock).toEqual({ held: true, startSeq: start.seq, turn: null, trigger: 'manual', orphan: true, staleOrphans: [] });
      expect(s.needsRecovery).toBe(true);
      await expectRejected(h, { type: 'compaction/start', data: { turn: null, trigger: 'manual' } }, 'compaction-locked');
      // A start made by this Session object is not an orphan.
      s.append({ type: 'compaction/end', data: { turn: null, error: { code: 'cancelled', message: 'stopped' } } });
      s.append({ type: 'compaction/start', data: { turn: null, trigger: 'pressure' } });
      expect(s.lock).toMatchObject({ held: true, orphan: false });
    });

    it('is answered without reading the log', () => {
      for (let i = 0; i < 50; i++) s.append(header());
      s.append({ type: 'compaction/start', data: { turn: null, trigger: 'manual' } });
      const spy = vi.spyOn(s, 'event');
      const spyEvents = vi.spyOn(s, 'events');
      expect(s.lock.held).toBe(true);
      expect(spy).not.toHaveBeenCalled();
      expect(spyEvents).not.toHaveBeenCalled();
    });
  });

  describe('compaction/prune target', () => {
    it('must be a current tool/result node of the named call', async () => {
      appendAll(s, [user('u'), assistant('', ['c1']), result('c1', 'big output')]);
      const prune = (targetSeq: number, callId: string): AppendInput => ({
        type: 'compaction/prune',
        data: { targetSeq, callId, tokensBefore: 10, tokensAfter: 2, charsBefore: 40, charsAfter: 8 },
      });
      await expectRejected(h, prune(2, 'c2'), 'prune-target');
      await expectRejected(h, prune(0, 'c1'), 'prune-target'); // a user message
      await expectRejected(h, prune(99, 'c1'), 'prune-target');
      s.append(prune(2, 'c1'));
      const pruned = s.append(replace(result('c1', 'b…'), 2, 2, [2, 3]));
      await expectRejected(h, prune(2, 'c1'), 'prune-target'); // shadowed now
      s.append(prune(pruned.seq, 'c1'));
    });
  });

  describe('recover and needsRecovery', () => {
    it('a clean log needs no recovery, and recover() then writes nothing', () => {
      appendAll(s, [system('s'), turnStart(0), stepStart(0, 0), user('u'), assistant('a'), stepEnd(0, 0), turnEnd(0)]);
      expect(s.needsRecovery).toBe(false);
      const before = snapshot(s);
      expect(s.recover()).toEqual({ closedCalls: [], closedStep: false, closedTurn: false, clearedLock: undefined });
      expect(snapshot(s)).toEqual(before);
    });

    it.each([
      ['an open turn', [turnStart(0)]],
      ['an open step', [turnStart(0), stepStart(0, 0)]],
      ['a pending call', [user('u'), assistant('', ['c'])]],
      ['a live lock', [{ type: 'compaction/start', data: { turn: null, trigger: 'manual' } }]],
    ] as Array<[string, AppendInput[]]>)('%s needs recovery', (_name, inputs) => {
      appendAll(s, inputs);
      expect(s.needsRecovery).toBe(true);
      s.recover();
      expect(s.needsRecovery).toBe(false);
    });

    it('answers pending calls with error results, closes step and turn as interrupted, clears the orphan lock', async () => {
      appendAll(s, [system('s'), turnStart(0), stepStart(0, 0), user('go'), header()]);
      appendAll(s, [assistant('', ['c1', 'c2', 'c3']), result('c2')]);
      const start = s.append({ type: 'compaction/start', data: { turn: 0, trigger: 'pressure' } });
      s = await h.reopen(); // the process stopped here
      expect(s.needsRecovery).toBe(true);
      expect(s.lock).toMatchObject({ held: true, orphan: true });
      const from = s.length;
      const report = s.recover();
      expect(report).toEqual({ closedCalls: ['c1', 'c3'], closedStep: true, closedTurn: true, clearedLock: start.seq });
      const added = s.events().slice(from);
      expect(added.map((e) => e.type)).toEqual(['tool/result', 'tool/result', 'step/end', 'session/end-seed', 'turn/end']);
      for (const [i, callId] of (['c1', 'c3'] as const).entries()) {
        const r = added[i] as SessionEvent<'tool/result'>;
        expect(r.data).toMatchObject({ callId, isError: true });
        expect(JSON.stringify(r.data.content)).toContain('interrupted');
      }
      expect(added[2]!.data).toEqual({ turn: 0, step: 0, reason: 'interrupted' });
      expect(added[4]!.data).toEqual({ turn: 0, reason: 'interrupted' });
      expect(s.needsRecovery).toBe(false);
      expect(s.lock).toEqual({ held: false, staleOrphans: [start.seq] });
      expect(openAIMessageProblems(s.deriveMessages())).toEqual([]);
      const after = durableSnapshot(s);
      s = await h.reopen();
      expect(durableSnapshot(s)).toEqual(after);
      expect(s.needsRecovery).toBe(false);
    });
  });
});

describe('SessionWriter', () => {
  it('numbers turns and steps, and refuses steps and ends with nothing open', () => {
    const s = Session.inMemory();
    const w = new SessionWriter(s);
    expectRule(() => w.startStep(), 'turn-not-open');
    expectRule(() => w.endTurn(), 'turn-not-open');
    expectRule(() => w.endStep(), 'step-not-open');
    expect(w.startTurn()).toBe(0);
    expect(w.startStep()).toEqual({ turn: 0, step: 0 });
    w.endStep();
    expect(w.startStep()).toEqual({ turn: 0, step: 1 });
    w.endStep('aborted');
    w.endTurn('completed');
    expect(w.startTurn()).toBe(1);
    expect(w.startStep()).toEqual({ turn: 1, step: 0 });
    expect(
      s
        .events()
        .filter((e) => e.type === 'step/end')
        .map((e) => e.data),
    ).toEqual([
      { turn: 0, step: 0 },
      { turn: 0, step: 1, reason: 'aborted' },
    ]);
  });

  it('keeps the system prompt as node 0: appends it, updates it in place, ignores an unchanged one', () => {
    const s = Session.inMemory();
    const w = new SessionWriter(s);
    const first = w.system('v1');
    expect(first?.seq).toBe(0);
    w.user('hi');
    expect(w.system('v1')).toBeUndefined();
    const second = w.system('v2');
    expect(second?.surfaceOp).toEqual({ op: 'replace', start: 0, end: 0 });
    expect(s.surface.slice(0)).toEqual([second!.seq, 1]);
    expect(s.deriveMessages()[0]).toEqual({ role: 'system', content: 'v2' });
    expect(s.surface.replaceGeneration).toBe(1);
  });

  it('refuses a system prompt once the surface starts with something else', () => {
    const s = Session.inMemory();
    const w = new SessionWriter(s);
    w.user('hi');
    const before = snapshot(s);
    expectRule(() => w.system('late'), 'system-prompt-late');
    expectRule(() => w.request({ provider: 'p', model: 'm', systemPrompt: 'late' }), 'system-prompt-late');
    expect(snapshot(s)).toEqual(before);
  });

  it('records the request header, the reply with tool calls and usage, and the results', () => {
    const s = Session.inMemory();
    const w = new SessionWriter(s);
    const tools = [{ type: 'function' as const, function: { name: 'read', parameters: { type: 'object' } } }];
    w.request({ provider: 'deepseek', model: 'deepseek-chat', systemPrompt: 'be brief', tools, maxTokens: 512 });
    expect(s.latestHeader?.data).toEqual({ provider: 'deepseek', model: 'deepseek-chat', tools, maxTokens: 512 });
    expect(Object.isFrozen(tools[0])).toBe(false); // the caller's definitions stay theirs
    w.startTurn();
    w.user('read it');
    const a = w.assistantFromCompletion(
      {
        content: null,
        reasoning_content: 'thinking',
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read', arguments: '{"p":"a"}' } }],
      },
      {
        usage: {
          prompt_tokens: 100,
          completion_tokens: 20,
          total_tokens: 120,
          prompt_tokens_details: { cached_tokens: 60 },
          completion_tokens_details: { reasoning_tokens: 5 },
        },
        provider: 'deepseek',
        model: 'deepseek-chat',
        finishReason: 'tool_calls',
      },
    );
    expect(a.data).toEqual({
      content: [
        { type: 'reasoning', text: 'thinking' },
        { type: 'tool-call', id: 'call_1', name: 'read', arguments: '{"p":"a"}' },
      ],
      provider: 'deepseek',
      model: 'deepseek-chat',
      usage: { promptTokens: 100, completionTokens: 20, cachedTokens: 60, reasoningTokens: 5 },
      finishReason: 'tool_calls',
    });
    expect(s.latestUsage).toBe(a);
    w.toolResult('call_1', 'contents', { toolName: 'read', isError: true });
    expect(s.deriveMessages()).toEqual([
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'read it' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read', arguments: '{"p":"a"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'contents' },
    ]);
    expect(usageFromOpenAI({ prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 })).toEqual({ promptTokens: 7, completionTokens: 3 });
  });

  it('latestHeader, latestUsage and latestReply follow the newest event that carries them', () => {
    const s = Session.inMemory();
    expect(s.latestReply).toBeUndefined();
    const h1 = s.append(header('m1'));
    const a1 = s.append(assistant('x', [], { promptTokens: 1, completionTokens: 1 }));
    const a2 = s.append(assistant('no usage'));
    expect(s.latestHeader).toBe(h1);
    expect(s.latestUsage).toBe(a1);
    expect(s.latestReply).toBe(a2);
    const h2 = s.append(header('m2'));
    expect(s.latestHeader).toBe(h2);
  });
});

describe('a closed or failed session', () => {
  it('refuses appends after close() with a typed error instead of dropping them', async () => {
    const h = await openHarness('memory');
    h.session.append(user('u'));
    await h.session.close();
    const before = snapshot(h.session);
    let err: unknown;
    try {
      h.session.append(user('after close'));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(StoreError);
    expect((err as StoreError).code).toBe('store-closed');
    expect(snapshot(h.session)).toEqual(before);
    const reopened = await h.reopen();
    expect(reopened.length).toBe(1);
    await h.dispose();
  });

  it('a rule error is a SessionRuleError, not a StoreError', () => {
    const s = Session.inMemory();
    expect(() => s.append(turnEnd(0))).toThrow(SessionRuleError);
  });
});

describe('checkpoint provenance in the log', () => {
  it('a checkpoint may name the compaction events as sources besides the shadowed nodes', () => {
    const s = Session.inMemory();
    appendAll(s, [system('s'), user('a'), assistant('b'), user('c')]);
    const start = s.append({ type: 'compaction/start', data: { turn: null, trigger: 'manual' } });
    const summary = s.append({ type: 'compaction/summary', data: { summary: 'S', range: { start: 1, end: 2 }, shadowedSeqs: [1, 2], shadowedTokens: 9 } });
    const cp = s.append(checkpoint(1, 2, [start.seq, summary.seq, 1, 2]));
    s.append({ type: 'compaction/end', data: { turn: null } });
    expect(s.surface.slice(0)).toEqual([0, cp.seq, 3]);
    expect(s.surface.shadowedBy(cp.seq)).toEqual([1, 2]);
  });
});

describe('observer delivery order', () => {
  it('delivers events in log order even when a listener appends', async () => {
    const { Session } = await import('../../src/session/session');
    const s = Session.inMemory();
    const seen: number[][] = [[], []];
    s.subscribe((e) => {
      seen[0]!.push(e.seq);
      if (e.seq === 0) s.append({ type: 'session/end-seed', data: {} });
    });
    s.subscribe((e) => seen[1]!.push(e.seq));
    s.append({ type: 'session/end-seed', data: {} });
    expect(seen).toEqual([
      [0, 1],
      [0, 1],
    ]);
  });
});
