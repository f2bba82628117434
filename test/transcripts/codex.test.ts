/**
 * The Codex importer on the real rollout (test/fixtures/codex/real-rollout.jsonl, Codex CLI
 * 0.58.0, 279 lines, 39 shell calls, 79 token_count events) and on hand-made rollouts, one per
 * edge case: custom tools, encrypted and readable compactions, images and errors, missing
 * results, malformed lines.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isCheckpoint, type SessionEvent } from '../../src/session/events';
import { TranscriptImportError } from '../../src/transcripts/common';
import { importCodexFile, importCodexTranscript } from '../../src/transcripts/codex';
import { Session } from '../../src/session/session';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { CODEX_REAL, eventsOf, fixture, median, usageTracking } from '../helpers/transcripts';

const records = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { type: string; payload: Record<string, any> });

async function imported(name: string) {
  const session = Session.inMemory(name);
  const report = await importCodexFile(session, fixture(`codex/${name}.jsonl`));
  return { session, report };
}

describe('Codex import: the real rollout', () => {
  const file = records(CODEX_REAL);
  const calls = file.filter((r) => r.type === 'response_item' && r.payload.type === 'function_call').map((r) => r.payload.call_id as string);
  const failed = file
    .filter((r) => r.type === 'response_item' && r.payload.type === 'function_call_output')
    .filter((r) => {
      try {
        return JSON.parse(r.payload.output).metadata?.exit_code !== 0;
      } catch {
        return false;
      }
    })
    .map((r) => r.payload.call_id as string);
  // Distinct usage reports: Codex repeats each one with rate-limit updates.
  const reports = [
    ...new Set(
      file
        .filter((r) => r.type === 'event_msg' && r.payload.type === 'token_count' && r.payload.info)
        .map((r) => JSON.stringify(r.payload.info.total_token_usage)),
    ),
  ];
  const session = Session.inMemory('codex');
  const report = importCodexTranscript(session, readFileSync(CODEX_REAL, 'utf8'));

  it('imports every call with its output, errors marked by exit code, reasoning summaries kept', () => {
    expect(calls).toHaveLength(39);
    expect(report).toMatchObject({ harness: 'codex', lines: 279, toolCalls: 39, toolResults: 39, synthesizedResults: 0, compactions: 0, userMessages: 2 });
    const imported = eventsOf(session, 'assistant/message').flatMap((e) =>
      e.data.content.filter((b) => b.type === 'tool-call').map((b) => (b as { id: string }).id),
    );
    expect(imported).toEqual(calls);
    expect(
      eventsOf(session, 'tool/result')
        .filter((r) => r.data.isError)
        .map((r) => r.data.callId),
    ).toEqual(failed);
    expect(failed).toHaveLength(3);
    expect(eventsOf(session, 'assistant/message').filter((e) => e.data.content.some((b) => b.type === 'reasoning')).length).toBeGreaterThan(30);
    expect(openAIMessageProblems(session.deriveMessages())).toEqual([]);
    // The UI's copies of the history (user_message, agent_reasoning) are not imported twice.
    expect(report.notSent).toMatchObject({ 'event_msg:user_message': 1, 'event_msg:agent_reasoning': 39, turn_context: 40 });
  });

  it('anchors each step on its token_count report, and the meter tracks them within 5% (median)', () => {
    const replies = eventsOf(session, 'assistant/message');
    expect(replies.every((r) => r.data.usage)).toBe(true);
    expect(reports).toHaveLength(replies.length);
    const firstInfo = file.find((r) => r.payload.type === 'token_count' && r.payload.info)!.payload.info.last_token_usage;
    expect(replies[0]!.data.usage).toMatchObject({
      promptTokens: firstInfo.input_tokens,
      cachedTokens: firstInfo.cached_input_tokens,
      completionTokens: firstInfo.output_tokens,
    });
    expect(replies[0]!.data.model).toBe('gpt-5.1-codex');
    expect(replies[0]!.data.provider).toBe('openai');
    const rows = usageTracking(session);
    const err = median(rows.map((r) => Math.abs(r.predicted - r.actual) / r.actual));
    console.log(`codex usage tracking: ${rows.length} reports, median error ${(100 * err).toFixed(2)}%`);
    expect(err).toBeLessThan(0.05);
  });
});

describe('Codex import: edge cases', () => {
  it('custom tools: a custom_tool_call keeps its freeform input byte for byte, a local_shell_call its action', async () => {
    const { session, report } = await imported('custom-tools');
    const calls = eventsOf(session, 'assistant/message').flatMap((e) => e.data.content.filter((b) => b.type === 'tool-call'));
    expect(calls[0]).toMatchObject({
      id: 'call_patch',
      name: 'apply_patch',
      arguments: '*** Begin Patch\n*** Update File: a.txt\n@@\n-old\n+new\n*** End Patch\n',
    });
    expect(calls[1]).toMatchObject({ id: 'call_sh', name: 'local_shell', arguments: JSON.stringify({ type: 'exec', command: ['cat', 'a.txt'] }) });
    expect(eventsOf(session, 'tool/result').map((r) => r.data.callId)).toEqual(['call_patch', 'call_sh']);
    // environment context and prompt: two user messages of one turn
    expect(report).toMatchObject({ turns: 1, userMessages: 2, assistantMessages: 3 });
    expect(eventsOf(session, 'assistant/message').map((e) => e.data.usage?.promptTokens)).toEqual([5000, 5100, 5200]);
    expect(openAIMessageProblems(session.deriveMessages())).toEqual([]);
  });

  it('encrypted compaction: a checkpoint that keeps the replacement history and says the summary text is not available', async () => {
    const { session, report } = await imported('encrypted-compaction');
    expect(report).toMatchObject({ compactions: 1, summariesUnavailable: 1 });
    const cp = session.events().find(isCheckpoint) as SessionEvent<'user/message'>;
    expect(cp.data.content[0]).toEqual({ type: 'text', text: 'Find every TODO in src.' });
    expect(JSON.stringify(cp.data.content[1])).toMatch(/encrypted.*not available/);
    const messages = session.deriveMessages();
    expect(messages.map((m) => m.role)).toEqual(['user', 'user', 'assistant']);
    expect(messages.at(-1)).toMatchObject({ content: 'Fixed.' });
    expect(report.notSent['event_msg:context_compacted']).toBe(1);
    expect(openAIMessageProblems(messages)).toEqual([]);
  });

  it('a compaction with a readable summary (no replacement_history) is a checkpoint holding it', async () => {
    const { session, report } = await imported('compaction-summary');
    expect(report).toMatchObject({ compactions: 1, summariesUnavailable: 0 });
    expect(eventsOf(session, 'compaction/summary')[0]!.data.summary).toBe('The user asked how the build works; it runs tsup then vitest.');
    expect(session.deriveMessages().map((m) => m.content)).toEqual([
      'The user asked how the build works; it runs tsup then vitest.',
      'And the lint?',
      'eslint.',
    ]);
  });

  it('images and errors: an input_image is kept, a non-zero exit code marks the result as an error', async () => {
    const { session } = await imported('images-errors');
    expect(eventsOf(session, 'user/message')[0]!.data.content[1]).toEqual({ type: 'image', url: expect.stringMatching(/^data:image\/png;base64,/) });
    expect(eventsOf(session, 'tool/result')[0]!.data.isError).toBe(true);
  });

  it('missing results: a call of an aborted turn is answered with an error result', async () => {
    const { session, report } = await imported('missing-result');
    expect(report.synthesizedResults).toBe(1);
    expect(eventsOf(session, 'tool/result')[0]!.data).toMatchObject({ callId: 'call_t', isError: true });
    expect(report.turns).toBe(2);
    expect(openAIMessageProblems(session.deriveMessages())).toEqual([]);
  });

  it("early Codex versions' layout (a header, bare response items, state lines) imports the same way", async () => {
    const { session, report } = await imported('early-layout');
    expect(session.deriveMessages().map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(report).toMatchObject({ userMessages: 1, toolCalls: 1, toolResults: 1, assistantMessages: 2 });
    expect(report.notSent).toMatchObject({ session_meta: 1, state: 2 });
  });

  it('malformed input: a typed error naming the file, the line and what was expected; nothing written', async () => {
    const target = Session.inMemory('target');
    const path = fixture('codex/malformed.jsonl');
    const err = await importCodexFile(target, path).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TranscriptImportError);
    expect(err).toMatchObject({ code: 'import', line: 4, file: path });
    expect((err as Error).message).toMatch(/line 4: a response_item record without its payload object; expected a Codex rollout record/);
    expect(target.length).toBe(0);
    expect(() => importCodexTranscript(target, '{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}\n')).toThrow(/none of its 1 lines is a message/);
  });
});
