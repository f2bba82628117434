/**
 * Gemini CLI sessions in: the JSON document (two real sessions), its JSONL layout with a
 * compression recorded as a rebuilt message list and a rewind, recognition by content (never
 * by file name), and files of other kinds named for what they are.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { detectTranscriptFormat, describeUnread, importGeminiTranscript, importTranscriptFile, TranscriptImportError } from '../../src/transcripts';
import { isCheckpoint } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { eventsOf, fixture } from '../helpers/transcripts';

const TWO_TURNS = fixture('gemini-cli/session-two-turns.json');
const TOOLS = fixture('gemini-cli/session-tools.json');

describe('Gemini CLI sessions', () => {
  it('are recognised by their content, the .json extension or not', () => {
    const text = readFileSync(TOOLS, 'utf8');
    expect(detectTranscriptFormat(text).format).toBe('gemini-cli');
    // The same document on one line, as a file named .jsonl would hold it.
    expect(detectTranscriptFormat(JSON.stringify(JSON.parse(text))).format).toBe('gemini-cli');
  });

  it('import each reply as a step with its usage, its calls and their recorded results; the CLI notices are not sent', async () => {
    const s = Session.inMemory('gemini');
    const report = await importTranscriptFile(s, TOOLS);
    expect(report.harness).toBe('gemini-cli');
    const doc = JSON.parse(readFileSync(TOOLS, 'utf8')) as { messages: Array<{ type: string; toolCalls?: unknown[]; tokens?: { input: number } }> };
    const replies = doc.messages.filter((m) => m.type === 'gemini');
    expect(report.assistantMessages).toBe(replies.length);
    expect(report.toolCalls).toBe(replies.reduce((n, m) => n + (m.toolCalls?.length ?? 0), 0));
    expect(report.toolResults).toBe(report.toolCalls);
    expect(report.synthesizedResults).toBe(0);
    expect(report.notSent['info notice']).toBe(doc.messages.filter((m) => m.type === 'info').length);
    const assistants = eventsOf(s, 'assistant/message');
    // A reply whose tokens are all 0 carries no usage; the others their prompt as Gemini counted it.
    expect(assistants.map((a) => a.data.usage?.promptTokens)).toEqual(replies.map((m) => (m.tokens && m.tokens.input > 0 ? m.tokens.input : undefined)));
    expect(eventsOf(s, 'request/header').every((h) => h.data.provider === 'google' && h.data.model === 'gemini-2.5-flash')).toBe(true);
    const results = eventsOf(s, 'tool/result');
    expect(results.every((r) => r.data.toolName !== undefined && r.data.content.some((c) => c.type === 'text' && c.text !== ''))).toBe(true);
    expect(openAIMessageProblems(s.deriveMessages())).toEqual([]);
  });

  it('a two-turn session: two turns, a read and a write', async () => {
    const s = Session.inMemory('gemini');
    const report = await importTranscriptFile(s, TWO_TURNS);
    expect(report).toMatchObject({ harness: 'gemini-cli', turns: 2, userMessages: 2, toolCalls: 2, toolResults: 2 });
    expect(eventsOf(s, 'tool/result').map((r) => r.data.toolName)).toEqual(['read_file', 'write_file']);
  });

  it('the JSONL layout: the last copy of a message stands, a rewind takes messages back, a rebuilt list with a state snapshot is a checkpoint keeping what it kept', () => {
    const m = (id: string, type: string, content: unknown, extra: Record<string, unknown> = {}) =>
      JSON.stringify({ id, timestamp: '2026-01-01T00:00:00Z', type, content, ...extra });
    const tokens = (input: number) => ({ input, output: 10, cached: 0, thoughts: 0, tool: 0, total: input + 10 });
    const call = (id: string, output: string) => ({
      id,
      name: 'run_shell_command',
      args: { command: `echo ${id}` },
      status: 'success',
      timestamp: 't',
      result: [{ functionResponse: { id, name: 'run_shell_command', response: { output } } }],
    });
    const lines = [
      JSON.stringify({ sessionId: 's', projectHash: 'h', startTime: 't', lastUpdated: 't', kind: 'main' }),
      m('u1', 'user', [{ text: 'first task: list the files' }]),
      m('g1', 'gemini', '', { model: 'gemini-2.5-pro' }),
      // Written again with its calls and tokens: the last copy stands.
      m('g1', 'gemini', '', { model: 'gemini-2.5-pro', toolCalls: [call('c1', 'a.txt b.txt')], tokens: tokens(1000) }),
      m('g2', 'gemini', 'Two files.', { model: 'gemini-2.5-pro', tokens: tokens(1100) }),
      m('u2', 'user', [{ text: 'a prompt taken back' }]),
      JSON.stringify({ $rewindTo: 'u2' }),
      m('u3', 'user', [{ text: 'second task: count the lines' }]),
      m('g3', 'gemini', 'Ten lines.', { model: 'gemini-2.5-pro', tokens: tokens(1200) }),
      // Compression: the history before u3 replaced by a snapshot, u3 and g3 kept.
      JSON.stringify({
        $set: {
          messages: [
            JSON.parse(m('x1', 'user', [{ text: '<state_snapshot>\nlisted a.txt, b.txt\n</state_snapshot>' }])),
            JSON.parse(m('u3', 'user', [{ text: 'second task: count the lines' }])),
            JSON.parse(m('g3', 'gemini', 'Ten lines.', { model: 'gemini-2.5-pro', tokens: tokens(1200) })),
          ],
        },
      }),
      m('u4', 'user', [{ text: 'third task' }]),
      m('g4', 'gemini', 'Done.', { model: 'gemini-2.5-pro', tokens: tokens(500) }),
    ];
    const text = `${lines.join('\n')}\n`;
    expect(detectTranscriptFormat(text).format).toBe('gemini-cli');
    const s = Session.inMemory('gemini-jsonl');
    const report = importGeminiTranscript(s, text);
    expect(report.notSent['messages taken back ($rewindTo)']).toBe(1);
    expect(report.compactions).toBe(1);
    expect(report.partialCompactions).toBe(1);
    const sent = s.deriveMessages().map((x) => (typeof x.content === 'string' ? x.content : JSON.stringify(x.content)));
    expect(sent.some((t) => t.includes('a prompt taken back'))).toBe(false);
    expect(sent.some((t) => t.includes('first task'))).toBe(false);
    expect(sent.findIndex((t) => t.includes('<state_snapshot>'))).toBeLessThan(sent.findIndex((t) => t.includes('second task')));
    expect(sent.some((t) => t.includes('third task'))).toBe(true);
    expect(s.events().filter(isCheckpoint)).toHaveLength(1);
    expect(eventsOf(s, 'assistant/message')[0]!.data.content.some((b) => b.type === 'tool-call')).toBe(true);
  });

  it('a malformed session is a TranscriptImportError naming the line, and nothing is written', () => {
    const target = Session.inMemory('gemini-bad');
    const text = `${JSON.stringify({ sessionId: 's', projectHash: 'h' })}\n${JSON.stringify({ id: 'g', timestamp: 't', type: 'gemini', content: '', toolCalls: [{ id: 'c', args: {} }] })}\n`;
    expect(() => importGeminiTranscript(target, text)).toThrow(TranscriptImportError);
    expect(() => importGeminiTranscript(target, text)).toThrow(/line 2: a tool call without its name/);
    expect(target.length).toBe(0);
  });
});

describe('files of a format not read are named for what they are', () => {
  it('a JSON document that is not JSONL, chat messages, and Gemini CLI prompt log', () => {
    const pretty = JSON.stringify({ title: 'notes', items: [1, 2] }, null, 2);
    expect(describeUnread(detectTranscriptFormat(pretty))).toMatch(/^this is a JSON document, not JSONL .*formats read are .*Gemini CLI session/);
    const chat = JSON.stringify([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
    ]);
    expect(describeUnread(detectTranscriptFormat(chat))).toMatch(/chat messages .*`xcompact compact` reads it/);
    const logs = JSON.stringify([{ sessionId: 's', messageId: 0, type: 'user', message: 'hi', timestamp: 't' }]);
    expect(describeUnread(detectTranscriptFormat(logs))).toMatch(/Gemini CLI's logs\.json .*pass a session file/);
  });
});
