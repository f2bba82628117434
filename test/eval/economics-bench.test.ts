/**
 * The economics bench's yardsticks (bench/economics): the retention proxy must tell a policy
 * that forgets from one that does not, measured at every request, and each simulated peer's
 * summaries carry only the lists its design has.
 */
import { describe, expect, it } from 'vitest';
import { naive, PEERS } from '../../src/eval/peers';
import { Pricer } from '../../src/eval/pricing';
import { historyFacts, RetentionTracker } from '../../src/eval/retention';
import { partOf } from '../../src/eval/sessions';
import { simulate, type PeerPolicy } from '../../src/eval/simulate';
import { ExtractiveSummarizer } from '../../src/services/summarizing';
import { parseLedger } from '../../src/services/summarizing';
import type { ChatMessage } from '../../src/session/derive';
import type { AppendInput } from '../../src/session/events';
import { Session } from '../../src/session/session';

/** A coding session: each turn reads one file; every third read fails with its own error line. */
function syntheticSession(turns: number, filler = 600): Session {
  const s = Session.inMemory('synthetic');
  const add = (type: AppendInput['type'], data: unknown, surface = false) =>
    s.append({ type, data, ...(surface ? { surfaceOp: 'append' } : {}) } as AppendInput);
  for (let t = 0; t < turns; t++) {
    add('turn/start', { turn: t });
    add('user/message', { content: [{ type: 'text', text: `Task ${t}: look at module ${t}.` }] }, true);
    add('step/start', { turn: t, step: 0 });
    add('request/header', { provider: 'p', model: 'm', tools: [] });
    add(
      'assistant/message',
      { content: [{ type: 'tool-call', id: `c${t}`, name: 'read', arguments: JSON.stringify({ path: `src/mod${t}/index.ts` }) }] },
      true,
    );
    const failed = t % 3 === 0;
    const text = failed ? `Error: cannot parse module ${t} at line ${t + 1}` : `export const m${t} = ${t};\n${'// body\n'.repeat(filler / 3)}`;
    add('tool/result', { callId: `c${t}`, toolName: 'read', content: [{ type: 'text', text }], isError: failed }, true);
    add('step/end', { turn: t, step: 0 });
    add('step/start', { turn: t, step: 1 });
    add('request/header', { provider: 'p', model: 'm', tools: [] });
    add('assistant/message', { content: [{ type: 'text', text: `Read module ${t}.` }] }, true);
    add('step/end', { turn: t, step: 1 });
    add('turn/end', { turn: t });
  }
  return s;
}

const user = (text: string): ChatMessage => ({ role: 'user', content: text });

describe('the retention proxy', () => {
  it('dates each item by the first request whose history holds it', () => {
    const facts = historyFacts(syntheticSession(3).events());
    expect([...facts.paths]).toEqual(['src/mod0/index.ts', 'src/mod1/index.ts', 'src/mod2/index.ts']);
    expect([...facts.errors]).toEqual(['Error: cannot parse module 0 at line 1']);
    // Turn t's call is in reply 2t (0-based), so request 2t + 1 is the first to have it in its history.
    expect(facts.since.get('src/mod1/index.ts')).toBe(3);
    expect(facts.since.get('Error: cannot parse module 0 at line 1')).toBe(1);
  });

  it('is lower for a request sequence that drops an item than for one that keeps it', () => {
    const facts = {
      paths: new Set(['a/x.ts', 'b/y.ts']),
      errors: new Set(['Error: boom']),
      since: new Map([
        ['a/x.ts', 0],
        ['b/y.ts', 1],
        ['Error: boom', 2],
      ]),
    };
    const history = [user('read a/x.ts'), user('read b/y.ts'), user('Error: boom')];
    const keeps = new RetentionTracker(facts);
    const forgets = new RetentionTracker(facts);
    for (let k = 0; k < 4; k++) {
      keeps.observe(history.slice(0, Math.min(k + 1, 3)));
      // Request 2 lost the first message (a compaction without a file list); request 3 meets the path again.
      forgets.observe(k === 2 ? history.slice(1, 3) : history.slice(0, Math.min(k + 1, 3)));
    }
    const a = keeps.figures();
    const b = forgets.figures();
    expect(a.mean).toBe(1);
    expect(a.min).toBe(1);
    expect(b.min).toBeCloseTo(2 / 3);
    expect(b.minAt).toBe(2);
    expect(b.mean).toBeCloseTo((1 + 1 + 2 / 3 + 1) / 4);
    // The last request shows everything again: a look at it alone would not see the lapse.
    expect(b.last.all).toBe(1);
  });

  it('counts only items the history held before the request', () => {
    const facts = {
      paths: new Set(['a/x.ts', 'later/z.ts']),
      errors: new Set<string>(),
      since: new Map([
        ['a/x.ts', 0],
        ['later/z.ts', 5],
      ]),
    };
    const t = new RetentionTracker(facts);
    t.observe([user('a/x.ts')]);
    expect(t.figures()).toMatchObject({ mean: 1, min: 1, requests: 1, last: { paths: 1, all: 1 } });
  });

  it('finds a path written JSON-escaped in tool-call arguments', () => {
    const path = 'C:\\src\\a.ts';
    const t = new RetentionTracker({ paths: new Set([path]), errors: new Set(), since: new Map([[path, 0]]) });
    t.observe([
      { role: 'assistant', content: null, tool_calls: [{ id: '1', type: 'function', function: { name: 'read', arguments: JSON.stringify({ path }) } }] },
    ]);
    expect(t.figures().last.paths).toBe(1);
  });

  it('shows a simulated policy that compacts without file lists forgetting, where keeping everything does not', async () => {
    const source = syntheticSession(24);
    const events = source.events();
    const facts = historyFacts(events);
    const pricer = new Pricer('o200k_base');
    const run = async (policy: PeerPolicy, window: number) => {
      const tracker = new RetentionTracker(facts);
      const r = await simulate(events, policy, pricer, { window, maxOutputTokens: 256, summaryCap: 300 }, (m) => tracker.observe(m));
      return { compactions: r.state.compactions, retention: tracker.figures() };
    };
    const keepAll: PeerPolicy = { name: 'keep', description: 'never compacts', summaryLedger: 'none', beforeRequest: async () => {} };
    const everything = await run(keepAll, 1_000_000);
    const forgetful = await run(naive, 3_000);
    const withFiles = await run({ ...naive, summaryLedger: 'files' }, 3_000);
    expect(everything.retention).toMatchObject({ mean: 1, min: 1 });
    expect(forgetful.compactions).toBeGreaterThan(0);
    expect(forgetful.retention.min).toBeLessThan(1);
    expect(forgetful.retention.mean).toBeLessThan(everything.retention.mean);
    // The same policy with pi's file lists forgets fewer paths.
    expect(withFiles.retention.mean).toBeGreaterThan(forgetful.retention.mean);
  });
});

describe("the simulated peers' summaries", () => {
  const request = (ledger: 'full' | 'files' | 'none') => {
    const events = syntheticSession(4, 30)
      .events()
      .filter((e) => e.surfaceOp === 'append');
    const pricer = new Pricer('o200k_base');
    return new ExtractiveSummarizer({ ledger }).summarize(
      {
        system: undefined,
        tools: [],
        context: [],
        messages: [],
        events: events as never,
        target: { provider: 'p', model: 'm' },
        maxTokens: 2_000,
        countTokens: (t) => pricer.count(t),
      },
      new AbortController().signal,
    );
  };

  it('carry the lists their own summary prompts ask for: the full ledger by default and for Claude Code, file lists for pi and opencode, none for the others', async () => {
    const full = parseLedger((await request('full')).text).ledger;
    const files = parseLedger((await request('files')).text).ledger;
    const none = (await request('none')).text;
    expect(full.read).toContain('src/mod1/index.ts');
    expect(full.errors.length).toBeGreaterThan(0);
    expect(files.read).toEqual(full.read);
    expect(files.errors).toEqual([]);
    expect(none).not.toMatch(/<read-files>|<modified-files>|<unresolved-errors>/);
    expect(Object.fromEntries(PEERS.map((p) => [p.name, p.summaryLedger]))).toEqual({
      'pi (sim)': 'files',
      'Codex (sim)': 'none',
      'opencode (sim)': 'files',
      'Claude Code (sim)': 'full',
      'naive (sim)': 'none',
    });
  });
});

describe('a part of a transcript', () => {
  it('cuts at turn starts into pieces that together are the whole', () => {
    const whole = syntheticSession(10);
    const a = partOf(whole, 1, 2);
    const b = partOf(whole, 2, 2);
    expect(a.length + b.length).toBe(whole.length);
    expect(b.event(0).type).toBe('turn/start');
    const replies = (s: Session) => s.events().filter((e) => e.type === 'assistant/message').length;
    expect(replies(a)).toBe(10);
    expect(replies(b)).toBe(10);
    expect(b.events().map((e) => e.type)).toEqual(
      whole
        .events()
        .slice(a.length)
        .map((e) => e.type),
    );
  });
});
