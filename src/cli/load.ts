/**
 * Opening the files the CLI accepts, read-only: an xcompact session JSONL, a pi coding-agent
 * transcript (imported into an in-memory session), an OpenAI chat-messages JSON file, or a
 * session in PostgreSQL (`postgres://…/db#id`, or an id with `--store postgres://…`).
 * Every failure is a CliError naming the file (or server and session), the line when there is one, and the fix.
 */
import { basename } from 'node:path';
import { XcompactError } from '../errors';
import { FileReadError, readRegularFile } from '../regular-file';
import type { TranscriptImportReport } from '../transcripts/common';
import { describeUnread, detectTranscriptFormat, type TranscriptFormat } from '../transcripts/detect';
import type { PiImportReport } from '../transcripts/pi';
import { importPiTranscript } from '../transcripts/pi';
import { importTranscript } from '../transcripts/import';
import type { TranscriptImportOptions } from '../transcripts/claude-code';
import { Session } from '../session/session';
import { StoreError } from '../session/errors';
import { checkSessionId, type LogWriter, type SessionStore, type StoredLog } from '../session/store';
import { parseLogBytes } from '../session/stores/jsonl';
import { PostgresStore } from '../session/stores/postgres';
import { describeUrl, isPostgresUrl } from '../session/stores/postgres-connect';
import { CliError } from './errors';

export type FileFormat = TranscriptFormat | 'messages';
/** A transcript of another harness, imported into an in-memory session. */
export type HarnessFormat = Exclude<TranscriptFormat, 'xcompact'>;

export const HARNESS_NAMES: Record<HarnessFormat, string> = {
  pi: 'pi transcript',
  'claude-code': 'Claude Code session',
  codex: 'Codex rollout',
  'gemini-cli': 'Gemini CLI session',
};

/** A file's bytes: only a regular file within the size limit (a FIFO, socket, device or directory is refused at once). */
export async function readInput(file: string): Promise<Buffer> {
  try {
    return await readRegularFile(file);
  } catch (err) {
    if (!(err instanceof FileReadError)) throw err;
    const hint = err.reason === 'is-a-directory' ? " Pass the session's .jsonl file inside it." : '';
    throw new CliError(`${err.message}${hint}`, 1, { cause: err });
  }
}

/**
 * Decides the format from the content (transcripts/detect.ts): an xcompact session, a pi
 * transcript, a Claude Code session, a Codex rollout or a Gemini CLI session; a .json file
 * that is none of them is a chat-messages file (compact reads it). Any other file is refused
 * with what it is (a JSON document, records of no format read).
 */
export function detectFormat(file: string, bytes: Buffer): FileFormat {
  const text = bytes.toString('utf8');
  if (text.trim() === '') {
    throw new CliError(
      `${file} is empty: there is no session to read. Pass a session JSONL written by xcompact, or a pi, Claude Code, Codex or Gemini CLI transcript.`,
    );
  }
  const found = detectTranscriptFormat(text);
  if (found.format !== undefined) return found.format;
  if (found.document === 'chat-messages' || (file.toLowerCase().endsWith('.json') && found.document !== 'gemini-logs')) return 'messages';
  if (found.lines === 0 && found.badLine && !found.document) {
    throw new CliError(`${file}:${found.badLine.line}: ${found.badLine.reason}; expected one JSON record per line. The file was not changed.`);
  }
  throw new CliError(`${file}: ${describeUnread(found)}.${found.document ? '' : ' Pass one of those, or a .json file of chat messages.'}`);
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
  format: TranscriptFormat;
  pi?: PiImportReport;
  /** What the import did, for a transcript of another harness (pi included). */
  imported?: TranscriptImportReport;
}

/** Imports a harness's transcript into `session` (empty); a failure is a CliError naming the file. */
export function importHarnessTranscript(
  file: string,
  bytes: Buffer,
  format: HarnessFormat,
  session: Session,
  options: TranscriptImportOptions = {},
): { imported: TranscriptImportReport; pi?: PiImportReport } {
  try {
    if (format === 'pi') {
      const pi = importPiTranscript(session, bytes.toString('utf8'), options);
      const { format: _variant, ...counts } = pi;
      return { pi, imported: { harness: 'pi', ...counts, summariesUnavailable: 0 } };
    }
    return { imported: importTranscript(session, bytes.toString('utf8'), format, options) };
  } catch (err) {
    throw new CliError(
      `${file}: ${err instanceof Error ? err.message.replace(/\.$/, '') : String(err)}; the transcript could not be imported (the file was not changed).`,
      1,
      { cause: err },
    );
  }
}

/** Opens an xcompact session, or a transcript of another harness in memory; the file is only read. */
export async function loadSessionReadOnly(file: string, bytes: Buffer, format: TranscriptFormat): Promise<LoadedSession> {
  if (format !== 'xcompact') {
    const session = Session.inMemory(sessionIdOf(file));
    return { session, format, ...importHarnessTranscript(file, bytes, format, session) };
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

/** A session in PostgreSQL, as the CLI names it. */
export interface PostgresRef {
  url: string;
  id: string;
  /** `postgres://user@host:port/db#id`, without the password: for messages and reports. */
  label: string;
}

export const POSTGRES_FORM = 'postgres://user:password@host:5432/database#session-id (or the session id with --store postgres://…)';

/**
 * `postgres://…/db#id`, or a session id together with `--store postgres://…`; undefined when
 * the argument is a file and no --store was given.
 */
export function postgresRef(arg: string, store: string | undefined): PostgresRef | undefined {
  let url: string;
  let id: string;
  if (store !== undefined) {
    if (!isPostgresUrl(store)) throw new CliError(`--store "${store}" is not a postgres:// url: write it like postgres://user:password@host:5432/database.`, 2);
    if (isPostgresUrl(arg)) throw new CliError(`name the session once: either ${describeUrl(arg)}#id as the argument, or an id with --store; not both.`, 2);
    url = store;
    id = arg;
  } else {
    if (!isPostgresUrl(arg)) return undefined;
    const hash = arg.lastIndexOf('#');
    if (hash < 0 || hash === arg.length - 1) throw new CliError(`${describeUrl(arg)} names no session: add it after '#', as in ${POSTGRES_FORM}.`, 2);
    url = arg.slice(0, hash);
    id = decodeURIComponent(arg.slice(hash + 1));
  }
  try {
    checkSessionId(id);
  } catch (err) {
    throw new CliError(`${(err as Error).message} (the session id of ${describeUrl(url)})`, 2, { cause: err });
  }
  return { url, id, label: `${describeUrl(url)}#${id}` };
}

export interface OpenedPostgresSession {
  session: Session;
  /** Closes the session, then ends its store's pool. */
  close(): Promise<void>;
}

/**
 * Opens a PostgreSQL session: read-only takes no writer lease and writes nothing (inspect,
 * a compaction into a new file); a writer holds the lease until `close()`.
 */
export async function openPostgresSession(ref: PostgresRef, readOnly: boolean): Promise<OpenedPostgresSession> {
  const store = new PostgresStore({ url: ref.url, readOnly });
  try {
    const session = await Session.open(store, ref.id);
    return {
      session,
      async close() {
        try {
          await session.close();
        } finally {
          await store.close();
        }
      },
    };
  } catch (err) {
    await store.close();
    if (err instanceof StoreError) throw new CliError(`${err.message.replace(/\.$/, '')} (session ${ref.label}).`, 1, { cause: err });
    throw err;
  }
}

/** A session's events as the JSONL a JsonlStore would hold: a PostgreSQL session copied to a file. */
export function sessionAsJsonl(session: Session): Buffer {
  return Buffer.from(
    session
      .events()
      .map((e) => `${JSON.stringify(e)}\n`)
      .join(''),
    'utf8',
  );
}

/** The demo's session in PostgreSQL: a new one each run unless named, and never one that already has events. */
export async function openDemoPostgresSession(store: {
  url: string;
  session?: string | undefined;
}): Promise<{ session: Session; label: string; close(): Promise<void> }> {
  const ref = postgresRef(store.session ?? `demo-${new Date().toISOString().replace(/[:.]/g, '-')}`, store.url)!;
  const opened = await openPostgresSession(ref, false);
  if (opened.session.length > 0) {
    await opened.close();
    throw new CliError(
      `${ref.label} already holds ${opened.session.length} events: the demo starts a fresh session; pick another --session (or leave it out).`,
      2,
    );
  }
  return { session: opened.session, label: ref.label, close: opened.close };
}
