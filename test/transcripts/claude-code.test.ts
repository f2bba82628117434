/**
 * The Claude Code importer on the real session (test/fixtures/claude-code/real-session.jsonl,
 * Claude Code 2.1.7, 893 lines, 3 compactions it made itself) and on hand-made files, one per
 * edge case of the format: branches, split responses, missing results, compaction, images and
 * errors, malformed lines. Facts about the files are read here independently of the importer.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isCheckpoint, type SessionEvent } from '../../src/session/events';
import { importClaudeCodeFile, importClaudeCodeTranscript } from '../../src/transcripts/claude-code';
import { TranscriptImportError } from '../../src/transcripts/common';
import { Session } from '../../src/session/session';
import { SessionWriter } from '../../src/session/writer';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { CLAUDE_REAL, eventsOf, fixture, median, usageTracking } from '../helpers/transcripts';

const records = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, any>);

async function imported(name: string) {
  const session = Session.inMemory(name);
  const report = await importClaudeCodeFile(session, fixture(`claude-code/${name}.jsonl`));
  return { session, report };
}

const texts = (e: SessionEvent) => JSON.stringify(e.data);

describe('Claude Code import: the real session', () => {
  const file = records(CLAUDE_REAL);
  const main = file.filter((r) => r.isSidechain !== true);
  const toolUses = main
    .filter((r) => r.type === 'assistant')
    .flatMap((r) => (r.message.content as any[]).filter((b) => b.type === 'tool_use').map((b) => b.id as string));
  const errors = main
    .filter((r) => r.type === 'user' && Array.isArray(r.message.content))
    .flatMap((r) => (r.message.content as any[]).filter((b) => b.type === 'tool_result' && b.is_error === true).map((b) => b.tool_use_id as string));
  const responses = new Set(main.filter((r) => r.type === 'assistant' && r.message.model !== '<synthetic>').map((r) => r.message.id as string));
  const boundaries = main.filter((r) => r.type === 'system' && r.subtype === 'compact_boundary');
  const summaries = main.filter((r) => r.isCompactSummary === true);
  const session = Session.inMemory('claude');
  const report = importClaudeCodeTranscript(session, readFileSync(CLAUDE_REAL, 'utf8'));

  it('imports every response once (split records joined by message.id) and every call with its result', () => {
    expect(responses.size).toBe(225);
    expect(toolUses).toHaveLength(206);
    expect(report).toMatchObject({
      harness: 'claude-code',
      lines: 893,
      assistantMessages: responses.size,
      toolCalls: 206,
      toolResults: 206,
      synthesizedResults: 0,
      compactions: 3,
    });
    const calls = eventsOf(session, 'assistant/message').flatMap((e) =>
      e.data.content.filter((b) => b.type === 'tool-call').map((b) => (b as { id: string }).id),
    );
    expect(calls).toEqual(toolUses);
    const results = eventsOf(session, 'tool/result');
    expect(results.map((r) => r.data.callId).sort()).toEqual([...toolUses].sort());
    expect(
      results
        .filter((r) => r.data.isError)
        .map((r) => r.data.callId)
        .sort(),
    ).toEqual([...errors].sort());
    expect(errors.length).toBeGreaterThan(0);
    expect(eventsOf(session, 'assistant/message').some((e) => e.data.content.some((b) => b.type === 'reasoning'))).toBe(true);
    expect(session.needsRecovery).toBe(false);
  });

  it("imports Claude Code's three compactions as checkpoints holding the summaries it sent", () => {
    expect(boundaries).toHaveLength(3);
    const cps = session.events().filter(isCheckpoint) as SessionEvent<'user/message'>[];
    expect(cps).toHaveLength(3);
    cps.forEach((cp, i) => expect(cp.data.content).toEqual([{ type: 'text', text: summaries[i]!.message.content }]));
    expect(eventsOf(session, 'compaction/summary').map((e) => e.data.shadowedTokens)).toEqual(boundaries.map((b) => b.compactMetadata.preTokens));
    // What the session sends now is what Claude Code sent after its last compaction: the summary, then what followed.
    const messages = session.deriveMessages();
    expect(messages[0]).toMatchObject({ role: 'user', content: summaries[2]!.message.content });
    expect(openAIMessageProblems(messages)).toEqual([]);
    // Nothing Claude recorded for itself reached the surface.
    expect(report.notSent).toMatchObject({ summary: 3, 'file-history-snapshot': 55, 'system:stop_hook_summary': 35, 'system:turn_duration': 19 });
    expect(report.ignored).toEqual({});
  });

  it('anchors on the provider usage: prompt = input + cache creation + cache read, and the meter tracks it within 5% (median)', () => {
    const first = main.find((r) => r.type === 'assistant')!;
    const u = first.message.usage;
    const reply = eventsOf(session, 'assistant/message')[0]!;
    expect(reply.data.usage).toMatchObject({
      promptTokens: u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens,
      cachedTokens: u.cache_read_input_tokens,
      cacheWriteTokens: u.cache_creation_input_tokens,
    });
    const rows = usageTracking(session);
    expect(rows.length).toBe(225);
    const err = median(rows.map((r) => Math.abs(r.predicted - r.actual) / r.actual));
    console.log(`claude code usage tracking: ${rows.length} reports, median error ${(100 * err).toFixed(2)}%`);
    expect(err).toBeLessThan(0.05);
  });
});

describe('Claude Code import: edge cases', () => {
  it('branches: imports the active branch only; the abandoned prompt, its reply and a sidechain are counted as not sent', async () => {
    const { session, report } = await imported('branches');
    const sent = session.deriveMessages().map((m) => m.content);
    expect(sent).toEqual(['Write a haiku about rust.', 'Iron oxide blooms...', 'Now one about mountains instead.', 'Granite shoulders rise...']);
    expect(report.notSent).toMatchObject({ 'records on other branches': 2, 'subagent (sidechain) records': 1, summary: 1, 'file-history-snapshot': 1 });
    expect(report.turns).toBe(2);
  });

  it('split responses: four records of one message.id are one assistant message, parallel results answered off the walked path', async () => {
    const { session, report } = await imported('split-response');
    const replies = eventsOf(session, 'assistant/message');
    expect(replies).toHaveLength(2);
    expect(replies[0]!.data.content.map((b) => b.type)).toEqual(['reasoning', 'text', 'tool-call', 'tool-call']);
    expect(replies[0]!.data.usage).toEqual({ promptTokens: 2010, completionTokens: 57, cachedTokens: 0, cacheWriteTokens: 2000 });
    expect(replies[0]!.data.finishReason).toBe('tool_use');
    expect(eventsOf(session, 'tool/result').map((r) => r.data.callId)).toEqual(['toolu_test', 'toolu_src']);
    expect(eventsOf(session, 'step/start')).toHaveLength(2);
    expect(report).toMatchObject({ toolCalls: 2, toolResults: 2, synthesizedResults: 0 });
    expect(openAIMessageProblems(session.deriveMessages())).toEqual([]);
  });

  it('missing results: an interrupted call is answered with an error result; the synthetic reply is not sent', async () => {
    const { session, report } = await imported('missing-result');
    expect(report.synthesizedResults).toBe(1);
    const result = eventsOf(session, 'tool/result')[0]!;
    expect(result.data).toMatchObject({ callId: 'toolu_build', isError: true });
    expect(texts(result)).toContain('No result was recorded');
    expect(JSON.stringify(session.deriveMessages())).not.toContain('No response requested.');
    expect(Object.keys(report.notSent).some((k) => k.includes('synthetic'))).toBe(true);
    expect(openAIMessageProblems(session.deriveMessages())).toEqual([]);
  });

  it("compaction: the boundary and its summary become one checkpoint over everything before, with Claude's preTokens", async () => {
    const { session, report } = await imported('compaction');
    expect(report.compactions).toBe(1);
    const summary = eventsOf(session, 'compaction/summary')[0]!;
    expect(summary.data.shadowedTokens).toBe(150_000);
    const messages = session.deriveMessages();
    expect(messages).toHaveLength(2);
    expect(messages[0]).toMatchObject({ role: 'user' });
    expect(String(messages[0]!.content)).toContain('This session is being continued');
    expect(messages[1]).toMatchObject({ role: 'assistant', content: 'Continuing the refactor of src/parser.ts.' });
    // The history it shadowed stays in the log.
    expect(eventsOf(session, 'tool/result')).toHaveLength(1);
    expect(report.notSent['system:stop_hook_summary']).toBe(1);
  });

  it('images and errors: images become data URLs (in prompts and results), an error result is marked, an unknown block is counted', async () => {
    const { session, report } = await imported('images-errors');
    const prompt = eventsOf(session, 'user/message')[0]!;
    expect(prompt.data.content[1]).toEqual({ type: 'image', url: expect.stringMatching(/^data:image\/png;base64,iVBOR/) });
    const [failed, shot] = eventsOf(session, 'tool/result');
    expect(failed!.data.isError).toBe(true);
    expect(shot!.data.isError).toBeUndefined();
    expect(shot!.data.content[1]).toEqual({ type: 'image', url: expect.stringMatching(/^data:image\/jpeg;base64,/) });
    expect(report.ignored).toEqual({ 'assistant block:server_tool_use': 1 });
  });

  it('records of other kinds linked into the tree (progress) are walked through, a repeated record is imported once', async () => {
    const { session, report } = await imported('progress-and-repeats');
    expect(session.deriveMessages().map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(report).toMatchObject({ userMessages: 1, toolResults: 1, synthesizedResults: 0 });
    expect(report.notSent['records repeating an earlier uuid']).toBe(1);
    expect(report.notSent.progress).toBe(1);
    expect(report.ignored).toEqual({});
  });

  it('malformed input: a typed error naming the file, the line and what was expected; the target session is untouched', async () => {
    const target = Session.inMemory('target');
    const path = fixture('claude-code/malformed.jsonl');
    const err = await importClaudeCodeFile(target, path).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TranscriptImportError);
    expect(err).toMatchObject({ code: 'import', line: 2, file: path, harness: 'claude-code' });
    expect((err as Error).message).toContain(path);
    expect((err as Error).message).toMatch(/line 2: not valid JSON .*expected one JSON object per line/);
    expect(target.length).toBe(0);
  });

  it('a bad record halfway leaves a non-empty target exactly as it was, and an import into it is refused', () => {
    const target = Session.inMemory('busy');
    new SessionWriter(target).startTurn();
    expect(() => importClaudeCodeTranscript(target, readFileSync(fixture('claude-code/compaction.jsonl'), 'utf8'))).toThrow(/already has 1 events/);
    const fresh = Session.inMemory('fresh');
    const bad = readFileSync(fixture('claude-code/split-response.jsonl'), 'utf8').replace('"name": "Bash"', '"name": ""');
    expect(() => importClaudeCodeTranscript(fresh, bad)).toThrow(/line 4: a tool_use block without its id or name/);
    expect(fresh.length).toBe(0);
  });

  it('a JSONL file with no Claude Code message is refused, not imported as an empty conversation', () => {
    const s = Session.inMemory();
    expect(() => importClaudeCodeTranscript(s, '{"type":"summary","summary":"t","leafUuid":"x"}\n')).toThrow(TranscriptImportError);
    expect(() => importClaudeCodeTranscript(s, '{"type":"summary","summary":"t","leafUuid":"x"}\n')).toThrow(/none of its 1 lines is a message/);
    expect(s.length).toBe(0);
  });
});
