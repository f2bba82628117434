/**
 * The surface projection: append rules for tool calls and results, positional replace with
 * its provenance and balance rules, tool-pairing balance by call id, and deriveMessages().
 */
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Session, argumentPruneProblem, withPrunedArguments, type AppendInput, type SessionEvent } from '../../src/session/index';
import { toChatMessage } from '../../src/session/derive';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { referenceCuts, referencePending, referenceSurface } from '../helpers/reference';
import {
  BACKENDS,
  appendAll,
  assistant,
  condense,
  expectRejected,
  expectRule,
  header,
  openHarness,
  removeTempDirs,
  replace,
  result,
  stepEnd,
  stepStart,
  system,
  turnEnd,
  turnStart,
  user,
  userParts,
  type Harness,
} from '../helpers/session';

afterAll(removeTempDirs);

/** The incremental answers must equal the from-scratch ones. */
/** Every way of editing an array throws; the array stays as it was. */
function expectReadOnly(messages: readonly unknown[]): void {
  const a = messages as unknown[];
  const before = JSON.stringify(a);
  expect(() => a.push({ role: 'user', content: 'x' })).toThrow(TypeError);
  expect(() => {
    a[0] = { role: 'user', content: 'x' };
  }).toThrow(TypeError);
  expect(() => {
    a.length = 0;
  }).toThrow(TypeError);
  expect(() => a.splice(0, 1)).toThrow(TypeError);
  expect(() => a.sort()).toThrow(TypeError);
  expect(() => delete a[0]).toThrow(TypeError);
  expect(JSON.stringify(a)).toBe(before);
}

function expectMatchesReference(s: Session): void {
  const seqs = s.surface.slice(0);
  expect(seqs).toEqual(referenceSurface(s.events()));
  const at = (q: number) => s.event(q);
  expect(s.balancedCuts()).toEqual(referenceCuts(seqs, at));
  expect(s.surface.pendingCalls()).toEqual(referencePending(seqs, at));
  expect(s.deriveMessages()).toEqual(seqs.map((q) => toChatMessage(s.event(q) as never)));
  seqs.forEach((q, p) => expect(s.surface.positionOf(q)).toBe(p));
}

describe.each(BACKENDS)('surface rules on a %s store', (backend) => {
  let h: Harness;
  let s: Session;
  beforeEach(async () => {
    h = await openHarness(backend);
    s = h.session;
  });
  afterEach(async () => {
    await h.dispose();
  });

  describe('tool calls and results', () => {
    it('a result answers a pending call; results of a parallel batch may come in any order', () => {
      appendAll(s, [user('u'), assistant('', ['a', 'b', 'c'])]);
      expect(s.surface.pendingCalls()).toEqual(['a', 'b', 'c']);
      appendAll(s, [result('c'), result('a')]);
      expect(s.surface.pendingCalls()).toEqual(['b']);
      s.append(result('b'));
      expect(s.surface.pendingCalls()).toEqual([]);
      s.append(user('next'));
      expectMatchesReference(s);
    });

    it('rejects an orphan result: no such call, or a call already answered', async () => {
      s.append(user('u'));
      const e = await expectRejected(h, result('nope'), 'orphan-tool-result');
      expect(e.message).toContain('"nope"');
      appendAll(s, [assistant('', ['a', 'b']), result('a')]);
      const again = await expectRejected(h, result('a', 'twice'), 'orphan-tool-result');
      expect(again.message).toContain('already has its result');
    });

    it('rejects a duplicate call id within a message or against a call on the surface', async () => {
      s.append(user('u'));
      await expectRejected(h, assistant('', ['x', 'x']), 'duplicate-tool-call-id');
      appendAll(s, [assistant('', ['x']), result('x')]);
      await expectRejected(h, assistant('', ['y', 'x']), 'duplicate-tool-call-id');
    });

    it('a call id shadowed by a checkpoint may be used again', () => {
      appendAll(s, [user('u'), assistant('', ['x']), result('x'), user('v')]);
      s.append(condense(0, 2, [0, 1, 2]));
      appendAll(s, [assistant('', ['x']), result('x')]);
      expect(openAIMessageProblems(s.deriveMessages())).toEqual([]);
      expectMatchesReference(s);
    });

    it('pending calls block every other message until answered; log-only events may still come', async () => {
      appendAll(s, [system('s'), user('u'), assistant('', ['a', 'b']), result('b')]);
      for (const input of [user('x'), assistant('y'), assistant('', ['z']), system('late')]) {
        const e = await expectRejected(h, input, 'pending-tool-calls');
        expect(e.message).toContain('"a"');
      }
      appendAll(s, [header(), turnStart(0), stepStart(0, 0), stepEnd(0, 0), turnEnd(0)]);
      s.append(result('a'));
      s.append(user('x'));
      expect(s.surface.length).toBe(6);
    });
  });

  describe('replace', () => {
    /** system, then three user/assistant exchanges: seqs 0..6, positions equal seqs. */
    function conversation(): void {
      appendAll(s, [system('sys'), user('u1'), assistant('a1'), user('u2'), assistant('a2'), user('u3'), assistant('a3')]);
    }

    it('splices the span into one node, counts the generation, and remembers what it shadowed', () => {
      conversation();
      const changes: unknown[] = [];
      s.subscribe((_e, change) => changes.push(change));
      const cp = s.append(condense(1, 4, [1, 2, 3, 4]));
      expect(s.surface.slice(0)).toEqual([0, cp.seq, 5, 6]);
      expect(s.surface.replaceGeneration).toBe(1);
      expect(s.surface.shadowedBy(cp.seq)).toEqual([1, 2, 3, 4]);
      expect([1, 2, 3, 4].map((q) => s.surface.has(q))).toEqual([false, false, false, false]);
      expect(s.surface.positionOf(5)).toBe(2);
      expect(changes).toEqual([{ kind: 'replace', position: 1, seq: cp.seq, shadowed: [1, 2, 3, 4], generation: 1 }]);
      expect(s.length).toBe(8); // shadowed events stay in the log
      expectMatchesReference(s);
    });

    it('orders a span by surface position, not seq: a checkpoint has a high seq at an old position', async () => {
      conversation();
      const cp = s.append(condense(1, 2, [1, 2])); // seq 7 at position 1
      expect(s.surface.slice(0)).toEqual([0, 7, 3, 4, 5, 6]);
      // start (3) is numerically below end (7) but comes after it on the surface.
      const e = await expectRejected(h, condense(3, cp.seq, [3, cp.seq]), 'replace-order');
      expect(e.message).toContain('surface order');
      // start 7 > end 4 numerically, but 7 is at position 1 and 4 at position 3: a valid span.
      const cp2 = s.append(condense(cp.seq, 4, [cp.seq, 3, 4]));
      expect(s.surface.slice(0)).toEqual([0, cp2.seq, 5, 6]);
      expect(s.surface.shadowedBy(cp2.seq)).toEqual([7, 3, 4]);
      expectMatchesReference(s);
    });

    it('names only current surface nodes: not log-only events, not shadowed nodes, not the future', async () => {
      appendAll(s, [system('sys'), user('u1'), header(), assistant('a1')]);
      await expectRejected(h, condense(2, 3, [2, 3]), 'replace-not-on-surface');
      await expectRejected(h, condense(1, 9, [1, 3]), 'replace-not-on-surface');
      s.append(condense(1, 3, [1, 3]));
      await expectRejected(h, condense(1, 1, [1]), 'replace-not-on-surface');
    });

    it('sourceEventSeqs must cover every shadowed node, the checkpoint included', async () => {
      conversation();
      const e = await expectRejected(h, condense(1, 4, [1, 2, 4]), 'replace-provenance');
      expect(e.message).toContain('3');
      await expectRejected(h, { ...condense(1, 2, [1, 2]), sourceEventSeqs: undefined }, 'replace-provenance');
      const cp = s.append(condense(1, 2, [1, 2]));
      // Naming what the old checkpoint shadowed does not cover the checkpoint itself.
      await expectRejected(h, condense(cp.seq, 4, [1, 2, 3, 4]), 'replace-provenance');
      s.append(condense(cp.seq, 4, [cp.seq, 3, 4]));
    });

    it('never shadows the system prompt at node 0', async () => {
      conversation();
      await expectRejected(h, condense(0, 2, [0, 1, 2]), 'system-node-shadowed');
      await expectRejected(h, replace(user('not a prompt'), 0, 0, [0]), 'system-node-shadowed');
      await expectRejected(h, replace(system('prompt over more'), 0, 1, [0, 1]), 'system-node-shadowed');
    });

    it('a system/message replacing exactly node 0 is a prompt update', () => {
      conversation();
      const cutsBefore = s.balancedCuts();
      const upd = s.append(replace(system('sys v2'), 0, 0, [0]));
      expect(s.surface.slice(0)).toEqual([upd.seq, 1, 2, 3, 4, 5, 6]);
      expect(s.deriveMessages()[0]).toEqual({ role: 'system', content: 'sys v2' });
      expect(s.surface.replaceGeneration).toBe(1);
      expect(s.balancedCuts()).toEqual(cutsBefore);
      expectMatchesReference(s);
    });

    it('without a system prompt node 0 is an ordinary node', () => {
      appendAll(s, [user('u1'), assistant('a1'), user('u2')]);
      const cp = s.append(condense(0, 1, [0, 1]));
      expect(s.surface.slice(0)).toEqual([cp.seq, 2]);
      expectMatchesReference(s);
    });

    it('refuses a span that would split a tool call from its result, on either side', async () => {
      appendAll(s, [system('sys'), user('u1'), assistant('', ['a', 'b']), result('a'), result('b'), user('u2')]);
      // seqs: 2 = calls, 3 = result a, 4 = result b
      const before = await expectRejected(h, condense(4, 5, [4, 5]), 'replace-unbalanced');
      expect(before.message).toContain('before start');
      const after = await expectRejected(h, condense(1, 3, [1, 2, 3]), 'replace-unbalanced');
      expect(after.message).toContain('after end');
      await expectRejected(h, condense(1, 2, [1, 2]), 'replace-unbalanced');
      await expectRejected(h, replace(user('not a result'), 3, 3, [3]), 'replace-unbalanced');
      s.append(condense(1, 4, [1, 2, 3, 4]));
      expect(openAIMessageProblems(s.deriveMessages())).toEqual([]);
      expectMatchesReference(s);
    });

    it('a replacement assistant/message may not carry tool calls; one without calls is fine', async () => {
      conversation();
      await expectRejected(h, replace(assistant('', ['new']), 1, 2, [1, 2]), 'replace-adds-tool-calls');
      s.append(replace(assistant('merged'), 1, 2, [1, 2]));
      expect(s.deriveMessages()[1]).toEqual({ role: 'assistant', content: 'merged' });
    });

    it('may replace a balanced span before calls that are still pending', () => {
      appendAll(s, [system('sys'), user('u1'), assistant('a1'), user('u2'), assistant('', ['p'])]);
      s.append(condense(1, 2, [1, 2]));
      expect(s.surface.pendingCalls()).toEqual(['p']);
      expectMatchesReference(s);
      s.append(result('p'));
      expect(openAIMessageProblems(s.deriveMessages())).toEqual([]);
    });
  });

  describe('tool/result replacement', () => {
    beforeEach(() => {
      appendAll(s, [
        system('sys'),
        user('u'),
        assistant('', ['a', 'b']),
        result('a', 'A'.repeat(50), { toolName: 'read' }),
        result('b', 'B', { isError: true }),
      ]);
      // seqs: 3 = result a (toolName read), 4 = result b (isError)
    });

    it('rewrites the content of exactly one result in place', () => {
      const cuts = s.balancedCuts();
      const r = s.append(replace(result('a', 'AAA…A', { toolName: 'read' }), 3, 3, [3]));
      expect(s.surface.slice(0)).toEqual([0, 1, 2, r.seq, 4]);
      expect(s.deriveMessages()[3]).toEqual({ role: 'tool', tool_call_id: 'a', content: 'AAA…A' });
      expect(s.balancedCuts()).toEqual(cuts);
      expect(s.surface.replaceGeneration).toBe(1);
      // and again: a pruned result can be pruned further
      s.append(replace(result('a', '…', { toolName: 'read' }), r.seq, r.seq, [r.seq, 3]));
      expectMatchesReference(s);
    });

    it('works while other calls of the batch are still pending', () => {
      appendAll(s, [user('v'), assistant('', ['c', 'd']), result('d', 'D'.repeat(30))]);
      s.append(replace(result('d', 'D…'), 7, 7, [7]));
      expect(s.surface.pendingCalls()).toEqual(['c']);
      expectMatchesReference(s);
    });

    it('must shadow exactly one tool/result node', async () => {
      const e = await expectRejected(h, replace(result('a', 'x', { toolName: 'read' }), 3, 4, [3, 4]), 'tool-result-replacement');
      expect(e.message).toContain('exactly one');
      await expectRejected(h, replace(result('a', 'x', { toolName: 'read' }), 1, 1, [1]), 'tool-result-replacement');
    });

    it('may change content only: callId, toolName and isError must match', async () => {
      await expectRejected(h, replace(result('b', 'x', { toolName: 'read' }), 3, 3, [3]), 'tool-result-replacement');
      await expectRejected(h, replace(result('a', 'x'), 3, 3, [3]), 'tool-result-replacement');
      await expectRejected(h, replace(result('a', 'x', { toolName: 'write' }), 3, 3, [3]), 'tool-result-replacement');
      await expectRejected(h, replace(result('a', 'x', { toolName: 'read', isError: true }), 3, 3, [3]), 'tool-result-replacement');
      await expectRejected(h, replace(result('b', 'x'), 4, 4, [4]), 'tool-result-replacement'); // isError dropped
      s.append(replace(result('b', 'x', { isError: true }), 4, 4, [4]));
    });
  });

  describe('assistant argument prune (docs/spec.md#15-pruning-what-the-agent-wrote)', () => {
    const big = 'x'.repeat(400);
    const write = (id: string, content: string) => ({
      type: 'tool-call' as const,
      id,
      name: 'write',
      arguments: JSON.stringify({ path: 'a.ts', content, opts: { mode: 420, lines: [content, 'tail'] } }),
    });
    const usage = { promptTokens: 100, completionTokens: 40 };
    let call: SessionEvent<'assistant/message'>;
    beforeEach(() => {
      appendAll(s, [system('sys'), user('u')]);
      call = s.append({
        type: 'assistant/message',
        data: {
          content: [{ type: 'reasoning', text: 'plan' }, { type: 'text', text: 'writing two files' }, write('w1', big), write('w2', big)],
          provider: 'p',
          model: 'm',
          usage,
          finishReason: 'tool_calls',
        },
        surfaceOp: 'append',
      });
      // seq 2 = the assistant message with calls w1, w2
    });
    const pruned = (over: Partial<Record<'w1' | 'w2', string>> = {}): Record<string, string> => {
      const short = JSON.stringify({ path: 'a.ts', content: 'xx…xx', opts: { mode: 420, lines: ['x…', 'tail'] } });
      return { w1: over.w1 ?? short, w2: over.w2 ?? short };
    };

    it('rewrites the arguments of exactly one message in place: pairing, balance, latest reply and usage unchanged', async () => {
      appendAll(s, [result('w2'), result('w1'), assistant('done', [], { promptTokens: 300, completionTokens: 5 })]);
      const cuts = s.balancedCuts();
      const reply = s.latestReply?.seq;
      const prune = s.append({
        type: 'compaction/prune',
        data: { targetSeq: 2, callId: 'w1', tokensBefore: 250, tokensAfter: 40, charsBefore: 900, charsAfter: 80 },
      });
      const r = s.append(withPrunedArguments(call, pruned(), prune.seq));
      expect(r.sourceEventSeqs).toEqual([2, prune.seq]);
      expect(s.surface.slice(0)).toEqual([0, 1, r.seq, 3, 4, 5]);
      expect(s.balancedCuts()).toEqual(cuts);
      expect(s.surface.replaceGeneration).toBe(1);
      expect(s.latestReply?.seq).toBe(reply);
      expect(s.latestUsage?.seq).toBe(reply);
      const m = s.deriveMessages()[2] as { content: string; tool_calls: Array<{ id: string; function: { arguments: string } }> };
      expect(m.content).toBe('writing two files');
      expect(m.tool_calls.map((c) => c.id)).toEqual(['w1', 'w2']);
      expect(m.tool_calls[0]!.function.arguments).toBe(pruned().w1);
      expect(openAIMessageProblems(s.deriveMessages())).toEqual([]);
      expectMatchesReference(s);
      // Pruned again (further), then the call ids are still taken.
      s.append(withPrunedArguments(r, { w2: JSON.stringify({ path: 'a.ts', content: '', opts: { mode: 420, lines: ['', ''] } }) }));
      await expectRejected(h, assistant('', ['w1']), 'duplicate-tool-call-id');
      const before = { seqs: s.surface.slice(0), messages: s.deriveMessages(), cuts: s.balancedCuts(), reply: s.latestReply?.seq };
      const reopened = await h.reopen();
      expect({ seqs: reopened.surface.slice(0), messages: reopened.deriveMessages(), cuts: reopened.balancedCuts(), reply: reopened.latestReply?.seq }).toEqual(
        before,
      );
    });

    it('works while its calls wait for results, which still pair with the pruned message', () => {
      s.append(result('w1'));
      const r = s.append(withPrunedArguments(call, new Map([['w2', pruned().w2!]])));
      expect(s.surface.pendingCalls()).toEqual(['w2']);
      expectMatchesReference(s);
      s.append(result('w2'));
      expect(s.surface.pendingCalls()).toEqual([]);
      expect(s.surface.slice(0)).toEqual([0, 1, r.seq, 3, 5]);
      expect(openAIMessageProblems(s.deriveMessages())).toEqual([]);
      expectMatchesReference(s);
    });

    it('rejects anything but shortened string values of the same calls, with the session unchanged', async () => {
      appendAll(s, [result('w1'), result('w2')]);
      const rule = 'argument-prune-replacement';
      const edit = (f: (d: AppendInput<'assistant/message'>['data']) => void) => {
        const input = withPrunedArguments(call, pruned());
        f(input.data);
        return input;
      };
      const args = (obj: unknown) => JSON.stringify(obj);
      const cases: Array<[string, AppendInput]> = [
        ['call id changed', edit((d) => void ((d.content[2] as { id: string }).id = 'w9'))],
        ['call name changed', edit((d) => void ((d.content[2] as { name: string }).name = 'read'))],
        ['calls reordered', edit((d) => void d.content.splice(2, 2, d.content[3]!, d.content[2]!))],
        ['a call dropped', edit((d) => void d.content.pop())],
        ['a block added', edit((d) => void d.content.push({ type: 'text', text: 'more' }))],
        ['text changed', edit((d) => void ((d.content[1] as { text: string }).text = 'writing'))],
        ['reasoning changed', edit((d) => void ((d.content[0] as { text: string }).text = ''))],
        ['block type changed', edit((d) => void (d.content[1] = { type: 'reasoning', text: 'writing two files' }))],
        ['model changed', edit((d) => void (d.model = 'm2'))],
        ['usage dropped', edit((d) => void delete d.usage)],
        ['usage changed', edit((d) => void (d.usage = { ...usage, completionTokens: 1 }))],
        ['finishReason changed', edit((d) => void (d.finishReason = 'stop'))],
        ['arguments not JSON', withPrunedArguments(call, pruned({ w1: '{"path": "a.ts", "content": "xx…' }))],
        ['a key dropped', withPrunedArguments(call, pruned({ w1: args({ path: 'a.ts', opts: { mode: 420, lines: ['', 'tail'] } }) }))],
        ['a key renamed', withPrunedArguments(call, pruned({ w1: args({ path: 'a.ts', body: '', opts: { mode: 420, lines: ['', 'tail'] } }) }))],
        ['keys reordered', withPrunedArguments(call, pruned({ w1: args({ content: '', path: 'a.ts', opts: { mode: 420, lines: ['', 'tail'] } }) }))],
        ['a nested key added', withPrunedArguments(call, pruned({ w1: args({ path: 'a.ts', content: '', opts: { mode: 420, lines: ['', 'tail'], x: 1 } }) }))],
        ['a number changed', withPrunedArguments(call, pruned({ w1: args({ path: 'a.ts', content: '', opts: { mode: 0, lines: ['', 'tail'] } }) }))],
        ['an array shortened', withPrunedArguments(call, pruned({ w1: args({ path: 'a.ts', content: '', opts: { mode: 420, lines: [''] } }) }))],
        ['a string grown', withPrunedArguments(call, pruned({ w1: args({ path: 'a.ts', content: '', opts: { mode: 420, lines: ['', 'tail!'] } }) }))],
        ['a string made a number', withPrunedArguments(call, pruned({ w1: args({ path: 'a.ts', content: 0, opts: { mode: 420, lines: ['', 'tail'] } }) }))],
        ['a string made null', withPrunedArguments(call, pruned({ w1: args({ path: null, content: '', opts: { mode: 420, lines: ['', 'tail'] } }) }))],
      ];
      for (const [why, input] of cases) {
        const e = await expectRejected(h, input, rule);
        expect(e.message, why).toContain('assistant/message 2');
      }
      // A replacement with calls is only ever a one-message argument prune.
      await expectRejected(h, replace(assistant('', ['w1', 'w2']), 2, 4, [2, 3, 4]), 'replace-adds-tool-calls');
      // A replacement without calls cannot stand for a message whose calls were answered.
      await expectRejected(h, replace(assistant('no calls'), 2, 2, [2]), 'argument-prune-replacement');
      // Whitespace-only reformatting of the JSON and an untouched call are fine.
      s.append(withPrunedArguments(call, { w1: JSON.stringify(JSON.parse(write('w1', big).arguments), null, 1) }));
      expectMatchesReference(s);
    });

    it('arguments that are not JSON may only stay byte-identical', async () => {
      s.append(result('w1'));
      s.append(result('w2'));
      const raw = s.append({
        type: 'assistant/message',
        data: { content: [{ type: 'tool-call', id: 'r', name: 'run', arguments: 'not json ' + big }] },
        surfaceOp: 'append',
      });
      s.append(result('r'));
      const e = await expectRejected(h, withPrunedArguments(raw, { r: 'not json' }), 'argument-prune-replacement');
      expect(e.message).toContain('not JSON');
      s.append(withPrunedArguments(raw, {}));
    });

    it('compaction/prune may name a call of a current assistant/message', async () => {
      appendAll(s, [result('w1'), result('w2')]);
      const prune = (targetSeq: number, callId: string): AppendInput => ({
        type: 'compaction/prune',
        data: { targetSeq, callId, tokensBefore: 10, tokensAfter: 2, charsBefore: 40, charsAfter: 8 },
      });
      await expectRejected(h, prune(2, 'w3'), 'prune-target');
      await expectRejected(h, prune(1, 'w1'), 'prune-target');
      s.append(prune(2, 'w2'));
      const r = s.append(withPrunedArguments(call, pruned(), s.length - 1));
      await expectRejected(h, prune(2, 'w1'), 'prune-target'); // shadowed now
      s.append(prune(r.seq, 'w1'));
    });
  });

  describe('argumentPruneProblem', () => {
    it('is undefined for a prune and names the first difference otherwise', () => {
      const before = { content: [{ type: 'tool-call' as const, id: 'a', name: 'w', arguments: '{"s":"long text","n":[1,"abc"]}' }] };
      const after = (args: string) => ({ content: [{ ...before.content[0]!, arguments: args }] });
      expect(argumentPruneProblem(before, before)).toBeUndefined();
      expect(argumentPruneProblem(before, after('{"s":"l…t","n":[1,"ab"]}'))).toBeUndefined();
      expect(argumentPruneProblem(before, after('{"s":"l…t","n":[2,"ab"]}'))).toContain('arguments.n[0]');
      expect(argumentPruneProblem(before, after('{"s":"l…t","n":[1,"abcd"]}'))).toContain('arguments.n[1] grew');
      expect(argumentPruneProblem(before, after('{"s":"l…t"}'))).toContain('keys');
      expect(argumentPruneProblem(before, after('["l…t"]'))).toContain('arguments was an object');
      // Nesting deeper than any stack is compared like the rest (the text is scanned, not recursed).
      const deep = (n: number, leaf: string) => '['.repeat(n) + leaf + ']'.repeat(n);
      const nested = { content: [{ ...before.content[0]!, arguments: deep(200_000, '"long text", 7') }] };
      const deepAfter = (leaf: string) => ({ content: [{ ...nested.content[0]!, arguments: deep(200_000, leaf) }] });
      expect(argumentPruneProblem(nested, deepAfter('"short", 7'))).toBeUndefined();
      expect(argumentPruneProblem(nested, deepAfter('"short", 8'))).toMatch(/arguments\[0\].*levels.*\[0\]\[1\] changed from 7/);
    });

    it('compares every token but string values byte-for-byte: numbers as written, keys, __proto__', () => {
      const call = (args: string) => ({ content: [{ type: 'tool-call' as const, id: 'a', name: 'w', arguments: args }] });
      const problem = (before: string, after: string) => argumentPruneProblem(call(before), call(after));
      // What a parse and re-serialise would do: each is a value changed, not a string shortened.
      expect(problem('{"id":9007199254740993,"s":"long"}', '{"id":9007199254740992,"s":"l"}')).toContain('arguments.id changed from 9007199254740993');
      expect(problem('{"price":1.50,"s":"long"}', '{"price":1.5,"s":"l"}')).toContain('arguments.price changed from 1.50');
      expect(problem('{"n":1e3,"s":"long"}', '{"n":1000,"s":"l"}')).toContain('arguments.n changed from 1e3');
      expect(problem('{"__proto__":{"x":"long"},"s":"long"}', '{"s":"l"}')).toContain('"__proto__"');
      expect(problem('{"a":"long"}', '{"\\u0061":"l"}')).toContain('had key "a"'); // same key decoded, not as written
      // Kept as written, with the strings shortened: a prune (whitespace between tokens aside).
      expect(
        problem(
          '{"id":9007199254740993,"price":1.50,"n":1e3,"__proto__":{"x":"long"}}',
          '{ "id": 9007199254740993, "price": 1.50, "n": 1e3, "__proto__": {"x": "l"} }',
        ),
      ).toBeUndefined();
    });
  });
});

describe('balance', () => {
  it('balancedBefore / balancedAfter by seq, and balancedCuts by position', () => {
    const s = Session.inMemory();
    appendAll(s, [system('sys'), user('u'), assistant('', ['a', 'b']), result('b'), result('a'), assistant('done'), header()]);
    // positions 0..5 hold seqs 0..5
    expect(s.balancedCuts()).toEqual([0, 1, 2, 5, 6]);
    expect(s.balancedBefore(2)).toBe(true);
    expect(s.balancedAfter(2)).toBe(false);
    expect(s.balancedBefore(4)).toBe(false); // between the two results of one batch
    expect(s.balancedAfter(3)).toBe(false);
    expect(s.balancedAfter(4)).toBe(true);
    expect(s.balancedAfter(5)).toBe(true);
    expect(s.surface.balancedAt(0)).toBe(true);
    expect(s.surface.balancedAt(99)).toBe(false);
    expectRule(() => s.balancedBefore(6), 'not-on-surface'); // a request/header
    expectRule(() => s.balancedAfter(42), 'not-on-surface');
    expectMatchesReference(s);
  });

  it('an empty surface has the single balanced cut 0', () => {
    const s = Session.inMemory();
    expect(s.balancedCuts()).toEqual([0]);
    s.append(turnStart(0));
    expect(s.balancedCuts()).toEqual([0]);
  });

  it('a parallel batch is one unit: no balanced cut between its results, whatever their order', () => {
    const s = Session.inMemory();
    s.append(user('u'));
    s.append(assistant('', ['c1', 'c2', 'c3', 'c4']));
    for (const id of ['c3', 'c1', 'c4']) {
      s.append(result(id));
      expect(s.balancedCuts()).toEqual([0, 1]);
    }
    s.append(result('c2'));
    expect(s.balancedCuts()).toEqual([0, 1, 6]);
    expectMatchesReference(s);
  });

  it('after replaces the incremental cuts equal a from-scratch fold', () => {
    const s = Session.inMemory();
    appendAll(s, [system('sys'), user('u1'), assistant('', ['a']), result('a'), assistant('', ['b', 'c']), result('c'), result('b')]);
    appendAll(s, [user('u2'), assistant('', ['d']), result('d'), user('u3'), assistant('', ['e', 'f']), result('e')]);
    expectMatchesReference(s);
    s.append(replace(result('c', 'pruned'), 5, 5, [5]));
    expectMatchesReference(s);
    // the pruned result (seq 13) stands where seq 5 was: provenance names it, not 5
    expectRule(() => s.append(condense(1, 6, [1, 2, 3, 4, 5, 6])), 'replace-provenance');
    const cp = s.append(condense(1, 6, [1, 2, 3, 4, 13, 6]));
    expectMatchesReference(s);
    s.append(condense(cp.seq, 9, [cp.seq, 7, 8, 9]));
    expectMatchesReference(s);
    s.append(result('f'));
    expectMatchesReference(s);
    expect(openAIMessageProblems(s.deriveMessages())).toEqual([]);
  });

  it('log-only growth reads no event, for balance or for messages', () => {
    const s = Session.inMemory();
    appendAll(s, [system('sys'), user('u'), assistant('', ['a']), result('a')]);
    const messages = s.deriveMessages();
    s.balancedCuts();
    const reads = vi.spyOn(s, 'event');
    for (let t = 0; t < 20; t++) appendAll(s, [turnStart(t), stepStart(t, 0), header(), stepEnd(t, 0), turnEnd(t)]);
    expect(s.deriveMessages()).toBe(messages);
    expect(s.balancedCuts()).toEqual([0, 1, 2, 4]);
    expect(s.balancedAfter(3)).toBe(true);
    expect(reads).not.toHaveBeenCalled();
    // A surface append reads exactly the new node when messages are derived.
    s.append(user('more'));
    expect(reads).not.toHaveBeenCalled();
    s.deriveMessages();
    expect(reads).toHaveBeenCalledTimes(1);
    expect(reads).toHaveBeenCalledWith(s.length - 1);
  });
});

describe('deriveMessages', () => {
  it('gives exact OpenAI chat-completions params for each kind of node', () => {
    const s = Session.inMemory();
    appendAll(s, [
      system('You are terse.'),
      user('plain text'),
      {
        type: 'user/message',
        data: {
          content: [
            { type: 'text', text: 'line 1' },
            { type: 'text', text: 'line 2' },
          ],
        },
        surfaceOp: 'append',
      },
      userParts([
        { type: 'text', text: 'look' },
        { type: 'image', url: 'data:image/png;base64,AAAA' },
        { type: 'image', url: 'https://example.com/a.png', detail: 'low' },
      ]),
      {
        type: 'assistant/message',
        data: {
          content: [
            { type: 'reasoning', text: 'secret thoughts' },
            { type: 'tool-call', id: 'c1', name: 'read', arguments: '{"path":"a"}' },
            { type: 'tool-call', id: 'c2', name: 'ls', arguments: '{}' },
          ],
        },
        surfaceOp: 'append',
      },
      { type: 'tool/result', data: { callId: 'c2', toolName: 'ls', content: [{ type: 'text', text: 'a\nb' }] }, surfaceOp: 'append' },
      {
        type: 'tool/result',
        data: {
          callId: 'c1',
          content: [
            { type: 'text', text: 'x' },
            { type: 'image', url: 'data:image/png;base64,BB' },
          ],
          isError: true,
        },
        surfaceOp: 'append',
      },
      {
        type: 'assistant/message',
        data: {
          content: [
            { type: 'text', text: 'calling' },
            { type: 'tool-call', id: 'c3', name: 'run', arguments: '{"cmd":"ls"}' },
          ],
        },
        surfaceOp: 'append',
      },
      result('c3', ''),
      { type: 'assistant/message', data: { content: [{ type: 'reasoning', text: 'only thinking' }] }, surfaceOp: 'append' },
      {
        type: 'assistant/message',
        data: {
          content: [
            { type: 'text', text: 'done' },
            { type: 'text', text: 'really' },
          ],
        },
        surfaceOp: 'append',
      },
    ] as AppendInput[]);
    expect(s.deriveMessages()).toEqual([
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'plain text' },
      { role: 'user', content: 'line 1\n\nline 2' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
          { type: 'image_url', image_url: { url: 'https://example.com/a.png', detail: 'low' } },
        ],
      },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'read', arguments: '{"path":"a"}' } },
          { id: 'c2', type: 'function', function: { name: 'ls', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'c2', content: 'a\nb' },
      { role: 'tool', tool_call_id: 'c1', content: 'x\n\n[image omitted: tool messages carry text only]' },
      { role: 'assistant', content: 'calling', tool_calls: [{ id: 'c3', type: 'function', function: { name: 'run', arguments: '{"cmd":"ls"}' } }] },
      { role: 'tool', tool_call_id: 'c3', content: '' },
      { role: 'assistant', content: '' },
      { role: 'assistant', content: 'done\n\nreally' },
    ]);
    expect(JSON.stringify(s.deriveMessages())).not.toContain('thinking');
    expect(JSON.stringify(s.deriveMessages())).not.toContain('secret');
    expect(openAIMessageProblems(s.deriveMessages())).toEqual([]);
    expect(s.messageAt(4)).toBe(s.deriveMessages()[4]);
    expect(() => s.messageAt(11)).toThrow(RangeError);
  });

  it('reuses the cached array while nothing changed; an append gives a new read-only array', () => {
    const s = Session.inMemory();
    appendAll(s, [system('s'), user('u')]);
    const first = s.deriveMessages();
    expectReadOnly(first);
    expect(s.deriveMessages()).toBe(first);
    s.append(header());
    expect(s.deriveMessages()).toBe(first);
    s.append(assistant('a'));
    const second = s.deriveMessages();
    expect(second).not.toBe(first);
    expectReadOnly(second);
    expect(first).toHaveLength(2); // an earlier array is a stable snapshot
    expect([...first].map((m) => m.role)).toEqual(['system', 'user']);
    expect(first[2]).toBeUndefined();
    expect(second).toHaveLength(3);
    expect(second[0]).toBe(first[0]); // nodes are converted once
    expect(s.deriveMessages()).toBe(second);
    expect(Array.isArray(second)).toBe(true);
    expect(JSON.parse(JSON.stringify(second))).toEqual([...second]);
    expect(Object.keys(first)).toEqual(['0', '1']);
  });

  it('deriveMessages after an append converts and copies only what was appended, at any size', () => {
    // Work counted, not timed: events read (conversions) and whole-array copies or freezes.
    const work = (nodes: number) => {
      const s = Session.inMemory();
      appendAll(s, [system('s')]);
      for (let i = 1; i < nodes; i++) s.append(user(`u${i}`));
      s.deriveMessages();
      s.append(user('new'));
      const reads = vi.spyOn(s, 'event');
      const slice = vi.spyOn(Array.prototype, 'slice');
      const freeze = vi.spyOn(Object, 'freeze');
      try {
        const messages = s.deriveMessages();
        const big = (calls: unknown[][], self: (i: number) => unknown) =>
          calls.filter((_, i) => Array.isArray(self(i)) && (self(i) as unknown[]).length > 100).length;
        expect(messages).toHaveLength(nodes + 1);
        return {
          reads: reads.mock.calls.length,
          bigCopies: big(slice.mock.calls, (i) => slice.mock.contexts[i]) + big(freeze.mock.calls, (i) => freeze.mock.calls[i]![0]),
        };
      } finally {
        reads.mockRestore();
        slice.mockRestore();
        freeze.mockRestore();
      }
    };
    const small = work(1_000);
    const large = work(50_000);
    expect(small).toEqual({ reads: 1, bigCopies: 0 });
    expect(large).toEqual(small);
  });

  it('a replace gives a new array; a message cannot be edited to corrupt the cache', () => {
    const s = Session.inMemory();
    appendAll(s, [system('s'), user('u1'), assistant('a1'), user('u2')]);
    const before = s.deriveMessages();
    const shown = JSON.stringify(before);
    expect(() => {
      (before[1] as { content: string }).content = 'edited';
    }).toThrow(TypeError);
    s.append(condense(1, 2, [1, 2], 'S'));
    const after = s.deriveMessages();
    expect(after).not.toBe(before);
    expect(after.map((m) => m.role)).toEqual(['system', 'user', 'user']);
    expect(after[1]).toEqual({ role: 'user', content: '<condensed>\nS\n</condensed>' });
    expect(before).toHaveLength(4);
    expect(JSON.stringify(before)).toBe(shown); // the replace did not reach the earlier snapshot
    s.append(user('u3'));
    expect(JSON.stringify(before)).toBe(shown);
    expect(s.deriveMessages()).toHaveLength(4);
  });
});

describe('replay rebuilds the same surface', () => {
  it('events folded from scratch give the live projection', async () => {
    const h = await openHarness('memory');
    const s = h.session;
    appendAll(s, [system('sys'), user('u1'), assistant('', ['a', 'b']), result('b'), result('a'), user('u2'), assistant('a2')]);
    s.append(replace(result('a', 'pruned'), 4, 4, [4]));
    s.append(condense(1, 7, [1, 2, 3, 7, 5, 6]));
    const live = { seqs: s.surface.slice(0), messages: s.deriveMessages(), cuts: s.balancedCuts() };
    const r = await h.reopen();
    expect({ seqs: r.surface.slice(0), messages: r.deriveMessages(), cuts: r.balancedCuts() }).toEqual(live);
    expectMatchesReference(r);
    await h.dispose();
  });

  it('events are SessionEvent values: the type guard of the log', () => {
    const s = Session.inMemory();
    const e: SessionEvent = s.append(user('x'));
    expect(e.type).toBe('user/message');
  });
});
