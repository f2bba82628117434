/** Other harnesses' sessions in: one reader per format, and the detection that picks one. */
export { importPiTranscript, importPiFile, PiImportError, type PiImportReport, type PiImportOptions } from './pi';
export { importClaudeCodeTranscript, importClaudeCodeFile, type TranscriptImportOptions } from './claude-code';
export { importCodexTranscript, importCodexFile } from './codex';
export { importGeminiTranscript, importGeminiFile } from './gemini-cli';
export { importTranscript, importTranscriptFile } from './import';
export { detectTranscriptFormat, describeUnread, type TranscriptFormat, type Detection, type DocumentKind } from './detect';
export { TranscriptImportError, type TranscriptImportReport, type TranscriptHarness } from './common';
