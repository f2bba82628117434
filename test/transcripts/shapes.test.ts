/**
 * The record shapes real harnesses write, each built here from a few records of its own (not
 * from the corpus files): two records on one line, a torn last line, a compaction boundary
 * whose logical parent is not in the file, records out of the tree's order, a partial
 * compaction (Claude Code's preserved segment), Codex developer messages between a call and
 * its output, and file errors typed for every importer.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isCheckpoint, type SessionEvent } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { importClaudeCodeFile, importClaudeCodeTranscript } from '../../src/transcripts/claude-code';
import { importCodexFile, importCodexTranscript } from '../../src/transcripts/codex';
import { TranscriptImportError } from '../../src/transcripts/common';
import { importTranscriptFile } from '../../src/transcripts/import';
import { splitRecords, walkRecords } from '../../src/transcripts/records';

type Rec = Record<string, unknown>;
let clock = Date.parse('2026-01-01T00:00:00Z');
const at = () => new Date((clock += 1000)).toISOString();

const user = (uuid: string, parentUuid: string | null, content: unknown, extra: Rec = {}): Rec => ({
  type: 'user',
  uuid,
  parentUuid,
  isSidechain: false,
  timestamp: at(),
  message: { role: 'user', content },
  ...extra,
});
const assistant = (uuid: string, parentUuid: string | null, id: string, content: unknown[], input = 100): Rec => ({
  type: 'assistant',
  uuid,
  parentUuid,
  isSidechain: false,
  timestamp: at(),
  message: { role: 'assistant', id, model: 'claude-test', content, usage: { input_tokens: input, output_tokens: 5 } },
});
const call = (id: string) => ({ type: 'tool_use', id, name: 'Bash', input: { command: `echo ${id}` } });
const result = (id: string, text: string) => ({ type: 'tool_result', tool_use_id: id, content: text });
const boundary = (uuid: string, logicalParentUuid: string | undefined, meta: Rec = {}): Rec => ({
  type: 'system',
  subtype: 'compact_boundary',
  uuid,
  parentUuid: null,
  ...(logicalParentUuid === undefined ? {} : { logicalParentUuid }),
  isSidechain: false,
  timestamp: at(),
  content: 'Conversation compacted',
  compactMetadata: { trigger: 'auto', preTokens: 1234, ...meta },
});
const summary = (uuid: string, parentUuid: string, text: string): Rec => user(uuid, parentUuid, text, { isCompactSummary: true });
const jsonl = (records: Rec[]) => records.map((r) => JSON.stringify(r)).join('\n') + '\n';

/** A session of two turns with a call, compacted, then one more turn after the summary. */
function compactedSession(logicalParent: 'present' | 'missing'): Rec[] {
  return [
    user('u1', null, 'first prompt'),
    assistant('a1', 'u1', 'm1', [call('c1')]),
    user('r1', 'a1', [result('c1', 'output one')]),
    assistant('a2', 'r1', 'm2', [{ type: 'text', text: 'done one' }]),
    user('u2', 'a2', 'second prompt'),
    assistant('a3', 'u2', 'm3', [{ type: 'text', text: 'done two' }]),
    // Claude Code sometimes never writes the record a boundary names: the history before is still linked.
    boundary('b1', logicalParent === 'present' ? 'a3' : 'not-in-the-file'),
    summary('s1', 'b1', 'SUMMARY OF BEFORE'),
    user('u3', 's1', 'third prompt'),
    assistant('a4', 'u3', 'm4', [{ type: 'text', text: 'done three' }]),
  ];
}

const checkpoints = (s: Session) => s.events().filter(isCheckpoint) as SessionEvent<'user/message'>[];
const surfaceTexts = (s: Session) => s.deriveMessages().map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)));

describe('the shared record walker', () => {
  it('splits records run together on one line, but not at a "}{" inside a string', () => {
    expect(splitRecords('{"a":1}{"b":"x}{y"}')).toEqual(['{"a":1}', '{"b":"x}{y"}']);
    expect(splitRecords('{"a":1')).toBeUndefined();
    expect(splitRecords('{"a":1} junk')).toBeUndefined();
    const w = walkRecords('{"a":1}{"b":2}\n{"c":"}{"}\n');
    expect(w.records.map((r) => [r.line, Object.keys(r.record)[0]])).toEqual([
      [1, 'a'],
      [1, 'b'],
      [2, 'c'],
    ]);
    expect(w).toMatchObject({ lines: 2, mergedLines: 1, torn: undefined, bad: undefined });
  });

  it('skips and reports a torn last line; a bad line before the last is named, not skipped', () => {
    const w = walkRecords('{"a":1}\n{"b":2}\n{"c":"half');
    expect(w.records).toHaveLength(2);
    expect(w.torn).toEqual({ line: 3, chars: 10 });
    expect(w.bad).toBeUndefined();
    const bad = walkRecords('{"a":1}\nnot json\n{"b":2}\n');
    expect(bad.bad?.line).toBe(2);
    expect(bad.torn).toBeUndefined();
  });
});

describe('Claude Code shapes', () => {
  it('two records on one line import as two, counted in the report', () => {
    const recs = compactedSession('present');
    const text = jsonl(recs);
    const merged = text.replace(`${JSON.stringify(recs[1])}\n`, JSON.stringify(recs[1]));
    const a = Session.inMemory();
    const b = Session.inMemory();
    const plain = importClaudeCodeTranscript(a, text);
    const report = importClaudeCodeTranscript(b, merged);
    expect(report.mergedLines).toBe(1);
    expect(plain.mergedLines).toBe(0);
    expect(report.assistantMessages).toBe(plain.assistantMessages);
    expect(surfaceTexts(b)).toEqual(surfaceTexts(a));
  });

  it('a torn last line (a session still being written) is skipped and reported, never a refused file', async () => {
    const text = jsonl(compactedSession('present'));
    const torn = text + JSON.stringify(assistant('a5', 'a4', 'm5', [{ type: 'text', text: 'still writing' }])).slice(0, 60);
    const s = Session.inMemory();
    const report = importClaudeCodeTranscript(s, torn);
    expect(report.tornLines).toBe(1);
    expect(report.warnings.join(' ')).toMatch(/line 11 is torn/);
    expect(report.assistantMessages).toBe(4);
    const dir = mkdtempSync(join(tmpdir(), 'xcompact-torn-'));
    writeFileSync(join(dir, 'live.jsonl'), torn);
    const viaFile = await importTranscriptFile(Session.inMemory(), join(dir, 'live.jsonl'));
    expect(viaFile.tornLines).toBe(1);
  });

  it.each(['present', 'missing'] as const)(
    'a boundary whose logical parent is %s: one checkpoint over the history before it, holding the summary',
    (logical) => {
      const s = Session.inMemory();
      const report = importClaudeCodeTranscript(s, jsonl(compactedSession(logical)));
      expect(report.compactions).toBe(1);
      expect(report.turns).toBe(3);
      expect(report.notSent['records on other branches']).toBeUndefined();
      const cps = checkpoints(s);
      expect(cps).toHaveLength(1);
      expect(cps[0]!.data.content).toEqual([{ type: 'text', text: 'SUMMARY OF BEFORE' }]);
      // The history before the boundary is in the log (shadowed), not dropped.
      const all = JSON.stringify(s.events().map((e) => e.data));
      for (const t of ['first prompt', 'output one', 'second prompt', 'done two']) expect(all).toContain(t);
      const surface = surfaceTexts(s);
      expect(surface[0]).toContain('SUMMARY OF BEFORE');
      expect(surface.join(' ')).not.toContain('first prompt');
      expect(surface.join(' ')).toContain('third prompt');
      if (logical === 'missing') expect(report.warnings.join(' ')).toMatch(/logical parent/);
    },
  );

  it('records out of the tree order import as the ordered file does, with a warning', () => {
    const recs = compactedSession('missing');
    const ordered = Session.inMemory();
    importClaudeCodeTranscript(ordered, jsonl(recs));
    // The lines shuffled (a deterministic permutation), the uuid tree and timestamps intact.
    const shuffled = recs
      .map((r, i) => ({ r, k: (i * 7) % recs.length }))
      .sort((x, y) => x.k - y.k)
      .map((x) => x.r);
    expect(shuffled).not.toEqual(recs);
    const s = Session.inMemory();
    const report = importClaudeCodeTranscript(s, jsonl(shuffled));
    expect(report.warnings.join(' ')).toMatch(/not in the order of their uuid tree/);
    expect(report.turns).toBe(3);
    expect(report.compactions).toBe(1);
    expect(surfaceTexts(s)).toEqual(surfaceTexts(ordered));
    const orderedReport = importClaudeCodeTranscript(Session.inMemory(), jsonl(recs));
    expect(orderedReport.warnings.join(' ')).not.toMatch(/order/);
  });

  it('a partial compaction (/compact keeping a range): the checkpoint shadows what came before the kept head; the range stays', () => {
    // Claude Code's preserved segment: head..tail are kept as they were, after the summary (the anchor).
    const recs: Rec[] = [
      user('u1', null, 'old prompt'),
      assistant('a1', 'u1', 'm1', [{ type: 'text', text: 'old answer' }]),
      user('u2', 'a1', 'kept prompt'),
      assistant('a2', 'u2', 'm2', [{ type: 'text', text: 'kept answer' }]),
      boundary('b1', 'a2', { trigger: 'manual', preservedSegment: { headUuid: 'u2', anchorUuid: 's1', tailUuid: 'a2' } }),
      summary('s1', 'b1', 'SUMMARY OF THE OLD PART'),
      user('u3', 's1', 'new prompt'),
      assistant('a3', 'u3', 'm3', [{ type: 'text', text: 'new answer' }]),
    ];
    const s = Session.inMemory();
    const report = importClaudeCodeTranscript(s, jsonl(recs));
    expect(report).toMatchObject({ compactions: 1, partialCompactions: 1 });
    const cps = checkpoints(s);
    expect(cps).toHaveLength(1);
    const sum = s.events().find((e) => e.type === 'compaction/summary') as SessionEvent<'compaction/summary'>;
    const shadowedTexts = sum.data.shadowedSeqs.map((q) => JSON.stringify(s.event(q).data));
    expect(shadowedTexts.join(' ')).toContain('old prompt');
    expect(shadowedTexts.join(' ')).not.toContain('kept prompt');
    const surface = surfaceTexts(s);
    expect(surface[0]).toContain('SUMMARY OF THE OLD PART');
    expect(surface.slice(1)).toEqual(['kept prompt', 'kept answer', 'new prompt', 'new answer']);
    // Without the preserved segment, the same file is a full compaction.
    const full = Session.inMemory();
    const fullRecs = recs.map((r) => (r.uuid === 'b1' ? boundary('b1', 'a2') : r));
    expect(importClaudeCodeTranscript(full, jsonl(fullRecs)).partialCompactions).toBe(0);
    expect(surfaceTexts(full).join(' ')).not.toContain('kept prompt');
  });
});

describe('Codex shapes', () => {
  const line = (type: string, payload: Rec) => ({ timestamp: at(), type, payload });
  const rollout = (withDeveloper: boolean) => [
    line('session_meta', { id: 's', model_provider: 'openai' }),
    line('turn_context', { model: 'gpt-test' }),
    line('response_item', { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'run it' }] }),
    line('response_item', { type: 'function_call', name: 'shell', arguments: '{"command":["ls"]}', call_id: 'call_1' }),
    ...(withDeveloper ? [line('response_item', { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'approved by the user' }] })] : []),
    line('response_item', { type: 'function_call_output', call_id: 'call_1', output: 'REAL OUTPUT' }),
    line('response_item', { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'listed' }] }),
  ];

  it('a developer message between a call and its output: the call keeps its real output, no invented error', () => {
    const s = Session.inMemory();
    const report = importCodexTranscript(s, jsonl(rollout(true)));
    expect(report.synthesizedResults).toBe(0);
    expect(report.toolResults).toBe(1);
    expect(report.ignored['tool result for a call that is not waiting for one']).toBeUndefined();
    const res = s.events().find((e) => e.type === 'tool/result') as SessionEvent<'tool/result'>;
    expect(JSON.stringify(res.data.content)).toContain('REAL OUTPUT');
    expect(JSON.stringify(s.deriveMessages())).toContain('approved by the user');
    expect(report.warnings.join(' ')).toMatch(/developer\/system message .* after the outputs/);
  });

  it('prompts recorded only as event_msg user_message (Codex Desktop) are the prompts sent', () => {
    const recs = rollout(false).filter((r) => !(r.payload.type === 'message' && r.payload.role === 'user'));
    recs.splice(2, 0, line('event_msg', { type: 'user_message', message: 'run it', images: [] }));
    const s = Session.inMemory();
    const report = importCodexTranscript(s, jsonl(recs));
    expect(report.userMessages).toBe(1);
    expect(s.deriveMessages()[0]).toMatchObject({ role: 'user' });
    expect(JSON.stringify(s.deriveMessages()[0])).toContain('run it');
  });
});

describe('file errors are typed for every importer', () => {
  const dir = mkdtempSync(join(tmpdir(), 'xcompact-missing-'));
  const cases = [
    ['importClaudeCodeFile', importClaudeCodeFile],
    ['importCodexFile', importCodexFile],
    ['importTranscriptFile', importTranscriptFile],
  ] as const;
  it.each(cases)('%s: a missing file and a directory are TranscriptImportErrors naming the file and why', async (_name, importFile) => {
    const missing = join(dir, 'nope.jsonl');
    const target = Session.inMemory();
    const e1 = await importFile(target, missing).catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(TranscriptImportError);
    expect(e1).toMatchObject({ code: 'import', fileError: 'not-found', file: missing });
    expect((e1 as Error).message).toContain(missing);
    const e2 = await importFile(target, dir).catch((e: unknown) => e);
    expect(e2).toBeInstanceOf(TranscriptImportError);
    expect(e2).toMatchObject({ code: 'import', fileError: 'is-a-directory' });
    expect(target.length).toBe(0);
  });
});

describe('the CLI on a live Claude Code file (a merged line, a torn last line)', () => {
  it('inspect exits 0 and reports both lines in its torn-tail section', async () => {
    const { xcompact } = await import('../helpers/cli');
    const recs = compactedSession('missing');
    const text = jsonl(recs).replace(`${JSON.stringify(recs[2])}\n`, JSON.stringify(recs[2])) + JSON.stringify(assistant('a9', 'a4', 'm9', [])).slice(0, 30);
    const dir = mkdtempSync(join(tmpdir(), 'xcompact-live-'));
    const file = join(dir, 'live.jsonl');
    writeFileSync(file, text);
    const r = await xcompact(['inspect', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/torn tail\n\s+1 torn last line skipped/);
    expect(r.stdout).toMatch(/1 line holding two records or more/);
    expect(r.stdout).toMatch(/1 Claude Code session compactions as checkpoints|1 Claude Code session compaction/);
  });
});
