/**
 * What the transcript importers of other harnesses (Claude Code, Codex) share: the typed error
 * naming the line, the JSONL reader, the import report, and the builder that writes a
 * harness's conversation as xcompact events (turns, steps, request headers, results, the
 * harness's own compactions as committed checkpoints) into a scratch session, copied into the
 * caller's session only once the whole file imported (all or nothing).
 */
import { XcompactError } from '../errors';
import { FileReadError, readRegularFile, type FileReadReason } from '../regular-file';
import { COMPACTION_CHECKPOINT_SOURCE, type AppendInput, type ImageBlock, type TextBlock, type Usage } from '../session/events';
import { answerPendingCalls } from '../session/recover';
import { Session } from '../session/session';
import { SessionWriter } from '../session/writer';
import { walkRecords, type RecordWalk } from './records';

export type TranscriptHarness = 'pi' | 'claude-code' | 'codex' | 'gemini-cli';

const HARNESS_LABEL: Record<TranscriptHarness | 'unknown', string> = {
  unknown: 'transcript',
  pi: 'pi transcript',
  'claude-code': 'Claude Code session',
  codex: 'Codex rollout',
  'gemini-cli': 'Gemini CLI session',
};

/** A transcript that cannot be imported: names the harness, the line (1-based) and what was expected. */
export class TranscriptImportError extends XcompactError {
  /** 'unknown' when the file is of no format the importers know. */
  readonly harness: TranscriptHarness | 'unknown';
  readonly line: number | undefined;
  /** The file, when the import was given one. */
  readonly file: string | undefined;
  /** Set when the file itself could not be read (missing, a directory, no permission, …). */
  readonly fileError: TranscriptFileError | undefined;
  constructor(
    harness: TranscriptHarness | 'unknown',
    message: string,
    options: { line?: number; file?: string; cause?: unknown; fileError?: TranscriptFileError } = {},
  ) {
    const where = [options.file, options.line === undefined ? undefined : `line ${options.line}`].filter(Boolean).join(' ');
    super('import', `${HARNESS_LABEL[harness]}${where ? ` ${where}` : ''}: ${message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.harness = harness;
    this.line = options.line;
    this.file = options.file;
    this.fileError = options.fileError;
  }

  /** The same error, naming the file it came from. */
  inFile(file: string): TranscriptImportError {
    const bare = this.message.slice(this.message.indexOf(': ') + 2);
    return new TranscriptImportError(this.harness, bare, {
      file,
      ...(this.line === undefined ? {} : { line: this.line }),
      ...(this.fileError ? { fileError: this.fileError } : {}),
      cause: this,
    });
  }
}

/** Why a transcript file could not be read (a FIFO, socket or device is `not-a-regular-file`, refused before it is opened). */
export type TranscriptFileError = FileReadReason;

/**
 * A transcript file's text; a file that cannot be read is a TranscriptImportError naming it and
 * why (never a bare Node error), and anything but a regular file within the size limit is
 * refused at once (src/regular-file.ts), never waited on.
 */
export async function readTranscriptText(harness: TranscriptHarness | 'unknown', path: string): Promise<string> {
  try {
    return (await readRegularFile(path)).toString('utf8');
  } catch (err) {
    if (!(err instanceof FileReadError)) throw err;
    throw new TranscriptImportError(harness, `cannot read the file: ${err.message.slice(err.message.indexOf(': ') + 2)}`, {
      file: path,
      fileError: err.reason,
      cause: err,
    });
  }
}

export type { JsonLine } from './records';

/**
 * The file's records by the shared walker (records.ts): merged lines split, a torn last line
 * skipped; a line that is neither is an error naming it.
 */
export function readRecords(harness: TranscriptHarness, text: string, expected: string): RecordWalk {
  const walk = walkRecords(text);
  if (walk.bad) throw new TranscriptImportError(harness, `${walk.bad.reason}; expected one JSON object per line, ${expected}.`, { line: walk.bad.line });
  return walk;
}

/** What an import did, by the same counts for every harness. */
export interface TranscriptImportReport {
  harness: TranscriptHarness;
  /** Non-empty lines of the file. */
  lines: number;
  /** Lines holding two records or more (`…}{…`), split into their records. */
  mergedLines: number;
  /** A torn last line (a harness still writing, or a crash mid-record), skipped: 0 or 1. */
  tornLines: number;
  /** What the import noticed and worked around, one sentence each (records out of order, …). */
  warnings: string[];
  turns: number;
  userMessages: number;
  assistantMessages: number;
  toolCalls: number;
  toolResults: number;
  /** Calls the harness recorded without a result, answered with an error result on import. */
  synthesizedResults: number;
  /** The harness's own compactions on the imported branch, imported as checkpoints. */
  compactions: number;
  /** Of those, compactions that kept a recent range of the history as it was (Claude Code's preserved segment). */
  partialCompactions: number;
  /** Of those, compactions whose summary text is not in the file (encrypted, or not recorded). */
  summariesUnavailable: number;
  /** Messages imported as the text the harness renders for them, by kind. */
  rendered: Record<string, number>;
  /** What the harness recorded but never sent to the model, by kind. */
  notSent: Record<string, number>;
  /** What could not be imported, by kind (unknown record types, content blocks, …). */
  ignored: Record<string, number>;
}

export function emptyReport(harness: TranscriptHarness, walk: Pick<RecordWalk, 'lines' | 'mergedLines' | 'torn'>): TranscriptImportReport {
  return {
    harness,
    lines: walk.lines,
    mergedLines: walk.mergedLines,
    tornLines: walk.torn ? 1 : 0,
    warnings: walk.torn
      ? [`line ${walk.torn.line} is torn (${walk.torn.chars} characters without the end of their record: a session still being written); it was skipped`]
      : [],
    turns: 0,
    userMessages: 0,
    assistantMessages: 0,
    toolCalls: 0,
    toolResults: 0,
    synthesizedResults: 0,
    compactions: 0,
    partialCompactions: 0,
    summariesUnavailable: 0,
    rendered: {},
    notSent: {},
    ignored: {},
  };
}

export function count(into: Record<string, number>, kind: string, n = 1): void {
  into[kind] = (into[kind] ?? 0) + n;
}

export interface ImportedCall {
  id: string;
  name: string;
  /** The arguments as the model produced them (a JSON string for function tools). */
  arguments: string;
}

export interface ImportedReply {
  text?: string;
  reasoning?: string;
  calls: ImportedCall[];
  usage?: Usage;
  provider: string;
  model: string;
  finishReason?: string;
  /** The model's window as the harness recorded it (Codex's `model_context_window`): kept in the request header. */
  contextWindow?: number;
}

const MISSING_RESULT = 'No result was recorded for this tool call (the run was interrupted before it finished).';

/**
 * Writes one conversation, in the order the harness sent it, into a scratch session. Each
 * user prompt opens a turn (user messages in a row before any reply share it), each reply is
 * a step with its request header, results follow their calls; calls left without a result
 * are answered with an error result when their step closes.
 */
export class TranscriptBuilder {
  readonly session = Session.inMemory('transcript-import');
  private readonly w = new SessionWriter(this.session);
  private repliesInTurn = 0;
  /** Each call's tool name, for its result (a harness records the name on the call only). */
  private readonly toolNames = new Map<string, string>();

  constructor(
    readonly report: TranscriptImportReport,
    private readonly tools: Record<string, unknown>[] = [],
  ) {}

  system(text: string): void {
    this.w.system(text);
  }

  /** A message the user (or the harness on the user's behalf) sent; `kind` names a rendered one. */
  user(content: Array<TextBlock | ImageBlock>, kind?: string): void {
    this.closeStep();
    if (this.session.openTurn === null || this.repliesInTurn > 0) {
      if (this.session.openTurn !== null) this.w.endTurn();
      this.openTurn();
    }
    if (kind) count(this.report.rendered, kind);
    else this.report.userMessages++;
    this.w.user(nonEmpty(content));
  }

  reply(r: ImportedReply): void {
    if (this.session.openTurn === null) this.openTurn();
    this.closeStep();
    this.w.startStep();
    this.w.request({ provider: r.provider, model: r.model, tools: this.tools, ...(r.contextWindow ? { contextWindow: r.contextWindow } : {}) });
    this.w.assistant({
      ...(r.text ? { text: r.text } : {}),
      ...(r.reasoning ? { reasoning: r.reasoning } : {}),
      toolCalls: r.calls,
      ...(r.usage ? { usage: r.usage } : {}),
      provider: r.provider,
      model: r.model,
      ...(r.finishReason ? { finishReason: r.finishReason } : {}),
    });
    this.repliesInTurn++;
    this.report.assistantMessages++;
    this.report.toolCalls += r.calls.length;
    for (const c of r.calls) this.toolNames.set(c.id, c.name);
  }

  /** A call's result; one for a call that is not waiting (unknown, or answered already) is counted and left out. */
  result(callId: string, content: Array<TextBlock | ImageBlock>, options: { isError?: boolean; toolName?: string } = {}): boolean {
    if (!this.session.surface.pendingCalls().includes(callId)) {
      count(this.report.ignored, 'tool result for a call that is not waiting for one');
      return false;
    }
    const toolName = options.toolName ?? this.toolNames.get(callId);
    this.w.toolResult(callId, content, { ...options, ...(toolName !== undefined ? { toolName } : {}) });
    this.report.toolResults++;
    return true;
  }

  /**
   * The harness's own compaction: everything on the surface so far (after a system prompt)
   * becomes one checkpoint holding `content`, the text the harness sent in its place, committed
   * as the engine commits one; with `keepFromSeq`, only what was written before that seq (the
   * nodes from it on are kept, after the checkpoint). Nothing before it: the content is an
   * ordinary user message.
   */
  compaction(content: Array<TextBlock | ImageBlock>, summary: string, shadowedTokens: number, keepFromSeq?: number): void {
    this.closeStep();
    const s = this.session.surface;
    const head = s.length > 0 && this.session.event(s.seqAt(0)).type === 'system/message' ? 1 : 0;
    let cut = s.length;
    if (keepFromSeq !== undefined) {
      // A partial compaction: what was written from `keepFromSeq` on stays, after the checkpoint.
      for (let p = head; p < s.length; p++) if (s.seqAt(p) >= keepFromSeq) cut = Math.min(cut, p);
      if (cut === s.length || !s.balancedAt(cut)) {
        count(
          this.report.rendered,
          cut === s.length
            ? 'partial compaction whose kept range is not in the file (imported as a full one)'
            : 'partial compaction keeping from inside a tool-call batch (imported as a full one)',
        );
        cut = s.length;
      } else this.report.partialCompactions++;
    }
    if (cut <= head) {
      count(this.report.rendered, 'compaction summary with nothing before it');
      if (this.session.openTurn === null) this.openTurn();
      this.w.user(nonEmpty(content));
      return;
    }
    const shadowed = s.slice(head, cut);
    const turn = this.session.openTurn;
    const start = this.session.append({ type: 'compaction/start', data: { turn, trigger: turn === null ? 'manual' : 'pressure' } });
    const sum = this.session.append({
      type: 'compaction/summary',
      data: {
        summary: summary === '' ? '(empty summary)' : summary,
        range: { start: shadowed[0]!, end: shadowed[shadowed.length - 1]! },
        shadowedSeqs: shadowed,
        shadowedTokens: Number.isSafeInteger(shadowedTokens) && shadowedTokens >= 0 ? shadowedTokens : 0,
      },
    });
    this.session.append({
      type: 'user/message',
      data: { content: nonEmpty(content), source: COMPACTION_CHECKPOINT_SOURCE },
      surfaceOp: { op: 'replace', start: shadowed[0]!, end: shadowed[shadowed.length - 1]! },
      sourceEventSeqs: [start.seq, sum.seq, ...shadowed],
    });
    this.session.append({ type: 'compaction/end', data: { turn } });
    this.report.compactions++;
  }

  finish(): Session {
    this.closeStep();
    if (this.session.openTurn !== null) this.w.endTurn();
    return this.session;
  }

  private openTurn(): void {
    this.w.startTurn();
    this.repliesInTurn = 0;
    this.report.turns++;
  }

  private closeStep(): void {
    this.report.synthesizedResults += answerPendingCalls(this.session, MISSING_RESULT).length;
    if (this.session.openStep) this.w.endStep();
  }
}

function nonEmpty(content: Array<TextBlock | ImageBlock>): Array<TextBlock | ImageBlock> {
  return content.length > 0 ? content : [{ type: 'text', text: '' }];
}

/** Copies a scratch session's events into `target` (empty), in order: the all-or-nothing step of every import. */
export function copyInto(target: Session, scratch: Session): void {
  for (const e of scratch.events()) {
    const input = { type: e.type, data: e.data } as AppendInput;
    if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    if (e.sourceEventSeqs !== undefined) input.sourceEventSeqs = e.sourceEventSeqs;
    target.append(input);
  }
}

export function requireEmpty(harness: TranscriptHarness, target: Session): void {
  if (target.length > 0) {
    throw new TranscriptImportError(harness, `a transcript is imported into an empty session; session "${target.id}" already has ${target.length} events.`);
  }
}

/** A non-empty file that yields no message is not a conversation of this harness: refused, never "0 events". */
export function requireMessages(harness: TranscriptHarness, report: TranscriptImportReport, expected: string): void {
  if (report.userMessages + report.assistantMessages + report.compactions === 0) {
    throw new TranscriptImportError(harness, `none of its ${report.lines} lines is a message the model was sent; expected ${expected}.`);
  }
}

/** A data: URL from base64 data and its media type. */
export function dataUrl(mediaType: unknown, data: string): string {
  return `data:${typeof mediaType === 'string' && mediaType ? mediaType : 'image/png'};base64,${data}`;
}

export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
export const obj = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
export const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.round(v) : 0);
