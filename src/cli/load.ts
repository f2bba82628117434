/**
 * Opening the files the CLI accepts, read-only: an xcompact session JSONL, a pi coding-agent
 * transcript (imported into an in-memory session), or an OpenAI chat-messages JSON file.
 * Every failure is a CliError naming the file, the line when there is one, and the fix.
 */
import { readFile, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { XcompactError } from '../errors';
import { importPiTranscript, type PiImportReport } from '../session/import-pi';
import { Session } from '../session/session';
import { StoreError } from '../session/errors';
import type { LogWriter, SessionStore, StoredLog } from '../session/store';
import { parseLogBytes } from '../session/stores/jsonl';
import { CliError } from './errors';

export type FileFormat = 'xcompact' | 'pi' | 'messages';

export async function readInput(file: string): Promise<Buffer> {
  let info;
  try {
    info = await stat(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new CliError(`cannot read ${file}: no such file; check the path (relative paths start from ${process.cwd()}).`);
    if (code === 'EACCES') throw new CliError(`cannot read ${file}: permission denied; check the file's permissions.`);
    throw new CliError(`cannot read ${file}: ${(err as Error).message}.`, 1, { cause: err });
  }
  if (info.isDirectory()) throw new CliError(`cannot read ${file}: it is a directory; pass the session's .jsonl file inside it.`);
  return readFile(file);
}

/** Decides the format from the extension (.json = chat messages) and, for JSONL, from the first line. */
export function detectFormat(file: string, bytes: Buffer): FileFormat {
  if (file.toLowerCase().endsWith('.json')) return 'messages';
  const text = bytes.toString('utf8');
  const firstLine = text.split('\n').find((l) => l.trim() !== '');
  if (firstLine === undefined) {
    throw new CliError(`${file} is empty: there is no session to read. Pass a session JSONL written by xcompact (or a pi transcript).`);
  }
  let first: unknown;
  try {
    first = JSON.parse(firstLine);
  } catch (err) {
    const line = text.split('\n').indexOf(firstLine) + 1;
    throw new CliError(`${file}:${line}: not valid JSON (${(err as Error).message}); expected one JSON event per line. The file was not changed.`);
  }
  const rec = (typeof first === 'object' && first !== null ? first : {}) as Record<string, unknown>;
  if (typeof rec.seq === 'number' && typeof rec.type === 'string') return 'xcompact';
  if (rec.type === 'session' || rec.type === 'message' || rec.type === 'model_change') return 'pi';
  throw new CliError(
    `${file}: the first line is neither an xcompact session event ({"seq":0,"type":…}) nor a pi transcript entry ({"type":"session"|"message",…}); pass a session JSONL, or a .json file of chat messages.`,
  );
}

/**
 * Reads a JsonlStore file without its writer lock: JsonlStore.open always takes the lock (it
 * writes a `.lock` sidecar, and fails while the session's own process holds it), but
 * inspecting must work on a live session and must leave the directory as it found it. The
 * lines are read by the store's own rules (parseLogBytes): a last line without a newline is a
 * torn tail, reported and dropped; any other unparsable line is an error naming the line.
 */
export class ReadOnlyJsonlStore implements SessionStore {
  constructor(
    private readonly file: string,
    private readonly bytes: Buffer,
  ) {}

  async open(): Promise<StoredLog> {
    let parsed;
    try {
      parsed = parseLogBytes(this.bytes, this.file);
    } catch (err) {
      if (err instanceof StoreError) throw new CliError(`${err.message} Fix or remove that line.`, 1, { cause: err });
      throw err;
    }
    const { records, report } = parsed;
    const writer: LogWriter = {
      failure: undefined,
      append: () => {
        throw new CliError(`${this.file} is open read-only; nothing may be appended.`);
      },
      flush: async () => undefined,
      close: async () => undefined,
    };
    return { records, report, location: this.file, writer };
  }
}

export interface LoadedSession {
  session: Session;
  format: 'xcompact' | 'pi';
  pi?: PiImportReport;
}

/** Opens an xcompact session or a pi transcript in memory; the file is only read. */
export async function loadSessionReadOnly(file: string, bytes: Buffer, format: 'xcompact' | 'pi'): Promise<LoadedSession> {
  if (format === 'pi') {
    const session = Session.inMemory(sessionIdOf(file));
    try {
      const pi = importPiTranscript(session, bytes.toString('utf8'));
      return { session, format, pi };
    } catch (err) {
      throw new CliError(`${file}: ${err instanceof Error ? err.message : String(err)}; the transcript could not be imported.`, 1, { cause: err });
    }
  }
  try {
    const session = await Session.open(new ReadOnlyJsonlStore(file, bytes), sessionIdOf(file));
    return { session, format };
  } catch (err) {
    if (err instanceof CliError) throw err;
    if (err instanceof XcompactError) {
      throw new CliError(`${err.message.replace(/\.$/, '')}: the session breaks a log rule at that line; the file was not changed.`, 1, { cause: err });
    }
    throw err;
  }
}

export function sessionIdOf(file: string): string {
  return basename(file).replace(/\.jsonl$/i, '') || 'session';
}

/** "provider/model" → parts. A bare model name gets the fallback provider. */
export function parseRoute(value: string, fallbackProvider = 'openai'): { provider: string; model: string } {
  const slash = value.indexOf('/');
  if (slash < 0) return { provider: fallbackProvider, model: value };
  const provider = value.slice(0, slash);
  const model = value.slice(slash + 1);
  if (!provider || !model) throw new CliError(`--model "${value}" is not "provider/model": write it like deepseek/deepseek-chat or openai/gpt-4o-mini.`, 2);
  return { provider, model };
}

/** Line and column of a JSON.parse error position, when the engine reports one. */
export function jsonErrorLocation(text: string, err: Error): { line: number; column: number } | undefined {
  const lineCol = /line (\d+) column (\d+)/.exec(err.message);
  if (lineCol) return { line: Number(lineCol[1]), column: Number(lineCol[2]) };
  const pos = /position (\d+)/.exec(err.message);
  let offset: number;
  if (pos) offset = Number(pos[1]);
  else if (/Unexpected end of JSON input/.test(err.message)) offset = text.length;
  else return undefined;
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - before.lastIndexOf('\n');
  return { line, column };
}
