/**
 * Format detection: each format is recognised by its own records, a file that is none of them
 * is claimed by none, and the importers refuse a non-empty file that yields no message.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { detectTranscriptFormat } from '../../src/transcripts/detect';
import { importTranscriptFile } from '../../src/transcripts/import';
import { TranscriptImportError } from '../../src/transcripts/common';
import { importPiTranscript, PiImportError } from '../../src/transcripts/pi';
import { Session } from '../../src/session/session';
import { findPiData } from '../helpers/pi-data';
import { CLAUDE_REAL, CODEX_REAL, fixture } from '../helpers/transcripts';

const detect = (path: string) => detectTranscriptFormat(readFileSync(path, 'utf8')).format;

describe('transcript format detection', () => {
  it('recognises each harness by its own records, real files and hand-made ones', () => {
    expect(detect(findPiData().path)).toBe('pi');
    expect(detect(fixture('pi-tree-compaction.jsonl'))).toBe('pi');
    expect(detect(fixture('pi-linear-compaction.jsonl'))).toBe('pi');
    expect(detect(CLAUDE_REAL)).toBe('claude-code');
    for (const f of ['branches', 'split-response', 'missing-result', 'compaction', 'images-errors', 'progress-and-repeats'])
      expect(detect(fixture(`claude-code/${f}.jsonl`))).toBe('claude-code');
    expect(detect(CODEX_REAL)).toBe('codex');
    for (const f of ['custom-tools', 'encrypted-compaction', 'compaction-summary', 'images-errors', 'missing-result', 'early-layout'])
      expect(detect(fixture(`codex/${f}.jsonl`))).toBe('codex');
  });

  it('recognises an xcompact session log', () => {
    const s = Session.inMemory();
    s.append({ type: 'turn/start', data: { turn: 0 } });
    s.append({ type: 'user/message', data: { content: [{ type: 'text', text: 'hi' }] }, surfaceOp: 'append' });
    expect(
      detectTranscriptFormat(
        s
          .events()
          .map((e) => JSON.stringify(e))
          .join('\n'),
      ).format,
    ).toBe('xcompact');
  });

  it('claims no format for a foreign JSONL whose lines look like pi entries, or for records of no conversation', () => {
    expect(detect(fixture('foreign/chat-log.jsonl'))).toBeUndefined();
    expect(detectTranscriptFormat('{"type":"session","id":"x","timestamp":"t"}\n').format).toBeUndefined(); // a pi header and nothing said
    expect(detectTranscriptFormat('{"a":1}\n{"b":2}\n').format).toBeUndefined();
    // A majority of foreign lines is not rescued by one line that happens to fit.
    const mostlyForeign = [
      '{"type":"message","role":"user","content":"x"}',
      '{"type":"message","role":"user","content":"y"}',
      '{"type":"message","message":{"role":"user","content":"z"}}',
    ].join('\n');
    expect(detectTranscriptFormat(mostlyForeign).format).toBeUndefined();
  });

  it('the pi importer itself refuses a foreign file instead of importing it as 0 events, leaving the target untouched', () => {
    const target = Session.inMemory();
    expect(() => importPiTranscript(target, readFileSync(fixture('foreign/chat-log.jsonl'), 'utf8'))).toThrow(PiImportError);
    expect(() => importPiTranscript(target, readFileSync(fixture('foreign/chat-log.jsonl'), 'utf8'))).toThrow(
      /none of its 3 lines is a message pi sent .*"message:undefined":3/,
    );
    expect(target.length).toBe(0);
  });

  it('importTranscriptFile picks the importer by format and refuses a foreign file naming the formats tried', async () => {
    const s = Session.inMemory();
    const report = await importTranscriptFile(s, fixture('codex/custom-tools.jsonl'));
    expect(report.harness).toBe('codex');
    const target = Session.inMemory();
    const err = await importTranscriptFile(target, fixture('foreign/chat-log.jsonl')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TranscriptImportError);
    expect((err as Error).message).toMatch(
      /chat-log\.jsonl: not a transcript xcompact reads; tried .*pi transcript .*Claude Code session .*Codex rollout .*Gemini CLI session .*none describes its 3 records/,
    );
    expect(target.length).toBe(0);
  });
});
