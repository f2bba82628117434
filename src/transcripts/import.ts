/**
 * One entry point for every harness's transcript: import a pi, Claude Code, Codex or Gemini CLI
 * file into a Session by the format's own importer, with one report shape for all.
 */
import { importClaudeCodeTranscript, type TranscriptImportOptions } from './claude-code';
import { TranscriptImportError, readTranscriptText, type TranscriptHarness, type TranscriptImportReport } from './common';
import { importCodexTranscript } from './codex';
import { importGeminiTranscript } from './gemini-cli';
import { describeUnread, detectTranscriptFormat } from './detect';
import { importPiTranscript, PiImportError } from './pi';
import type { Session } from '../session/session';

export function importTranscript(target: Session, text: string, harness: TranscriptHarness, options: TranscriptImportOptions = {}): TranscriptImportReport {
  if (harness === 'claude-code') return importClaudeCodeTranscript(target, text, options);
  if (harness === 'codex') return importCodexTranscript(target, text, options);
  if (harness === 'gemini-cli') return importGeminiTranscript(target, text, options);
  let pi;
  try {
    pi = importPiTranscript(target, text, options);
  } catch (err) {
    if (err instanceof PiImportError)
      throw new TranscriptImportError('pi', err.message.replace(/^pi transcript line \d+: /, ''), {
        ...(err.line === undefined ? {} : { line: err.line }),
        cause: err,
      });
    throw err;
  }
  const { format: _variant, ...counts } = pi;
  return { harness: 'pi', ...counts, summariesUnavailable: 0 };
}

/**
 * Reads a transcript file of any harness, recognising its format by its records. A file that is
 * none of them, or an xcompact session log (open those with `Session.open`), is refused.
 */
export async function importTranscriptFile(target: Session, path: string, options: TranscriptImportOptions = {}): Promise<TranscriptImportReport> {
  const text = await readTranscriptText('unknown', path);
  const found = detectTranscriptFormat(text);
  const format = found.format;
  if (format === undefined || format === 'xcompact') {
    throw new TranscriptImportError(
      'unknown',
      format === 'xcompact'
        ? 'this is an xcompact session log, not a harness transcript: open it with Session.open(new JsonlStore(dir), id).'
        : `${describeUnread(found)}.`,
      { file: path },
    );
  }
  try {
    return importTranscript(target, text, format, options);
  } catch (err) {
    throw err instanceof TranscriptImportError ? err.inFile(path) : err;
  }
}
