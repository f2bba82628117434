/**
 * The recall tool over a session's shadowed history: what it finds, where it says it was, what
 * it refuses (as an answer the model can correct), and that it never changes the log.
 */
import { describe, expect, it } from 'vitest';
import { recallTool, RecallIndex, RECALL_MAX_TOKENS_CAP, RECALL_TOOL_DEFINITION } from '../../../src/services/recall/index';
import type { Session } from '../../../src/session/session';
import { frameCheckpoint } from '../../../src/services/summarizing';
import { checkpointRecallNote } from '../../../src/services/recall/index';
import { compact, errorTurn, fileText, newSession, pruneAll, readTurn } from '../../helpers/recall';

async function compactedSession(): Promise<{ session: Session; handle: string }> {
  const { session, w } = newSession();
  readTurn(w, 'Read the config loader.', ['src/config/load.ts', 'src/config/schema.ts'], 'Both files read.');
  errorTurn(w, 'npm test', "Error: ENOENT: no such file or directory, open '/srv/app/.env.local'");
  readTurn(w, 'Now the server.', ['src/server.ts'], 'Server read.');
  const start = await compact(session);
  readTurn(w, 'And the router.', ['src/router.ts'], 'Router read.');
  return { session, handle: `cp-${start}` };
}

function logOf(session: Session): string {
  return JSON.stringify(session.events());
}

describe('recall: what was condensed into a checkpoint', () => {
  it('finds the original text of a shadowed tool result, with its turn, call and checkpoint', async () => {
    const { session, handle } = await compactedSession();
    const recall = recallTool(session);
    const out = recall.run({ query: 'ENOENT' });
    expect(out.isError).toBe(false);
    expect(out.matches).toBeGreaterThanOrEqual(1);
    expect(out.text).toContain("Error: ENOENT: no such file or directory, open '/srv/app/.env.local'");
    expect(out.text).toMatch(/turn 1 · result of bash \{"command":"npm test"\} \(call call_\d+\)/);
    expect(out.text).toContain(`condensed into checkpoint ${handle}`);
  });

  it('searches only what is off the surface: text still in the context is no match', async () => {
    const { session } = await compactedSession();
    const out = recallTool(session).run({ query: 'src/router.ts line 3' });
    expect(out.isError).toBe(false);
    expect(out.matches).toBe(0);
    expect(out.text).toMatch(/^recall: no match for "src\/router.ts line 3" in the \d+ messages off your context/);
  });

  it('a path brings back the tool result of the call on that path, whole', async () => {
    const { session } = await compactedSession();
    const out = recallTool(session).run(JSON.stringify({ path: 'src/config/schema.ts' }));
    expect(out.isError).toBe(false);
    const first = out.text.split('\n[2]')[0]!;
    expect(first).toContain('[1] turn 0 · result of read {"path":"src/config/schema.ts"}');
    expect(first).toContain(fileText('src/config/schema.ts'));
  });

  it('a checkpoint handle brings back every message it condensed, in order', async () => {
    const { session, handle } = await compactedSession();
    const out = recallTool(session).run({ handle, maxTokens: 8000 });
    expect(out.isError).toBe(false);
    expect(out.text).toMatch(new RegExp(`^recall: the \\d+ messages checkpoint ${handle} condensed, in order:`));
    const order = ['Read the config loader.', fileText('src/config/load.ts').slice(0, 200), 'Run npm test.', 'ENOENT', 'Now the server.'];
    const at = order.map((s) => out.text.indexOf(s));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
  });

  it('newest first, and a merged checkpoint keeps its handle', async () => {
    const { session, w } = newSession();
    readTurn(w, 'Read a.', ['src/a.ts'], 'marker-alpha done.');
    const first = await compact(session);
    readTurn(w, 'Read b.', ['src/b.ts'], 'marker-alpha again.');
    readTurn(w, 'Read b2.', ['src/b2.ts'], 'b2 done.');
    const second = await compact(session);
    readTurn(w, 'Read c.', ['src/c.ts'], 'c done.');
    const recall = recallTool(session);
    const out = recall.run({ query: 'marker-alpha' });
    expect(out.matches).toBe(2);
    expect(out.text.indexOf('marker-alpha again')).toBeLessThan(out.text.indexOf('marker-alpha done'));
    const old = recall.run({ handle: `cp-${first}` });
    expect(old.text).toContain(fileText('src/a.ts').slice(0, 300));
    expect(old.text).not.toContain('src/b.ts line');
    const merged = recall.run({ handle: `cp-${second}`, maxTokens: 8000 });
    expect(merged.text).toContain(`with the earlier checkpoint cp-${first} merged into it`);
    expect(merged.text).toContain('src/a.ts line 1');
    expect(merged.text).toContain('src/b.ts line 1');
  });

  it('keeps up with the log: an index built before a compaction sees what it shadowed', async () => {
    const { session, w } = newSession();
    readTurn(w, 'Read a.', ['src/a.ts'], 'a done.');
    const recall = recallTool(session);
    expect(recall.run({ query: 'src/a.ts line 5' }).matches).toBe(0);
    readTurn(w, 'Read b.', ['src/b.ts'], 'b done.');
    await compact(session);
    expect(recall.run({ query: 'src/a.ts line 5' }).matches).toBe(1);
    // A second tool on the same session shares the index.
    expect(RecallIndex.of(session)).toBe(RecallIndex.of(session));
  });
});

describe('recall: what a prune cut', () => {
  it('a pruned result: its full original by query and by its pr- handle', () => {
    const { session, w } = newSession();
    readTurn(w, 'Read the big file.', ['src/big.ts'], 'Read.');
    readTurn(w, 'Read another.', ['src/other.ts'], 'Read.');
    const [seq] = pruneAll(session, 1_000);
    expect(seq).toBeDefined();
    const recall = recallTool(session);
    const byQuery = recall.run({ query: 'src/big.ts line 20: export const v20' });
    expect(byQuery.matches).toBe(1);
    expect(byQuery.text).toContain(`pruned (pr-${seq})`);
    const byHandle = recall.run({ handle: `pr-${seq}` });
    expect(byHandle.text).toContain(fileText('src/big.ts'));
  });

  it('pruned tool-call arguments: the original argument text', () => {
    const { session, w } = newSession();
    const content = Array.from({ length: 200 }, (_, i) => `const unique_${i} = ${i};`).join('\n');
    w.startTurn();
    w.request({ provider: 'deepseek', model: 'deepseek-chat', tools: [] });
    w.user('Write it.');
    w.startStep();
    w.request({ provider: 'deepseek', model: 'deepseek-chat', tools: [] });
    w.assistant({ toolCalls: [{ id: 'w1', name: 'write', arguments: JSON.stringify({ path: 'src/gen.ts', content }) }] });
    w.toolResult('w1', 'written', { toolName: 'write' });
    w.endStep();
    w.endTurn();
    readTurn(w, 'Read.', ['src/x.ts'], 'ok');
    const pruned = pruneAll(session, 1_000);
    expect(pruned.length).toBeGreaterThan(0);
    const out = recallTool(session).run({ query: 'const unique_150 = 150;' });
    expect(out.matches).toBe(1);
    expect(out.text).toContain('your message');
    expect(out.text).toContain('const unique_150 = 150;');
  });
});

describe('recall: recall results are ordinary tool results, never nested', () => {
  it('a condensed recall result is not searched again: the original comes back, once', async () => {
    const { session, w } = newSession();
    errorTurn(w, 'make', 'fatal: cannot find libfoo-unique.so');
    readTurn(w, 'Read the makefile.', ['Makefile'], 'Read it.');
    await compact(session);
    const recall = recallTool(session);
    w.startTurn();
    w.request({ provider: 'deepseek', model: 'deepseek-chat', tools: [recall.definition] });
    w.user('What was the make error?');
    w.startStep();
    w.request({ provider: 'deepseek', model: 'deepseek-chat', tools: [recall.definition] });
    w.assistant({ toolCalls: [{ id: 'r1', name: 'recall', arguments: '{"query":"libfoo-unique"}' }] });
    const first = recall.run('{"query":"libfoo-unique"}');
    expect(first.matches).toBe(1);
    w.toolResult('r1', first.text, { toolName: 'recall' });
    w.endStep();
    w.startStep();
    w.request({ provider: 'deepseek', model: 'deepseek-chat', tools: [] });
    w.assistant({ text: 'It was libfoo-unique.so.' });
    w.endStep();
    w.endTurn();
    readTurn(w, 'Next.', ['src/n.ts'], 'ok');
    await compact(session); // the recall result itself is now off the surface
    const again = recall.run({ query: 'libfoo-unique' });
    // The original tool result and the assistant's answer; not the recall result's copy of it.
    expect(again.text).not.toContain('recall: 1 match');
    expect(again.text.match(/fatal: cannot find libfoo-unique.so/g)).toHaveLength(1);
  });
});

describe('recall: bad input is answered, bounded, and changes nothing', () => {
  const cases: Array<[string, unknown, RegExp]> = [
    ['invalid regex', { query: '([a-z', regex: true }, /not a regular expression recall can run \(unterminated/],
    ['backreference', { query: '(a+)\\1', regex: true }, /backreferences .* are not supported/],
    ['empty query', { query: '   ' }, /query is empty/],
    ['no field', {}, /nothing to look for/],
    ['two fields', { query: 'x', path: 'y' }, /only one of query, path or handle/],
    ['unknown field', { q: 'x' }, /unknown field "q"/],
    ['wrong type', { query: 42 }, /field "query"/],
    ['not JSON', '{"query": ', /not valid JSON/],
    ['unknown handle', { handle: 'cp-99999' }, /no checkpoint has handle cp-99999; handles named in your context look like cp-\d+/],
    ['not a handle', { handle: 'latest' }, /"latest" is not a handle/],
    ['negative maxTokens', { query: 'x', maxTokens: -5 }, /maxTokens must be a positive/],
  ];
  for (const [name, args, message] of cases) {
    it(`${name}: a tool error the model can act on`, async () => {
      const { session } = await compactedSession();
      const before = logOf(session);
      const out = recallTool(session).run(args);
      expect(out.isError).toBe(true);
      expect(out.text).toMatch(/^recall error: /);
      expect(out.text).toMatch(message);
      expect(logOf(session)).toBe(before);
    });
  }

  it('huge maxTokens is capped, and says so', async () => {
    const { session } = await compactedSession();
    const before = logOf(session);
    const out = recallTool(session).run({ query: 'line', maxTokens: 10_000_000 });
    expect(out.isError).toBe(false);
    expect(Math.ceil(out.text.length / 4)).toBeLessThanOrEqual(RECALL_MAX_TOKENS_CAP + 100);
    expect(out.text).toContain(`maxTokens 10000000 is above the cap: answered within ${RECALL_MAX_TOKENS_CAP}`);
    expect(logOf(session)).toBe(before);
  });

  it('a query that matches everything: bounded, with how much more matched', async () => {
    const { session } = await compactedSession();
    const before = logOf(session);
    const out = recallTool(session).run({ query: '.', regex: true, maxTokens: 300 });
    expect(out.isError).toBe(false);
    expect(out.matches).toBeGreaterThan(out.shown);
    expect(Math.ceil(out.text.length / 4)).toBeLessThanOrEqual(300 + 80);
    expect(out.text).toMatch(/… \d+ more matches not shown \(about \d+ tokens\): narrow the query, or ask again with a larger maxTokens/);
    expect(logOf(session)).toBe(before);
  });

  it('nothing off the surface yet: says everything is still in the context', () => {
    const { session, w } = newSession();
    readTurn(w, 'Read.', ['src/a.ts'], 'ok');
    expect(recallTool(session).run({ query: 'anything' }).text).toMatch(/nothing has been condensed or pruned yet/);
  });

  it('the definition is an OpenAI function tool with the documented parameters', () => {
    expect(RECALL_TOOL_DEFINITION.type).toBe('function');
    expect(RECALL_TOOL_DEFINITION.function.name).toBe('recall');
    expect(Object.keys(RECALL_TOOL_DEFINITION.function.parameters.properties)).toEqual(['query', 'regex', 'path', 'handle', 'maxTokens']);
  });
});

describe('recall on: checkpoints and markers name their handles; off: nothing changes', () => {
  it('a checkpoint names cp-N only when recall is on, and the handle brings its span back', async () => {
    for (const recall of [false, true]) {
      const { session, w } = newSession();
      readTurn(w, 'Read the config loader.', ['src/config/load.ts', 'src/config/schema.ts'], 'Both files read.');
      readTurn(w, 'Now the server.', ['src/server.ts'], 'Server read.');
      const start = await compact(session, { recall });
      const checkpoint = session.events().find((e) => e.type === 'user/message' && e.data.source !== undefined)!;
      const text = (checkpoint.data as { content: Array<{ text: string }> }).content[0]!.text;
      const summary = session.events().find((e) => e.type === 'compaction/summary')!.data as { summary: string };
      if (!recall) {
        expect(text).toBe(frameCheckpoint(summary.summary));
        expect(text).not.toMatch(/recall|cp-\d/);
        continue;
      }
      expect(text).toBe(`${frameCheckpoint(summary.summary)}\n\n${checkpointRecallNote(`cp-${start}`)}`);
      expect(text).toContain(`recall {"handle":"cp-${start}"}`);
      const back = recallTool(session).run({ handle: `cp-${start}`, maxTokens: 8000 });
      expect(back.text).toContain(fileText('src/config/schema.ts'));
    }
  });

  it('a pruned result names pr-N only when recall is on, and the handle brings the full text back', () => {
    for (const recall of [false, true]) {
      const { session, w } = newSession();
      readTurn(w, 'Read the big file.', ['src/big.ts'], 'Read.');
      readTurn(w, 'Read another.', ['src/other.ts'], 'Read.');
      const [seq] = pruneAll(session, 1_000, recall);
      const current = [...session.surface.seqs()].map((s) => session.event(s)).find((e) => e.type === 'tool/result' && e.seq > seq!)!;
      const text = (current.data as { content: Array<{ text: string }> }).content[0]!.text;
      expect(seq).toBeDefined();
      if (!recall) {
        expect(text).toMatch(/\[… \d+ characters pruned by xcompact …\]/);
        expect(text).not.toContain('recall');
        continue;
      }
      expect(text).toMatch(new RegExp(`\\[… \\d+ characters pruned by xcompact; recall handle pr-${seq} brings back the full text …\\]`));
      expect(recallTool(session).run({ handle: `pr-${seq}` }).text).toContain(fileText('src/big.ts'));
    }
  });
});

describe('recall: the index stays sound across queries and appends', () => {
  it('a one-word query does not disturb later multi-word queries (postings stay in order)', async () => {
    const { session, w } = newSession();
    readTurn(w, 'Read alpha.', ['src/alpha.ts', 'src/beta.ts'], 'alpha beta done.');
    readTurn(w, 'Read gamma.', ['src/gamma.ts'], 'gamma done.');
    await compact(session);
    const recall = recallTool(session);
    // Single exact words first (their candidates are posting lists), then intersections over them.
    expect(recall.run({ query: ' export ' }).matches).toBeGreaterThan(0);
    expect(recall.run({ query: ' line ' }).matches).toBeGreaterThan(0);
    readTurn(w, 'Read delta.', ['src/delta.ts'], 'delta done.');
    readTurn(w, 'Read eps.', ['src/eps.ts'], 'eps done.');
    await compact(session);
    for (const f of ['src/alpha.ts', 'src/beta.ts', 'src/gamma.ts', 'src/delta.ts']) {
      expect(recall.run({ query: `${f} line 7: export const v7` }).matches, f).toBe(1);
    }
  });

  it('a regex written as /…/flags is its body', async () => {
    const { session } = await compactedSession();
    const out = recallTool(session).run({ query: '/ENOENT: no such/i', regex: true });
    expect(out.matches).toBe(1);
  });
});
