/**
 * `xcompact compact <file>`: one manual compaction (the `/compact` of docs/spec.md#9-manual-compaction-compact) of a stored
 * session or of an OpenAI chat-messages file, written to a new file. The input's bytes are
 * never changed unless --in-place, and then only appended to (the log is append-only).
 */
import { rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import OpenAI, { APIConnectionError, AuthenticationError, NotFoundError, PermissionDeniedError } from 'openai';
import { CompactionError, createCompactionEngine } from '../engine/facade';
import { Session } from '../session/session';
import { JsonlStore } from '../session/stores/jsonl';
import { checkSessionId, type LoadReport } from '../session/store';
import { snapshotPath } from '../session/stores/jsonl-snapshot';
import { modelInfoFor, parseConfig } from '../services/config';
import { SummarizerError, type Summarizer } from '../services/summarizing';
import { ExtractiveSummarizer } from '../services/summarizing';
import { OpenAISummarizer } from '../services/summarizing';
import { loadConfig } from './config-file';
import { CliError } from './errors';
import {
  detectFormat,
  HARNESS_NAMES,
  importHarnessTranscript,
  jsonErrorLocation,
  loadSessionReadOnly,
  openPostgresSession,
  parseRoute,
  postgresRef,
  readInput,
  sessionAsJsonl,
  type OpenedPostgresSession,
  type PostgresRef,
} from './load';
import { importChatMessages, parseMessagesFile } from './messages';
import { fmt, pct, seconds, type CliEnv } from './ui';

export interface CompactOptions {
  summarizer: 'openai' | 'extractive';
  baseUrl?: string;
  model?: string;
  apiKeyEnv: string;
  contextWindow?: number;
  maxTokens: number;
  focus?: string;
  output?: string;
  inPlace?: boolean;
  force?: boolean;
  recover?: boolean;
  config?: string;
  /** A PostgreSQL url: `file` is then a session id in it. */
  store?: string;
  /** Where OPENAI_BASE_URL and the API key (`apiKeyEnv`) are read; default process.env. */
  env?: CliEnv;
  /** `--no-color` (false): accepted like inspect's; the report is plain text either way. */
  color?: boolean;
}

export interface CompactResult {
  output: string;
  compacted: boolean;
  tokensBefore: number;
  tokensAfter: number;
  shadowedNodes: number;
}

const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

export async function runCompact(file: string, options: CompactOptions, out: NodeJS.WritableStream = process.stdout): Promise<CompactResult> {
  // A PostgreSQL session is read without a lease into the JSONL a file would hold. --in-place
  // takes the writer lease first, so every check runs on exactly the events it appends after:
  // a copy read before the lease would miss what another writer appended in between.
  const pg = postgresRef(file, options.store);
  const writer = pg && options.inPlace ? await openPostgresSession(pg, false) : undefined;
  try {
    return await compactInput(file, options, out, pg, writer);
  } finally {
    // Already closed on every path that got that far; this covers the checks that throw before.
    await writer?.close().catch(() => undefined);
  }
}

async function compactInput(
  file: string,
  options: CompactOptions,
  out: NodeJS.WritableStream,
  pg: PostgresRef | undefined,
  writer: OpenedPostgresSession | undefined,
): Promise<CompactResult> {
  const bytes = writer ? postgresAsJsonl(pg!, writer.session) : pg ? await readPostgres(pg) : await readInput(file);
  const format = pg ? 'xcompact' : detectFormat(file, bytes);
  const config = loadConfig(options.config, pg ? join(process.cwd(), pg.id) : file);
  if (options.inPlace && options.output) throw new CliError('--in-place and --output exclude each other: pick one.', 2);
  if (options.inPlace && format !== 'xcompact') {
    // --in-place only ever appends to an xcompact log: anything else would be replaced, not appended to.
    const what =
      format !== 'messages'
        ? `a ${HARNESS_NAMES[format]} (the result is an xcompact session)`
        : 'a chat-messages JSON file (its messages would be overwritten)';
    const ext = format === 'messages' ? 'json' : 'jsonl';
    throw new CliError(
      `${file} is ${what}: --in-place only appends to an xcompact session log (JSONL); drop --in-place to write <name>.compacted.${ext} (or pass --output).`,
      2,
    );
  }

  // ---- where the result goes
  const input = pg ? pg.label : resolve(file);
  const stem = pg ? pg.id : basename(input).replace(/\.(jsonl|json)$/i, '');
  const output = options.inPlace
    ? input
    : resolve(options.output ?? join(pg ? process.cwd() : dirname(input), `${stem}.compacted.${format === 'messages' ? 'json' : 'jsonl'}`));
  if (!options.inPlace) {
    if (output === input)
      throw new CliError(`--output ${options.output} is the input file: pass --in-place to compact the input itself, or choose another --output.`, 2);
    if (existsSync(output) && !options.force) throw new CliError(`${output} already exists: pass --force to overwrite it, or choose another --output.`, 2);
    if (format !== 'messages' && !output.endsWith('.jsonl')) throw new CliError(`--output ${output} must end in .jsonl: the result is a session log.`, 2);
  } else if (!pg) {
    // The store reopens <dir>/<id>.jsonl: any other name would compact a different (new, empty) file.
    const name = basename(input);
    const id = name.endsWith('.jsonl') ? name.slice(0, -'.jsonl'.length) : undefined;
    let usable = id !== undefined && id !== '';
    if (usable) {
      try {
        checkSessionId(id!);
      } catch {
        usable = false;
      }
    }
    if (!usable) {
      throw new CliError(
        `--in-place needs the session file named exactly <id>.jsonl (lower-case .jsonl, an id of letters, digits, '.', '_' or '-'), and "${name}" is not: rename it (e.g. to ${stem.replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[^A-Za-z0-9]+/, '') || 'session'}.jsonl) or drop --in-place to write a new file.`,
        2,
      );
    }
  }

  // ---- the summarizer and the model it runs on
  const summarizationRoute = options.model ? parseRoute(options.model) : undefined;
  const models: Record<string, { contextWindow: number }> = {};
  let summarizer: Summarizer;
  let lastSummarizerError: unknown;
  let baseURL = '';
  if (options.summarizer === 'openai') {
    baseURL = options.baseUrl ?? (options.env ?? process.env).OPENAI_BASE_URL ?? DEFAULT_BASE_URL;
    let url: URL;
    try {
      url = new URL(baseURL);
    } catch {
      throw new CliError(`--base-url "${baseURL}" is not a URL: pass e.g. https://api.deepseek.com/v1 or http://127.0.0.1:8080/v1.`, 2);
    }
    const apiKey = (options.env ?? process.env)[options.apiKeyEnv];
    const local = ['127.0.0.1', 'localhost', '[::1]', '::1'].includes(url.hostname);
    if (!apiKey && !local) {
      throw new CliError(
        `no API key: the environment variable ${options.apiKeyEnv} is not set; export it, name another with --api-key-env, or use --summarizer extractive (no network).`,
        2,
      );
    }
    const client = new OpenAI({ baseURL, apiKey: apiKey || 'not-needed', maxRetries: 0, timeout: 120_000 });
    const inner = new OpenAISummarizer({ client });
    summarizer = {
      name: inner.name,
      async summarize(request, signal) {
        try {
          return await inner.summarize(request, signal);
        } catch (err) {
          lastSummarizerError = err;
          throw err;
        }
      },
    };
  } else {
    summarizer = new ExtractiveSummarizer();
  }

  // ---- the conversation, read-only: every check runs before anything is written
  let probe: Session;
  let messagesFile: ReturnType<typeof parseMessagesFile> | undefined;
  let torn: LoadReport['tornTail'];
  if (format === 'messages') {
    const text = bytes.toString('utf8');
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      const at = jsonErrorLocation(text, err as Error);
      throw new CliError(`${file}${at ? `:${at.line}:${at.column}` : ''}: not valid JSON (${(err as Error).message}); fix the file and run again.`);
    }
    messagesFile = parseMessagesFile(file, value);
    // The conversation's own model (bare OpenAI names are taken as openai/<name>); else the summarizer's.
    const route = (messagesFile.model ? parseRoute(messagesFile.model) : undefined) ?? summarizationRoute ?? { provider: 'unknown', model: 'unknown' };
    probe = Session.inMemory('messages');
    importChatMessages(probe, file, messagesFile, route);
  } else {
    // A bad line is reported against the input, not a copy.
    probe = writer ? writer.session : (await loadSessionReadOnly(pg ? `${pg.id}.jsonl` : file, bytes, format)).session;
    torn = probe.loadReport.tornTail;
  }
  const sessionId = format === 'messages' ? undefined : pg && options.inPlace ? pg.id : sessionIdFor(output);

  if (probe.needsRecovery && !options.recover) {
    const why = [
      probe.openTurn !== null ? `turn ${probe.openTurn} is open` : undefined,
      probe.surface.pendingCalls().length ? `${probe.surface.pendingCalls().length} tool call(s) have no result` : undefined,
      probe.lock.held ? `an orphan compaction/start (seq ${probe.lock.startSeq}) holds the lock` : undefined,
    ]
      .filter(Boolean)
      .join(', ');
    throw new CliError(`${file} ends mid-flight (${why}), as a crashed agent leaves it; pass --recover to close it as interrupted before compacting.`, 2);
  }

  // The summarization target and its window (recovery adds no request header, so the replay's is final).
  const header = probe.latestHeader;
  const target = summarizationRoute ?? (header ? { provider: header.data.provider, model: header.data.model } : undefined);
  if (!target || (options.summarizer === 'openai' && target.provider === 'unknown')) {
    throw new CliError(`${file} names no model, so there is none to summarize with: pass --model provider/model (e.g. openai/gpt-4o-mini).`, 2);
  }
  const key = `${target.provider}/${target.model}`;
  if (options.contextWindow) models[key] = { contextWindow: options.contextWindow };
  const engineConfig = {
    ...config.input,
    maxTokens: options.maxTokens,
    ...(summarizationRoute ? { summarizationProvider: summarizationRoute.provider, summarizationModel: summarizationRoute.model } : {}),
  };
  // The configuration the engine will parse (the same merge as createCompactionEngine's `models`).
  const resolvedConfig = parseConfig({ ...engineConfig, models: { ...(engineConfig.models ?? {}), ...models } });
  if (options.summarizer === 'openai' && modelInfoFor(resolvedConfig, target.provider, target.model) === undefined) {
    throw new CliError(
      `unknown model ${key}: its context window is not known, and the summary request must fit it; pass --context-window <tokens> (or --config with models["${key}"]).`,
      2,
    );
  }

  // ---- the session to write: only now is anything written
  let session: Session;
  // What releases the session: a PostgreSQL writer also ends its store's pool.
  let closeSession = () => session.close();
  let cleanupOutput = false;
  if (format === 'messages') {
    session = probe;
  } else if (format !== 'xcompact') {
    await removeOutput(output);
    session = await Session.open(new JsonlStore(dirname(output), { sync: true }), sessionId!);
    cleanupOutput = true;
    try {
      importHarnessTranscript(file, bytes, format, session);
    } catch (err) {
      await session.close().catch(() => undefined);
      await removeOutput(output);
      throw err;
    }
  } else {
    if (!options.inPlace) {
      // The copy ends at the last complete line: a torn tail (a crash mid-write) is not carried over.
      await writeFile(output, bytes.subarray(0, bytes.lastIndexOf(0x0a) + 1));
      cleanupOutput = true;
      if (torn) out.write(`note: ${file} ends with a torn line ${torn.line} (${torn.bytes} bytes, a crash mid-write); it is not part of the output.\n`);
    }
    try {
      if (writer) {
        session = writer.session;
        closeSession = () => writer.close();
      } else {
        session = await Session.open(new JsonlStore(dirname(output)), sessionId!);
      }
    } catch (err) {
      if (cleanupOutput) await removeOutput(output);
      throw err;
    }
  }

  const fail = async (err: unknown): Promise<never> => {
    await closeSession().catch(() => undefined);
    if (cleanupOutput) await removeOutput(output);
    throw err;
  };

  // ---- the engine. Everything from here until the session is closed releases its lock on
  // failure: a measurement of a huge tool result that throws must not leave a `.lock` behind.
  let engine;
  let before;
  try {
    if (session.needsRecovery) session.recover();
    engine = createCompactionEngine({ session, summarizer, config: engineConfig, models });
    before = engine.measure();
  } catch (err) {
    return fail(err);
  }

  const started = Date.now();
  let record;
  try {
    record = await engine.compactNow(options.focus ? { focus: options.focus } : {});
  } catch (err) {
    engine.stop();
    return fail(explainCompactionError(err, lastSummarizerError, baseURL, key, options.apiKeyEnv));
  }
  engine.stop();
  const after = engine.measure();

  if (!record) {
    await closeSession();
    if (cleanupOutput) await removeOutput(output);
    out.write(
      `nothing to compact in ${file}: the newest message (or tool batch) is always kept, and what precedes it is too small to pay for a checkpoint; no output written.\n`,
    );
    return { output, compacted: false, tokensBefore: before.totalTokens, tokensAfter: after.totalTokens, shadowedNodes: 0 };
  }

  if (messagesFile) {
    const messages = [...session.deriveMessages()];
    // Everything but the messages is written back as it was (model, tools, other fields).
    const result = messagesFile.bare ? messages : { ...(JSON.parse(bytes.toString('utf8')) as Record<string, unknown>), messages };
    await writeFile(output, `${JSON.stringify(result, null, 2)}\n`);
  }
  await closeSession();

  const u = record.summarizer.usage;
  out.write(
    `compacted ${record.shadowedNodes} messages into 1 checkpoint: ${fmt(record.tokensBefore)} → ${fmt(record.tokensAfter)} tokens ` +
      `(−${pct(record.tokensBefore - record.tokensAfter, record.tokensBefore)}) in ${seconds(Date.now() - started)} with the ${summarizer.name} summarizer` +
      `${record.summarizer.model ? ` (${record.summarizer.provider ? `${record.summarizer.provider}/` : ''}${record.summarizer.model})` : ''}` +
      `${u ? `, ${fmt(u.promptTokens)} prompt tokens (${pct(u.cachedTokens ?? 0, u.promptTokens)} cached)` : ''}\n` +
      `wrote ${output}${options.inPlace ? ' (appended in place)' : ''}\n`,
  );
  return { output, compacted: true, tokensBefore: record.tokensBefore, tokensAfter: record.tokensAfter, shadowedNodes: record.shadowedNodes };
}

/**
 * A result that is not kept goes with everything the store wrote beside it: closing the session
 * saves the meter's snapshot (<output>.prices), which must not outlive its log.
 */
async function removeOutput(output: string): Promise<void> {
  await rm(output, { force: true });
  await rm(snapshotPath(output), { force: true });
}

async function readPostgres(ref: PostgresRef): Promise<Buffer> {
  const opened = await openPostgresSession(ref, true);
  try {
    return postgresAsJsonl(ref, opened.session);
  } finally {
    await opened.close();
  }
}

function postgresAsJsonl(ref: PostgresRef, session: Session): Buffer {
  if (session.length === 0) throw new CliError(`${ref.label} is empty (no events): check the session id and the database.`);
  return sessionAsJsonl(session);
}

function sessionIdFor(output: string): string {
  const id = basename(output).replace(/\.jsonl$/i, '');
  try {
    checkSessionId(id);
  } catch {
    throw new CliError(
      `the session file name "${basename(output)}" is not usable: name it with letters, digits, '.', '_' or '-' and end it in .jsonl (e.g. --output my-session.compacted.jsonl).`,
      2,
    );
  }
  return id;
}

/** The summarizer's failure, in the words a user needs: which endpoint, what went wrong, what to do. */
function explainCompactionError(err: unknown, summarizerError: unknown, baseURL: string, model: string, apiKeyEnv: string): unknown {
  if (!(err instanceof CompactionError)) return err;
  const cause = summarizerError instanceof SummarizerError ? summarizerError.cause : undefined;
  if (cause instanceof APIConnectionError) {
    const code = errnoIn(cause);
    if (code === 'ECONNREFUSED')
      return new CliError(`cannot reach ${baseURL}: connection refused — is the server running? Check --base-url.`, 1, { cause: err });
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
      return new CliError(`cannot reach ${baseURL}: the host name does not resolve; check --base-url.`, 1, { cause: err });
    return new CliError(`cannot reach ${baseURL}: ${deepestMessage(cause)}${code ? ` (${code})` : ''}; check --base-url and your network.`, 1, { cause: err });
  }
  if (cause instanceof AuthenticationError || cause instanceof PermissionDeniedError) {
    return new CliError(
      `${baseURL} rejected the API key from $${apiKeyEnv} (${cause.status}): check the key, or name the right variable with --api-key-env.`,
      1,
      { cause: err },
    );
  }
  if (cause instanceof NotFoundError) {
    return new CliError(
      `${baseURL} answered 404 for model "${model.slice(model.indexOf('/') + 1)}": pass --model provider/model with a model this endpoint serves (and check --base-url ends in /v1).`,
      1,
      { cause: err },
    );
  }
  return new CliError(`compaction failed (${err.code}${err.causeCode ? `/${err.causeCode}` : ''}): ${err.message}`, 1, { cause: err });
}

function deepestMessage(err: unknown): string {
  let e: unknown = err;
  let message = '';
  for (let i = 0; i < 5 && e instanceof Error; i++) {
    message = e.message.replace(/\.$/, '');
    e = e.cause;
  }
  return message;
}

function errnoIn(err: unknown): string | undefined {
  let e: unknown = err;
  for (let i = 0; i < 5 && e; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
