/**
 * Imports a Claude Code session file into a Session, so that the imported surface is what
 * Claude Code really sent:
 * - the active branch (import-claude-format.ts), with a response written over several
 *   records (`message.id`) joined into one assistant message;
 * - each user prompt opens a turn, each response is a step with its request header; thinking
 *   blocks are reasoning, `tool_use` blocks tool calls, `tool_result` blocks results (errors
 *   marked), images kept as data URLs;
 * - provider usage as the step's anchor: prompt = input + cache creation + cache read;
 * - Claude Code's own compactions (`compact_boundary` followed by the `isCompactSummary` user
 *   record) as committed checkpoints holding the summary text Claude sent in the history's place.
 * What Claude Code records for itself (titles, file snapshots, hook and timing notes, its own
 * synthetic replies, subagent sidechains, other branches) is counted in `notSent`; unknown
 * records and blocks in `ignored`. Bad input is a TranscriptImportError naming the line and
 * nothing is written.
 */
import type { ImageBlock, TextBlock, Usage } from '../session/events';
import { CLAUDE_UNSENT_TYPES, claudeActiveBranch, isClaudeConversationRecord } from './claude-code-format';
import {
  TranscriptBuilder,
  TranscriptImportError,
  copyInto,
  count,
  dataUrl,
  emptyReport,
  num,
  obj,
  readRecords,
  readTranscriptText,
  requireEmpty,
  requireMessages,
  str,
  type ImportedCall,
  type JsonLine,
  type TranscriptImportReport,
} from './common';
import type { Session } from '../session/session';

export interface TranscriptImportOptions {
  /** A system prompt to put at surface node 0 (the harness does not record its own). */
  systemPrompt?: string;
  /** Tool definitions to record on every request header (the harness does not record them). */
  tools?: Record<string, unknown>[];
}

const EXPECTED = 'a Claude Code record ({"type":"user"|"assistant"|"system","uuid":…,"parentUuid":…,"message":{"role":…,"content":…}})';
const UNAVAILABLE = '[Claude Code compacted the conversation here, but its summary is not in the session file: the text it sent is not available.]';

/** Imports Claude Code JSONL text into an empty session, all or nothing. */
export function importClaudeCodeTranscript(target: Session, jsonl: string, options: TranscriptImportOptions = {}): TranscriptImportReport {
  requireEmpty('claude-code', target);
  const walk = readRecords('claude-code', jsonl, EXPECTED);
  const lines = walk.records;
  const report = emptyReport('claude-code', walk);
  const builder = new TranscriptBuilder(report, options.tools);
  if (options.systemPrompt !== undefined) builder.system(options.systemPrompt);
  const branch = claudeActiveBranch(lines);
  if (branch.offBranch > 0) count(report.notSent, 'records on other branches', branch.offBranch);
  if (branch.sidechain > 0) count(report.notSent, 'subagent (sidechain) records', branch.sidechain);
  if (branch.subagent) report.warnings.push("a subagent's transcript (every record is a sidechain): its own conversation was imported");
  if (branch.repeated > 0) count(report.notSent, 'records repeating an earlier uuid', branch.repeated);
  if (branch.brokenAt !== undefined) count(report.notSent, `history before line ${branch.brokenAt} (its parent is not in the file)`);
  if (branch.outOfOrder)
    report.warnings.push(
      "the file's records are not in the order of their uuid tree (a record comes before its parent); they were imported in the tree's order",
    );
  if (branch.bridgedGaps > 0) {
    report.warnings.push(
      `${branch.bridgedGaps} record${branch.bridgedGaps === 1 ? ' names a parent' : 's name parents'} not in the file; the branch went on from the record written just before each`,
    );
  }
  if (branch.continuedBoundaries > 0) {
    report.warnings.push(
      `${branch.continuedBoundaries} compaction boundar${branch.continuedBoundaries === 1 ? 'y names a logical parent' : 'ies name logical parents'} not in the file; the history before each was taken from the record written just before it`,
    );
  }
  for (const l of lines) {
    if (isClaudeConversationRecord(l.record)) continue;
    // Claude Code's own bookkeeping, or a record type this importer does not know.
    const t = String(l.record.type);
    count(CLAUDE_UNSENT_TYPES.has(t) ? report.notSent : report.ignored, t);
  }
  new ClaudeMapper(builder, report).run(branch.records);
  requireMessages('claude-code', report, EXPECTED);
  copyInto(target, builder.finish());
  return report;
}

export async function importClaudeCodeFile(session: Session, path: string, options: TranscriptImportOptions = {}): Promise<TranscriptImportReport> {
  const text = await readTranscriptText('claude-code', path);
  try {
    return importClaudeCodeTranscript(session, text, options);
  } catch (err) {
    throw err instanceof TranscriptImportError ? err.inFile(path) : err;
  }
}

interface Block {
  type?: unknown;
  [key: string]: unknown;
}

/** One response: its parts joined, in the order Claude streamed them. */
interface Response {
  id: string;
  line: number;
  text: string[];
  reasoning: string[];
  calls: ImportedCall[];
  usage: Usage | undefined;
  model: string;
  finishReason: string | undefined;
}

class ClaudeMapper {
  /** For each record read, the session's next seq before anything of it was written (where a kept range starts). */
  private readonly marks = new Map<string, number>();

  constructor(
    private readonly b: TranscriptBuilder,
    private readonly report: TranscriptImportReport,
  ) {}

  run(records: JsonLine[]): void {
    let pending: Response | undefined;
    const flush = () => {
      if (!pending) return;
      const p = pending;
      pending = undefined;
      this.b.reply({
        ...(p.text.length > 0 ? { text: p.text.join('\n\n') } : {}),
        ...(p.reasoning.length > 0 ? { reasoning: p.reasoning.join('\n\n') } : {}),
        calls: p.calls,
        ...(p.usage ? { usage: p.usage } : {}),
        provider: 'anthropic',
        model: p.model,
        ...(p.finishReason ? { finishReason: p.finishReason } : {}),
      });
    };
    /** Results that arrived between two parts of one response wait for the response to be written. */
    const held: JsonLine[] = [];
    for (let i = 0; i < records.length; i++) {
      const { line, record: r } = records[i]!;
      const mark = () => {
        if (typeof r.uuid === 'string') this.marks.set(r.uuid, this.b.session.length);
      };
      try {
        if (r.type === 'assistant') {
          const m = obj(r.message) ?? {};
          if (r.isApiErrorMessage === true || m.model === '<synthetic>') {
            count(this.report.notSent, "Claude Code's own synthetic replies (API errors, 'No response requested.')");
            continue;
          }
          const id = str(m.id) ?? `line-${line}`;
          if (pending && pending.id !== id) {
            flush();
            this.replay(held);
          }
          mark();
          pending ??= { id, line, text: [], reasoning: [], calls: [], usage: undefined, model: str(m.model) || 'unknown', finishReason: undefined };
          this.addPart(pending, m);
          continue;
        }
        if (r.type === 'user' && pending && isOnlyResults(r)) {
          held.push(records[i]!);
          continue;
        }
        flush();
        this.replay(held);
        mark();
        if (r.type === 'user') this.user(r);
        else this.system(r, records, i);
      } catch (err) {
        if (err instanceof TranscriptImportError) throw err;
        throw new TranscriptImportError('claude-code', (err as Error).message, { line, cause: err });
      }
    }
    flush();
    this.replay(held);
  }

  private replay(held: JsonLine[]): void {
    for (const h of held.splice(0)) {
      try {
        this.user(h.record);
      } catch (err) {
        if (err instanceof TranscriptImportError) throw err;
        throw new TranscriptImportError('claude-code', (err as Error).message, { line: h.line, cause: err });
      }
    }
  }

  private addPart(p: Response, m: Record<string, unknown>): void {
    const content = m.content;
    const blocks: Block[] = typeof content === 'string' ? [{ type: 'text', text: content }] : Array.isArray(content) ? (content as Block[]) : [];
    for (const block of blocks) {
      if (block.type === 'text') p.text.push(String(block.text ?? ''));
      else if (block.type === 'thinking') p.reasoning.push(String(block.thinking ?? ''));
      else if (block.type === 'tool_use') {
        if (typeof block.id !== 'string' || block.id === '' || typeof block.name !== 'string' || block.name === '') {
          throw new Error('a tool_use block without its id or name; expected {"type":"tool_use","id":…,"name":…,"input":{…}}.');
        }
        p.calls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
      } else if (block.type === 'redacted_thinking') count(this.report.ignored, 'assistant block:redacted_thinking (encrypted, no text)');
      else count(this.report.ignored, `assistant block:${String(block.type)}`);
    }
    const u = obj(m.usage);
    if (u) {
      const cacheRead = num(u.cache_read_input_tokens);
      const cacheWrite = num(u.cache_creation_input_tokens);
      const output = Math.max(num(u.output_tokens), p.usage?.completionTokens ?? 0);
      // Anthropic counts cache reads and writes apart from input; ours includes them.
      p.usage = { promptTokens: num(u.input_tokens) + cacheRead + cacheWrite, completionTokens: output, cachedTokens: cacheRead, cacheWriteTokens: cacheWrite };
    }
    if (typeof m.stop_reason === 'string' && m.stop_reason) p.finishReason = m.stop_reason;
  }

  private user(r: Record<string, unknown>): void {
    const m = obj(r.message);
    if (!m) throw new Error(`a user record without its message; expected ${EXPECTED}.`);
    if (r.isCompactSummary === true) {
      // Reached only when no boundary came before it (an older Claude Code, or a cut file).
      this.b.compaction(this.blocks(m.content), contentText(m.content), 0);
      return;
    }
    const content = m.content;
    if (typeof content === 'string') {
      this.b.user([{ type: 'text', text: content }]);
      return;
    }
    if (!Array.isArray(content)) throw new Error(`a user message whose content is neither a string nor blocks; expected ${EXPECTED}.`);
    const rest: Block[] = [];
    for (const block of content as Block[]) {
      if (block.type !== 'tool_result') {
        rest.push(block);
        continue;
      }
      if (typeof block.tool_use_id !== 'string' || block.tool_use_id === '')
        throw new Error('a tool_result block without tool_use_id; expected {"type":"tool_result","tool_use_id":…,"content":…}.');
      this.b.result(block.tool_use_id, this.blocks(block.content), block.is_error === true ? { isError: true } : {});
    }
    if (rest.length > 0) this.b.user(this.blocks(rest));
  }

  private system(r: Record<string, unknown>, records: JsonLine[], index: number): void {
    if (r.subtype !== 'compact_boundary') {
      count(this.report.notSent, `system:${String(r.subtype ?? 'unnamed')}`);
      return;
    }
    const meta = obj(r.compactMetadata) ?? {};
    // The summary Claude sent in the history's place: the isCompactSummary record after the boundary.
    let summary: Record<string, unknown> | undefined;
    for (let k = index + 1; k < records.length; k++) {
      const next = records[k]!.record;
      if (next.type === 'user' && next.isCompactSummary === true) {
        summary = next;
        records.splice(k, 1);
        break;
      }
      if (next.type === 'user' || next.type === 'assistant') break;
    }
    const content = summary ? this.blocks(obj(summary.message)?.content) : [{ type: 'text' as const, text: UNAVAILABLE }];
    if (!summary) this.report.summariesUnavailable++;
    // A partial compaction (Claude Code's preserved segment): the records from its head on stay as they were.
    const head = str(obj(meta.preservedSegment)?.headUuid);
    const keepFrom = head === undefined ? undefined : (this.marks.get(head) ?? Number.MAX_SAFE_INTEGER);
    this.b.compaction(content, summary ? contentText(obj(summary.message)?.content) : UNAVAILABLE, num(meta.preTokens), keepFrom);
  }

  /** Claude's content (a string or blocks) as ours; what cannot be carried over is counted. */
  private blocks(content: unknown): Array<TextBlock | ImageBlock> {
    if (typeof content === 'string') return [{ type: 'text', text: content }];
    const out: Array<TextBlock | ImageBlock> = [];
    for (const block of (Array.isArray(content) ? content : []) as Block[]) {
      if (block.type === 'text') out.push({ type: 'text', text: String(block.text ?? '') });
      else if (block.type === 'image') {
        const source = obj(block.source) ?? {};
        if (source.type === 'base64' && typeof source.data === 'string' && source.data)
          out.push({ type: 'image', url: dataUrl(source.media_type, source.data) });
        else if (source.type === 'url' && typeof source.url === 'string' && source.url) out.push({ type: 'image', url: source.url });
        else count(this.report.ignored, 'image block without data');
      } else count(this.report.ignored, `block:${String(block.type)}`);
    }
    return out;
  }
}

function isOnlyResults(r: Record<string, unknown>): boolean {
  const content = obj(r.message)?.content;
  return Array.isArray(content) && content.length > 0 && content.every((b) => obj(b)?.type === 'tool_result');
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  return (Array.isArray(content) ? content : [])
    .map((b) => (obj(b)?.type === 'text' ? String(obj(b)!.text ?? '') : ''))
    .filter((t) => t !== '')
    .join('\n\n');
}
