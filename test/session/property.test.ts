/**
 * Property tests: random valid histories (turns, steps, user and assistant messages with
 * 0..3 parallel calls, results in random order, prunes, checkpoints of random balanced spans,
 * prompt updates, log-only events) driven by fast-check choices. After every operation the
 * incremental projection must equal a from-scratch fold, the derived messages must pair
 * calls and results as a provider demands, and a reopen from a JsonlStore must give back
 * the same session.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { JsonlStore, Session, SessionRuleError, toolCallsOf, withPrunedArguments, type AppendInput, type SessionEvent } from '../../src/session/index';
import { toChatMessage } from '../../src/session/derive';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { referenceCuts, referencePending, referenceSurface } from '../helpers/reference';
import { assistant, checkpoint, condense, durableSnapshot, header, removeTempDirs, replace, result, snapshot, system, tempDir, user } from '../helpers/session';

afterAll(removeTempDirs);

/** One fast-check choice: `k` picks the action among those valid now, the rest parameterise it. */
const choice = fc.record({ k: fc.nat(999), a: fc.nat(999), b: fc.nat(999), calls: fc.nat(3), reopen: fc.nat(9) });
type Choice = { k: number; a: number; b: number; calls: number; reopen: number };

function checkInvariants(s: Session): void {
  const seqs = s.surface.slice(0);
  const at = (q: number): SessionEvent => s.event(q);
  expect(seqs).toEqual(referenceSurface(s.events()));
  expect(s.balancedCuts()).toEqual(referenceCuts(seqs, at));
  const pending = referencePending(seqs, at);
  expect(s.surface.pendingCalls()).toEqual(pending);
  const messages = s.deriveMessages();
  expect(messages).toEqual(seqs.map((q) => toChatMessage(at(q) as never)));
  const problems = openAIMessageProblems(messages);
  if (pending.length === 0) expect(problems).toEqual([]);
  else expect(problems).toEqual([expect.stringContaining('ends with unanswered tool calls')]);
}

class Driver {
  private nextCall = 0;
  private nextText = 0;
  constructor(public s: Session) {}

  private hasSystemHead(): boolean {
    return this.s.surface.length > 0 && this.s.event(this.s.surface.seqAt(0)).type === 'system/message';
  }

  /** The actions valid in the current state, each a function that performs it. */
  private actions(c: Choice): Array<[string, () => void]> {
    const s = this.s;
    const out: Array<[string, () => void]> = [];
    const pending = s.surface.pendingCalls();
    const turn = s.openTurn;
    const step = s.openStep;
    if (turn === null) out.push(['turn/start', () => void s.append({ type: 'turn/start', data: { turn: s.lastTurn + 1 + (c.a % 2) } })]);
    if (turn !== null && step === null) {
      out.push(['turn/end', () => void s.append({ type: 'turn/end', data: { turn } })]);
      out.push(['step/start', () => void s.append({ type: 'step/start', data: { turn, step: s.lastStep + 1 } })]);
    }
    if (step !== null) out.push(['step/end', () => void s.append({ type: 'step/end', data: step })]);
    out.push(['request/header', () => void s.append(header(`m${c.a % 3}`))]);
    if (s.surface.length === 0) out.push(['system', () => void s.append(system('system prompt'))]);
    if (pending.length === 0) {
      out.push(['user', () => void s.append(user(`user ${this.nextText++}`))]);
      out.push([
        'assistant',
        () => {
          const ids = Array.from({ length: c.calls }, () => `call_${this.nextCall++}`);
          const usage = c.b % 2 === 0 ? { promptTokens: c.a, completionTokens: c.b } : undefined;
          s.append(assistant(c.a % 3 === 0 ? '' : `assistant ${this.nextText++}`, ids, usage));
        },
      ]);
    } else {
      // results of a batch arrive in random order
      out.push(['result', () => void s.append(result(pending[c.a % pending.length]!, `output ${this.nextText++}`.repeat(1 + (c.b % 4))))]);
    }
    const results = s.surface.slice(0).filter((q) => s.event(q).type === 'tool/result');
    if (results.length > 0) {
      out.push([
        'prune',
        () => {
          const target = s.event(results[c.a % results.length]!) as SessionEvent<'tool/result'>;
          s.append({
            type: 'compaction/prune',
            data: { targetSeq: target.seq, callId: target.data.callId, tokensBefore: 10, tokensAfter: 2, charsBefore: 40, charsAfter: 8 },
          });
          const { callId, toolName, isError } = target.data;
          s.append(
            replace(
              result(callId, `pruned ${this.nextText++}`, { ...(toolName ? { toolName } : {}), ...(isError ? { isError } : {}) }),
              target.seq,
              target.seq,
              [target.seq, s.length - 1],
            ),
          );
        },
      ]);
    }
    const callers = s.surface.slice(0).filter((q) => s.event(q).type === 'assistant/message' && toolCallsOf(s.event(q)).length > 0);
    if (callers.length > 0) {
      out.push([
        'argument prune',
        () => {
          const target = s.event(callers[c.a % callers.length]!) as SessionEvent<'assistant/message'>;
          const call = toolCallsOf(target)[c.b % toolCallsOf(target).length]!;
          s.append({
            type: 'compaction/prune',
            data: { targetSeq: target.seq, callId: call.id, tokensBefore: 10, tokensAfter: 2, charsBefore: 40, charsAfter: 8 },
          });
          s.append(withPrunedArguments(target, { [call.id]: JSON.stringify({ id: '' }) }, s.length - 1));
        },
      ]);
    }
    const head = this.hasSystemHead() ? 1 : 0;
    const cuts = s.balancedCuts().filter((p) => p >= head);
    if (cuts.length >= 2) {
      out.push([
        'checkpoint',
        () => {
          const i = c.a % (cuts.length - 1);
          const j = i + 1 + (c.b % (cuts.length - 1 - i));
          const span = s.surface.slice(cuts[i]!, cuts[j]);
          const startSeq = span[0]!;
          const endSeq = span[span.length - 1]!;
          if (c.calls % 2 === 0 && !s.lock.held) {
            const start = s.append({ type: 'compaction/start', data: { turn: s.openTurn, trigger: 'pressure' } });
            const summary = s.append({
              type: 'compaction/summary',
              data: { summary: 'S', range: { start: startSeq, end: endSeq }, shadowedSeqs: span, shadowedTokens: span.length },
            });
            s.append(checkpoint(startSeq, endSeq, [start.seq, summary.seq, ...span], `summary ${this.nextText++}`));
            s.append({ type: 'compaction/end', data: { turn: s.lock.held ? (s.lock as { turn: number | null }).turn : null } });
          } else {
            s.append(condense(startSeq, endSeq, span, `summary ${this.nextText++}`));
          }
        },
      ]);
    }
    if (head === 1) {
      out.push([
        'prompt update',
        () => {
          const q = s.surface.seqAt(0);
          s.append(replace(system(`system prompt v${this.nextText++}`), q, q, [q]));
        },
      ]);
    }
    if (!s.lock.held) {
      out.push([
        'orphaned compaction',
        () => {
          s.append({ type: 'compaction/start', data: { turn: s.openTurn, trigger: 'overflow' } });
          s.append({ type: 'session/end-seed', data: { reason: 'stopped' } });
        },
      ]);
    }
    return out;
  }

  step(c: Choice): string {
    const actions = this.actions(c);
    const [name, run] = actions[c.k % actions.length]!;
    run();
    return name;
  }
}

describe('random valid histories', () => {
  it('keep every projection equal to a from-scratch fold, pair calls and results, and survive a JsonlStore reopen', async () => {
    const dir = tempDir();
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(choice, { minLength: 1, maxLength: 40 }), async (choices) => {
        const store = new JsonlStore(dir, { sync: false });
        const id = `p${run++}`;
        const d = new Driver(await Session.open(store, id));
        try {
          for (const [i, c] of choices.entries()) {
            d.step(c);
            checkInvariants(d.s);
            if (i % 5 === 4 || c.reopen === 0 || i === choices.length - 1) {
              const before = durableSnapshot(d.s);
              await d.s.close();
              d.s = await Session.open(store, id);
              expect(durableSnapshot(d.s)).toEqual(before);
              expect(d.s.loadReport).toEqual({});
            }
          }
        } finally {
          await d.s.close();
        }
      }),
      { numRuns: 100 },
    );
  });

  it('longer in-memory histories keep the same invariants', () => {
    fc.assert(
      fc.property(fc.array(choice, { minLength: 50, maxLength: 200 }), (choices) => {
        const d = new Driver(Session.inMemory());
        for (const c of choices) {
          d.step(c);
          checkInvariants(d.s);
        }
      }),
      { numRuns: 40 },
    );
  });

  it('arbitrary appends (any span, any call id, any sources) either keep every invariant or change nothing', () => {
    const attempt = fc.record({
      kind: fc.constantFrom('checkpoint', 'assistant-replace', 'result', 'result-replace', 'user', 'system-replace'),
      x: fc.nat(999),
      y: fc.nat(999),
      drop: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(fc.tuple(choice, attempt), { minLength: 5, maxLength: 60 }), (steps) => {
        const d = new Driver(Session.inMemory());
        for (const [c, t] of steps) {
          d.step(c);
          const s = d.s;
          const seqs = s.surface.slice(0);
          if (seqs.length === 0) continue;
          const start = seqs[t.x % seqs.length]!;
          const end = seqs[t.y % seqs.length]!;
          const from = Math.min(s.surface.positionOf(start)!, s.surface.positionOf(end)!);
          const to = Math.max(s.surface.positionOf(start)!, s.surface.positionOf(end)!);
          let sources = seqs.slice(from, to + 1);
          if (t.drop && sources.length > 0) sources = sources.slice(1);
          if (sources.length === 0) sources = [0];
          const callIds = [...s.surface.pendingCalls(), 'call_0', 'call_1', 'nope'];
          const callId = callIds[t.x % callIds.length]!;
          const inputs: Record<typeof t.kind, AppendInput> = {
            checkpoint: condense(start, end, sources),
            'assistant-replace': replace(assistant('merged', t.drop ? ['new_call'] : []), start, end, sources),
            result: result(callId),
            'result-replace': (() => {
              // Mostly the target's own fields (a valid prune); sometimes one field changed.
              const results = seqs.filter((q) => s.event(q).type === 'tool/result');
              if (results.length === 0 || t.y % 4 === 0) return replace(result(callId, 'shorter'), start, end, sources);
              const target = s.event(results[t.x % results.length]!) as SessionEvent<'tool/result'>;
              const { toolName, isError } = target.data;
              const last = t.drop ? end : target.seq; // sometimes a wider span, which must be refused
              return replace(result(target.data.callId, 'shorter', { ...(toolName ? { toolName } : {}), ...(isError ? { isError } : {}) }), target.seq, last, [
                ...new Set([target.seq, last]),
              ]);
            })(),
            user: user('u'),
            'system-replace': replace(system('s2'), start, end, sources),
          };
          const before = snapshot(s);
          try {
            s.append(inputs[t.kind]);
          } catch (err) {
            expect(err).toBeInstanceOf(SessionRuleError);
            expect(snapshot(s)).toEqual(before);
          }
          checkInvariants(s);
        }
      }),
      { numRuns: 150 },
    );
  });
});
