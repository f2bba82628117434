/**
 * `xcompact inspect <session> --recall QUERY`: searches what the session's checkpoints and
 * prunes took off its surface, as the recall tool does for the model (the same index and the
 * same answer). QUERY is text, `/a regular expression/`, or a handle (`cp-N`, `pr-N`). Read-only.
 */
import { runRecall, type RecallAnswer } from '../services/recall';
import type { Session } from '../session/session';
import { CliError } from './errors';
import { detectFormat, loadSessionReadOnly, openPostgresSession, postgresRef, readInput } from './load';

export interface InspectRecallOptions {
  recall: string;
  /** Answer budget in tokens (the tool's maxTokens). */
  recallTokens?: number;
  json?: boolean;
  store?: string;
}

/** The tool's arguments for a command-line query. */
export function recallArgs(query: string, maxTokens: number | undefined): Record<string, unknown> {
  const budget = maxTokens === undefined ? {} : { maxTokens };
  if (/^\s*(cp|pr)-\d+\s*$/i.test(query)) return { handle: query.trim(), ...budget };
  const regex = /^\/(.+)\/$/s.exec(query);
  return regex ? { query: regex[1], regex: true, ...budget } : { query, ...budget };
}

function answer(session: Session, options: InspectRecallOptions): RecallAnswer {
  const out = runRecall(session, recallArgs(options.recall, options.recallTokens));
  // A query the tool refuses is the user's error: exit code 2, the tool's own explanation.
  if (out.isError) throw new CliError(out.text.replace(/^recall error: /, 'inspect --recall: '), 2);
  return out;
}

export async function runInspectRecall(file: string, options: InspectRecallOptions, out: NodeJS.WriteStream = process.stdout): Promise<RecallAnswer> {
  const write = (a: RecallAnswer) => out.write(options.json ? `${JSON.stringify(a, null, 2)}\n` : `${a.text}\n`);
  const pg = postgresRef(file, options.store);
  if (pg) {
    const { session, close } = await openPostgresSession(pg, true);
    try {
      const a = answer(session, options);
      write(a);
      return a;
    } finally {
      await close();
    }
  }
  const bytes = await readInput(file);
  const format = detectFormat(file, bytes);
  if (format === 'messages') throw new CliError(`${file} is a .json file: --recall searches session JSONL files (xcompact or pi).`, 2);
  const { session } = await loadSessionReadOnly(file, bytes, format);
  const a = answer(session, options);
  write(a);
  return a;
}
