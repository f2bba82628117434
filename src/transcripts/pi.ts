/**
 * Imports a transcript recorded by the pi coding agent (github.com/badlogic/pi-mono) into a
 * Session, so that the imported surface is what pi really sent (docs/spec.md#11-real-transcripts-in-faithfully):
 * - the active branch only (tree format: the path from the last entry to the root);
 * - each user prompt opens a turn, each assistant message is a step with its request header,
 *   tool results follow their calls;
 * - pi's own `compaction` entries become xcompact checkpoints, committed as our engine commits
 *   them (compaction/start, compaction/summary, the checkpoint user/message replacing the span
 *   before the first kept entry, compaction/end), with pi's summary in pi's own wording;
 * - messages pi sends as user text (`bashExecution`, extension `custom` messages and
 *   `custom_message` entries, branch summaries) are imported as the text pi renders for them,
 *   images as image blocks.
 * What pi records but never sends is counted by kind in `notSent`; entry types we do not know
 * are counted in `ignored`. Nothing pi sent is dropped silently.
 *
 * pi records calls that never got a result (aborted runs). A request with such a call is
 * invalid for every OpenAI-compatible API, so the importer answers each one with an error
 * result that says so, and counts it.
 */
import { FileReadError, readRegularFile } from '../regular-file';
import { COMPACTION_CHECKPOINT_SOURCE, type AppendInput, type ImageBlock, type TextBlock, type Usage } from '../session/events';
import {
  PI_UNSENT_ENTRY_TYPES,
  PiImportError,
  activePath,
  bashExecutionText,
  branchSummaryText,
  compactionSummaryText,
  parsePiLines,
  type BashExecution,
  type PiEntry,
} from './pi-format';
import type { TranscriptImportReport } from './common';
import { answerPendingCalls } from '../session/recover';
import { Session } from '../session/session';
import { SessionWriter } from '../session/writer';

export { PiImportError } from './pi-format';

/**
 * pi's import report: the counts every importer reports (TranscriptImportReport; for pi,
 * `rendered` counts the messages pi sends as user text — bashExecution, custom, branchSummary —
 * and `notSent` what it never sends — settings changes, labels, other branches, `!!` commands),
 * and which of pi's two layouts the file was.
 */
export interface PiImportReport extends Omit<TranscriptImportReport, 'harness' | 'summariesUnavailable'> {
  /** 'linear' (session version 1, `firstKeptEntryIndex`) or 'tree' (entries with id/parentId). */
  format: 'linear' | 'tree';
}

export interface PiImportOptions {
  /** A system prompt to put at surface node 0 (pi does not record its own). */
  systemPrompt?: string;
  /** Tool definitions to record on every request header (pi does not record them). */
  tools?: Record<string, unknown>[];
}

const MISSING_RESULT = 'No result was recorded for this tool call (the run was aborted before it finished).';

interface PiBlock {
  type: string;
  text?: string;
  thinking?: string;
  id?: string;
  name?: string;
  arguments?: unknown;
  data?: string;
  mimeType?: string;
}

interface PiUsage {
  input?: number;
  output?: number;
  cacheRead?: number;
  cacheWrite?: number;
}

function usageOf(u: PiUsage | undefined): Usage | undefined {
  if (!u) return undefined;
  const cacheRead = u.cacheRead ?? 0;
  const cacheWrite = u.cacheWrite ?? 0;
  // pi (Anthropic-style) counts cache reads and writes apart from input; ours includes them.
  return {
    promptTokens: (u.input ?? 0) + cacheRead + cacheWrite,
    completionTokens: u.output ?? 0,
    cachedTokens: cacheRead,
    cacheWriteTokens: cacheWrite,
  };
}

/** pi's user-side content as our blocks; `dropped` hears of every block that cannot be carried over. */
function userBlocks(content: unknown, dropped: (kind: string) => void): Array<TextBlock | ImageBlock> {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  const out: Array<TextBlock | ImageBlock> = [];
  for (const b of (content ?? []) as PiBlock[]) {
    if (b.type === 'text') out.push({ type: 'text', text: b.text ?? '' });
    else if (b.type === 'image' && b.data) out.push({ type: 'image', url: `data:${b.mimeType ?? 'image/png'};base64,${b.data}` });
    else if (b.type === 'image') dropped('image block without data');
    else dropped(`block:${String(b.type)}`);
  }
  return out.length > 0 ? out : [{ type: 'text', text: '' }];
}

/** Imports pi JSONL text into an empty session, all or nothing. */
export function importPiTranscript(target: Session, jsonl: string, options: PiImportOptions = {}): PiImportReport {
  if (target.length > 0) {
    throw new PiImportError(`a pi transcript is imported into an empty session; session "${target.id}" already has ${target.length} events.`);
  }
  // All or nothing: the transcript is imported into a scratch session first, so a bad line
  // halfway through leaves the target (and its store) untouched.
  const session = Session.inMemory('pi-import');
  const report = importInto(session, jsonl, options);
  const said = report.userMessages + report.assistantMessages + report.compactions + Object.values(report.rendered).reduce((a, b) => a + b, 0);
  if (report.lines > 0 && said === 0) {
    // Lines that look like pi entries but say nothing (another tool's JSONL) are not a pi session with 0 events.
    throw new PiImportError(
      `none of its ${report.lines} lines is a message pi sent (found ${JSON.stringify({ ...report.notSent, ...report.ignored })}); expected pi entries like {"type":"message","message":{"role":"user","content":[…]}}.`,
    );
  }
  for (const e of session.events()) {
    const input = { type: e.type, data: e.data } as AppendInput;
    if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    if (e.sourceEventSeqs !== undefined) input.sourceEventSeqs = e.sourceEventSeqs;
    target.append(input);
  }
  return report;
}

function importInto(session: Session, jsonl: string, options: PiImportOptions): PiImportReport {
  const w = new SessionWriter(session);
  const lines = parsePiLines(jsonl);
  const { format, path, offBranch, firstKept } = activePath(lines);
  const report: PiImportReport = {
    format,
    lines: lines.walk.lines,
    mergedLines: lines.walk.mergedLines,
    tornLines: lines.walk.torn ? 1 : 0,
    warnings: lines.walk.torn
      ? [
          `line ${lines.walk.torn.line} is torn (${lines.walk.torn.chars} characters without the end of their record: a session still being written); it was skipped`,
        ]
      : [],
    turns: 0,
    userMessages: 0,
    assistantMessages: 0,
    toolCalls: 0,
    toolResults: 0,
    synthesizedResults: 0,
    compactions: 0,
    partialCompactions: 0,
    rendered: {},
    notSent: {},
    ignored: {},
  };
  const count = (into: Record<string, number>, kind: string) => {
    into[kind] = (into[kind] ?? 0) + 1;
  };
  const blocks = (content: unknown) => userBlocks(content, (kind) => count(report.ignored, kind));
  if (offBranch > 0) report.notSent['entries on other branches'] = offBranch;

  const header = lines.find((l) => l.entry.type === 'session')?.entry;
  let provider = typeof header?.provider === 'string' && header.provider ? header.provider : 'unknown';
  let model = typeof header?.modelId === 'string' && header.modelId ? header.modelId : 'unknown';
  if (options.systemPrompt !== undefined) w.system(options.systemPrompt);

  const closeStep = () => {
    report.synthesizedResults += answerPendingCalls(session, MISSING_RESULT).length;
    if (session.openStep) w.endStep();
  };
  /** A user-role message that is not a prompt (a `!` command, an extension message): joins the open turn. */
  const sendAsUser = (blocks: Array<TextBlock | ImageBlock>, kind: string) => {
    closeStep();
    if (session.openTurn === null) {
      w.startTurn();
      report.turns++;
    }
    count(report.rendered, kind);
    return w.user(blocks).seq;
  };

  /** Seq of the first surface node each path entry produced, by path index. */
  const firstNode: Array<number | undefined> = [];
  for (let i = 0; i < path.length; i++) {
    const { line, entry } = path[i]!;
    try {
      firstNode[i] = importEntry(entry, i);
    } catch (err) {
      if (err instanceof PiImportError) throw err;
      throw new PiImportError((err as Error).message, line);
    }
  }
  closeStep();
  if (session.openTurn !== null) w.endTurn();
  return report;

  function importEntry(entry: PiEntry, index: number): number | undefined {
    switch (entry.type) {
      case 'message':
        return importMessage((entry.message ?? {}) as Record<string, unknown>);
      case 'custom_message':
        return sendAsUser(blocks(entry.content), `custom_message:${String(entry.customType ?? 'unnamed')}`);
      case 'branch_summary':
        if (typeof entry.summary === 'string' && entry.summary !== '')
          return sendAsUser([{ type: 'text', text: branchSummaryText(entry.summary) }], 'branch_summary');
        count(report.notSent, 'branch_summary without a summary');
        return undefined;
      case 'compaction':
        importCompaction(entry, index);
        return undefined;
      case 'model_change':
        if (typeof entry.provider === 'string' && entry.provider) provider = entry.provider;
        if (typeof entry.modelId === 'string' && entry.modelId) model = entry.modelId;
        count(report.notSent, 'model_change');
        return undefined;
      default: {
        const t = String(entry.type);
        count(PI_UNSENT_ENTRY_TYPES.has(t) ? report.notSent : report.ignored, t);
        return undefined;
      }
    }
  }

  function importMessage(m: Record<string, unknown>): number | undefined {
    switch (m.role) {
      case 'user': {
        closeStep();
        if (session.openTurn !== null) w.endTurn();
        w.startTurn();
        report.turns++;
        report.userMessages++;
        return w.user(blocks(m.content)).seq;
      }
      case 'assistant':
        return importAssistant(m);
      case 'toolResult': {
        report.toolResults++;
        return w.toolResult(String(m.toolCallId), blocks(m.content), {
          ...(m.isError === true ? { isError: true } : {}),
          ...(typeof m.toolName === 'string' && m.toolName ? { toolName: m.toolName } : {}),
        }).seq;
      }
      case 'bashExecution':
        // `!!command`: pi ran it for the user only.
        if (m.excludeFromContext === true) {
          count(report.notSent, 'bashExecution excluded from context (!!)');
          return undefined;
        }
        return sendAsUser([{ type: 'text', text: bashExecutionText(m) }], 'bashExecution');
      case 'custom':
      case 'hookMessage': // the same message before pi's session version 3
        return sendAsUser(blocks(m.content), `custom:${String(m.customType ?? 'unnamed')}`);
      case 'branchSummary':
        return sendAsUser([{ type: 'text', text: branchSummaryText(String(m.summary ?? '')) }], 'branchSummary');
      case 'compactionSummary':
        return sendAsUser([{ type: 'text', text: compactionSummaryText(String(m.summary ?? '')) }], 'compactionSummary');
      default:
        count(report.ignored, `message:${String(m.role)}`);
        return undefined;
    }
  }

  function importAssistant(m: Record<string, unknown>): number {
    if (session.openTurn === null) {
      w.startTurn();
      report.turns++;
    }
    closeStep();
    w.startStep();
    const msgProvider = typeof m.provider === 'string' && m.provider ? m.provider : provider;
    const msgModel = typeof m.model === 'string' && m.model ? m.model : model;
    w.request({ provider: msgProvider, model: msgModel, tools: options.tools ?? [] });
    const parts = (m.content ?? []) as PiBlock[];
    for (const b of parts) if (b.type !== 'text' && b.type !== 'thinking' && b.type !== 'toolCall') count(report.ignored, `assistant block:${String(b.type)}`);
    const textParts = parts.filter((b) => b.type === 'text').map((b) => b.text ?? '');
    const reasoning = parts
      .filter((b) => b.type === 'thinking')
      .map((b) => b.thinking ?? '')
      .join('\n\n');
    const calls = parts
      .filter((b) => b.type === 'toolCall')
      .map((b) => ({ id: String(b.id), name: String(b.name), arguments: JSON.stringify(b.arguments ?? {}) }));
    const usage = usageOf(m.usage as PiUsage | undefined);
    const e = w.assistant({
      ...(textParts.length > 0 ? { text: textParts.join('\n\n') } : {}),
      ...(reasoning ? { reasoning } : {}),
      toolCalls: calls,
      ...(usage ? { usage } : {}),
      provider: msgProvider,
      model: msgModel,
      ...(typeof m.stopReason === 'string' && m.stopReason ? { finishReason: m.stopReason } : {}),
    });
    report.assistantMessages++;
    report.toolCalls += calls.length;
    return e.seq;
  }

  /**
   * pi's compaction, as our engine would have committed it: the span from the surface head to
   * the node before the first kept entry becomes one checkpoint holding pi's rendered summary.
   */
  function importCompaction(entry: PiEntry, index: number): void {
    if (typeof entry.summary !== 'string' || entry.summary === '') throw new Error('compaction has no summary text.');
    closeStep();
    const s = session.surface;
    const head = s.length > 0 && session.event(s.seqAt(0)).type === 'system/message' ? 1 : 0;
    // The first kept node: the first node of an entry from the first kept one on that is still
    // on the surface (an earlier checkpoint may already hold the entry itself).
    let cut = s.length;
    for (let k = firstKept.get(index)!; k < index; k++) {
      const seq = firstNode[k];
      const pos = seq === undefined ? undefined : s.positionOf(seq);
      if (pos !== undefined) {
        cut = Math.max(pos, head);
        break;
      }
    }
    if (cut <= head) {
      // Nothing before the first kept entry: there is no span for a checkpoint to replace.
      count(report.ignored, 'compaction that condenses nothing');
      return;
    }
    if (!s.balancedAt(cut)) throw new Error('the compaction keeps from the middle of a tool-call batch (a call before the cut has its result after it).');
    const shadowed = s.slice(head, cut);
    const turn = session.openTurn;
    const tokensBefore = entry.tokensBefore;
    const start = session.append({ type: 'compaction/start', data: { turn, trigger: turn === null ? 'manual' : 'pressure' } });
    const summary = session.append({
      type: 'compaction/summary',
      data: {
        summary: entry.summary,
        range: { start: shadowed[0]!, end: shadowed[shadowed.length - 1]! },
        shadowedSeqs: shadowed,
        // pi's count of the context it compacted: the only provider-side figure there is.
        shadowedTokens: typeof tokensBefore === 'number' && Number.isInteger(tokensBefore) && tokensBefore >= 0 ? tokensBefore : 0,
      },
    });
    session.append({
      type: 'user/message',
      data: { content: [{ type: 'text', text: compactionSummaryText(entry.summary) }], source: COMPACTION_CHECKPOINT_SOURCE },
      surfaceOp: { op: 'replace', start: shadowed[0]!, end: shadowed[shadowed.length - 1]! },
      sourceEventSeqs: [start.seq, summary.seq, ...shadowed],
    });
    session.append({ type: 'compaction/end', data: { turn } });
    report.compactions++;
    if (cut < s.length) report.partialCompactions++;
  }
}

export async function importPiFile(session: Session, path: string, options: PiImportOptions = {}): Promise<PiImportReport> {
  let text: string;
  try {
    // Only a regular file within the size limit: a FIFO, socket or device is refused at once (src/regular-file.ts).
    text = (await readRegularFile(path)).toString('utf8');
  } catch (err) {
    if (!(err instanceof FileReadError)) throw err;
    throw new PiImportError(`${err.message.replace(/\.$/, '')} (pi session file).`, undefined, { cause: err });
  }
  return importPiTranscript(session, text, options);
}
