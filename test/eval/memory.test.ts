/**
 * The memory measures (docs/memory.md, src/eval/memory.ts) on a hand-built transcript whose recall
 * is known: a policy that keeps everything scores 100% on all three; one that drops the user's
 * first message loses exactly that message's share.
 */
import { describe, expect, it } from 'vitest';
import { evaluateWindow } from '../../src/eval/evaluate';
import { argumentFacts, intentKey, memoryMeasures, pathsIn, transcriptOf, type Transcript } from '../../src/eval/memory';
import type { PeerPolicy } from '../../src/eval/simulate';
import type { ChatMessage } from '../../src/session/derive';
import type { AppendInput } from '../../src/session/events';
import { Session } from '../../src/session/session';

const FIRST_USER = 'Fix the crash in src/app/main.ts';

/**
 * Four requests. Messages: 0 system; 1 user (FIRST_USER); 2 reply 0: read src/app/main.ts;
 * 3 its failed result naming config/settings.json; 4 reply 1: names config/settings.json;
 * 5 user; 6 reply 2: writes config/settings.json; 7 its result; 8 reply 3: names both files.
 */
function handBuilt(): Session {
  const s = Session.inMemory('memory');
  const add = (type: AppendInput['type'], data: unknown, surface = false) =>
    s.append({ type, data, ...(surface ? { surfaceOp: 'append' } : {}) } as AppendInput);
  const call = (id: string, name: string, args: object) => ({ content: [{ type: 'tool-call', id, name, arguments: JSON.stringify(args) }] });
  const step = (turn: number, n: number, reply: unknown, result?: unknown) => {
    add('step/start', { turn, step: n });
    add('request/header', { provider: 'p', model: 'm', tools: [] });
    add('assistant/message', reply, true);
    if (result !== undefined) add('tool/result', result, true);
    add('step/end', { turn, step: n });
  };
  add('system/message', { text: 'You are a coding agent.' }, true);
  add('turn/start', { turn: 0 });
  add('user/message', { content: [{ type: 'text', text: FIRST_USER }] }, true);
  step(0, 0, call('c1', 'read', { path: 'src/app/main.ts' }), {
    callId: 'c1',
    toolName: 'read',
    content: [{ type: 'text', text: 'Error: cannot read config/settings.json' }],
    isError: true,
  });
  step(0, 1, { content: [{ type: 'text', text: 'The crash comes from config/settings.json.' }] });
  add('turn/end', { turn: 0 });
  add('turn/start', { turn: 1 });
  add('user/message', { content: [{ type: 'text', text: 'Good. Now write the fix.' }] }, true);
  step(1, 0, call('c2', 'write', { path: 'config/settings.json', content: '{}' }), {
    callId: 'c2',
    toolName: 'write',
    content: [{ type: 'text', text: 'ok' }],
  });
  step(1, 1, { content: [{ type: 'text', text: 'Fixed src/app/main.ts by writing config/settings.json.' }] });
  add('turn/end', { turn: 1 });
  return s;
}

/** What a policy that keeps everything sends at each request: the whole history before its reply. */
function keepEverything(t: Transcript): ChatMessage[][] {
  return t.replyAt.map((at) => t.messages.slice(0, at).map((m) => m.message));
}

describe('the memory measures', () => {
  const transcript = transcriptOf(handBuilt().events());

  it('reads the transcript: one request per reply, each with the history before it', () => {
    expect(transcript.replyAt).toEqual([2, 4, 6, 8]);
    expect(transcript.messages[3]!.isError).toBe(true);
  });

  it('a policy that keeps everything scores 100% on all three', () => {
    const sent = keepEverything(transcript);
    const m = memoryMeasures(transcript, sent, [false, true, false, false]);
    expect(m).toEqual({
      neededRecall: 1,
      neededRequests: 4,
      recallAfterCompaction: 1,
      compactionsMeasured: 1,
      intentRecall: 1,
      intentPairs: 6,
      recoverableRecall: 1,
    });
  });

  it("dropping the user's first message loses exactly its share", () => {
    const first = transcript.messages[1]!.message;
    const sent = keepEverything(transcript).map((ms) => ms.filter((m) => m !== first));
    const m = memoryMeasures(transcript, sent, [true, false, false, false]);
    // src/app/main.ts is needed at every request (reply 0 reads it, reply 3 names it); at request 0
    // only the dropped message held it. config/settings.json is needed from request 1 on, where
    // the tool result holds it. So request 0 recalls 0 of 1, the others everything.
    expect(m.neededRecall).toBeCloseTo((0 + 1 + 1 + 1) / 4);
    expect(m.recallAfterCompaction).toBe(0);
    // Intent pairs: the first message at requests 0–3 (4), the second at 2–3 (2); the first's 4 are lost.
    expect(m.intentPairs).toBe(6);
    expect(m.intentRecall).toBeCloseTo(2 / 6);
  });

  it('a fact used again only in a summary counts when the summary has it verbatim', () => {
    const first = transcript.messages[1]!.message;
    const summary: ChatMessage = { role: 'user', content: `<compacted-summary>The user asked: ${FIRST_USER}</compacted-summary>` };
    const sent = keepEverything(transcript).map((ms) => [...ms.filter((m) => m !== first), summary]);
    expect(memoryMeasures(transcript, sent)).toMatchObject({ neededRecall: 1, intentRecall: 1 });
  });

  it('through the replay: a peer that keeps everything scores 100%, one that drops the first user message loses its share', async () => {
    const keepAll: PeerPolicy = { name: 'keep', description: 'keeps everything', summaryLedger: 'none', beforeRequest: async () => {} };
    const dropFirst: PeerPolicy = {
      name: 'drop first user message',
      description: 'drops the first user message before every request',
      summaryLedger: 'none',
      async beforeRequest(s) {
        const i = s.entries.findIndex((e) => e.event.type === 'user/message');
        if (i >= 0 && s.entries[i]!.msg.content === FIRST_USER) s.entries.splice(i, 1);
      },
    };
    const r = await evaluateWindow(handBuilt(), 1_000_000, { peers: [keepAll, dropFirst] });
    const [xcompact, keep, drop] = r.runs;
    for (const run of [xcompact!, keep!]) expect(run.memory).toMatchObject({ neededRecall: 1, intentRecall: 1, recallAfterCompaction: undefined });
    expect(drop!.memory.neededRecall).toBeCloseTo(3 / 4);
    expect(drop!.memory.intentRecall).toBeCloseTo(2 / 6);
    expect(keep!.records.map((x) => x.memory)).toEqual([
      { needed: 1, recalled: 1, recoverable: 0, intents: 1, intentsRecalled: 1 },
      { needed: 2, recalled: 2, recoverable: 0, intents: 1, intentsRecalled: 1 },
      { needed: 2, recalled: 2, recoverable: 0, intents: 2, intentsRecalled: 2 },
      { needed: 2, recalled: 2, recoverable: 0, intents: 2, intentsRecalled: 2 },
    ]);
    expect(keep!.records.every((x) => x.unpairedToolCalls === 0 && !x.overWindow)).toBe(true);
  });
});

describe('facts', () => {
  it('file paths: a slash and an extension, or an absolute path of two segments', () => {
    expect(pathsIn('see src/a/b.ts, ./x.js and /etc/hosts (at src/c.ts:12:3). /mode and/or https://example.com/a.html')).toEqual([
      'src/a/b.ts',
      './x.js',
      '/etc/hosts',
      'src/c.ts',
    ]);
  });

  it('tool-call arguments: path-, command- and pattern-like values, and long shell words of commands', () => {
    expect(argumentFacts(JSON.stringify({ command: 'npm run typecheck -- --pretty', content: 'not a fact' }))).toEqual([
      'npm run typecheck -- --pretty',
      'typecheck',
      '--pretty',
    ]);
    expect(argumentFacts(JSON.stringify({ pattern: 'TODO', path: 'src' }))).toEqual(['TODO', 'src']);
    expect(argumentFacts('not json')).toEqual([]);
  });

  it("intent: a short message whole, a long one's first line of 20 characters", () => {
    expect(intentKey('  do it  ')).toBe('do it');
    const long = `hi\nPlease refactor the session store so that it streams\n${'x'.repeat(200)}`;
    expect(intentKey(long)).toBe('Please refactor the session store so that it streams');
  });
});
