/**
 * pi's session file as pi itself reads it (badlogic/pi-mono, packages/coding-agent/src/core/
 * session-manager.ts and messages.ts): which entries are on the active branch, where a
 * compaction keeps from, and the user text pi renders for its own message kinds. Pure: no
 * session, no tokens.
 *
 * Two formats exist. The linear one (session version 1) is the file in order, and a
 * compaction names the first kept entry by `firstKeptEntryIndex`, an index into the file's
 * entries (the session header is entry 0). The tree one (version ≥ 2) gives every entry an
 * `id` and a `parentId`; the active branch is the path from the last entry to the root, and a
 * compaction names `firstKeptEntryId`.
 */
import { XcompactError } from '../errors';
import { walkRecords, type RecordWalk } from './records';

export class PiImportError extends XcompactError {
  /** 1-based line of the pi file the error is about, when there is one. */
  readonly line: number | undefined;
  constructor(message: string, line?: number, options?: { cause?: unknown }) {
    super('import', line === undefined ? message : `pi transcript line ${line}: ${message}`, options);
    this.line = line;
  }
}

export interface PiEntry {
  type?: string;
  id?: unknown;
  parentId?: unknown;
  [key: string]: unknown;
}

export interface PiLine {
  /** 1-based line number in the file. */
  line: number;
  entry: PiEntry;
}

export interface PiPath {
  format: 'linear' | 'tree';
  /** The entries pi builds its context from, root first (the session header excluded). */
  path: PiLine[];
  /** Entries of the file that are not on the active branch (tree format only). */
  offBranch: number;
  /**
   * For each compaction on the path (by its index in `path`): the index in `path` of its first
   * kept entry, or `path.length` when that entry is not on the path (pi then keeps nothing
   * before the compaction).
   */
  firstKept: Map<number, number>;
}

/**
 * Every record of the file by the shared walker (records.ts): a line holding two entries run
 * together is split, a torn last line skipped (both counted in `walk`); any other line that is
 * not a JSON object is an error naming it.
 */
export function parsePiLines(jsonl: string): PiLine[] & { walk: RecordWalk } {
  const walk = walkRecords(jsonl);
  if (walk.bad) {
    const reason =
      walk.bad.reason === 'not a JSON object'
        ? 'not a JSON object (a pi entry is {"type": …}).'
        : walk.bad.reason.replace(/^not valid JSON \((.*)\)$/, 'not valid JSON: $1');
    throw new PiImportError(reason, walk.bad.line);
  }
  const out = walk.records.map((r) => ({ line: r.line, entry: r.record }));
  return Object.assign(out, { walk });
}

/** The active branch, by pi's own rules. Dangling references are errors naming their line. */
export function activePath(lines: PiLine[]): PiPath {
  const body = lines.filter((l) => l.entry.type !== 'session');
  const tree = body.some((l) => typeof l.entry.id === 'string' && 'parentId' in l.entry);
  return tree ? treePath(body) : linearPath(lines, body);
}

function linearPath(all: PiLine[], body: PiLine[]): PiPath {
  const firstKept = new Map<number, number>();
  const pathIndexOfFileIndex = new Map<number, number>();
  all.forEach((l, fileIndex) => {
    if (l.entry.type !== 'session') pathIndexOfFileIndex.set(fileIndex, pathIndexOfFileIndex.size);
  });
  body.forEach((l, i) => {
    if (l.entry.type !== 'compaction') return;
    const index = l.entry.firstKeptEntryIndex;
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= all.length) {
      throw new PiImportError(
        `compaction's firstKeptEntryIndex ${JSON.stringify(index)} points at no entry (the file has entries 0..${all.length - 1}).`,
        l.line,
      );
    }
    const kept = pathIndexOfFileIndex.get(index);
    if (kept !== undefined && kept > i) throw new PiImportError(`compaction's firstKeptEntryIndex ${index} points after the compaction itself.`, l.line);
    // Index of the header: pi's migration finds no entry id there and keeps nothing.
    firstKept.set(i, kept ?? body.length);
  });
  return { format: 'linear', path: body, offBranch: 0, firstKept };
}

function treePath(body: PiLine[]): PiPath {
  const byId = new Map<string, PiLine>();
  for (const l of body) {
    const id = l.entry.id;
    if (typeof id !== 'string' || id === '')
      throw new PiImportError(`entry of type ${JSON.stringify(l.entry.type)} has no id, in a file whose entries have id/parentId.`, l.line);
    if (byId.has(id)) throw new PiImportError(`entry id ${JSON.stringify(id)} is used twice (first on line ${byId.get(id)!.line}).`, l.line);
    byId.set(id, l);
  }
  const path: PiLine[] = [];
  const seen = new Set<string>();
  let current: PiLine | undefined = body[body.length - 1];
  while (current) {
    const id = current.entry.id as string;
    if (seen.has(id)) throw new PiImportError(`entry ${JSON.stringify(id)} is its own ancestor (a parentId cycle).`, current.line);
    seen.add(id);
    path.push(current);
    const parent = current.entry.parentId;
    if (parent === null || parent === undefined) break;
    const next = typeof parent === 'string' ? byId.get(parent) : undefined;
    if (!next)
      throw new PiImportError(
        `entry ${JSON.stringify(id)} names parent ${JSON.stringify(parent)}, which is not in the file: the branch is broken.`,
        current.line,
      );
    current = next;
  }
  path.reverse();
  const indexOnPath = new Map(path.map((l, i) => [l.entry.id as string, i]));
  const firstKept = new Map<number, number>();
  path.forEach((l, i) => {
    if (l.entry.type !== 'compaction') return;
    const kept = l.entry.firstKeptEntryId;
    if (typeof kept !== 'string' || !byId.has(kept)) {
      throw new PiImportError(`compaction's firstKeptEntryId ${JSON.stringify(kept)} points at no entry in the file.`, l.line);
    }
    const k = indexOnPath.get(kept);
    if (k !== undefined && k > i) throw new PiImportError(`compaction's firstKeptEntryId ${JSON.stringify(kept)} points after the compaction itself.`, l.line);
    // On another branch: pi's walk never meets it and keeps nothing before the compaction.
    firstKept.set(i, k ?? path.length);
  });
  return { format: 'tree', path, offBranch: body.length - path.length, firstKept };
}

// ---------------------------------------------------------------------------------------------
// pi's rendering of its own message kinds as the user text it sends (messages.ts, convertToLlm)

const COMPACTION_SUMMARY_PREFIX = 'The conversation history before this point was compacted into the following summary:\n\n<summary>\n';
const COMPACTION_SUMMARY_SUFFIX = '\n</summary>';
const BRANCH_SUMMARY_PREFIX = 'The following is a summary of a branch that this conversation came back from:\n\n<summary>\n';
const BRANCH_SUMMARY_SUFFIX = '</summary>';

export function compactionSummaryText(summary: string): string {
  return COMPACTION_SUMMARY_PREFIX + summary + COMPACTION_SUMMARY_SUFFIX;
}

export function branchSummaryText(summary: string): string {
  return BRANCH_SUMMARY_PREFIX + summary + BRANCH_SUMMARY_SUFFIX;
}

export interface BashExecution {
  command?: unknown;
  output?: unknown;
  exitCode?: unknown;
  cancelled?: unknown;
  truncated?: unknown;
  fullOutputPath?: unknown;
}

/** pi's bashExecutionToText, character for character. */
export function bashExecutionText(m: BashExecution): string {
  let text = `Ran \`${String(m.command ?? '')}\`\n`;
  if (m.output) text += `\`\`\`\n${String(m.output)}\n\`\`\``;
  else text += '(no output)';
  if (m.cancelled) text += '\n\n(command cancelled)';
  else if (m.exitCode !== null && m.exitCode !== undefined && m.exitCode !== 0) text += `\n\nCommand exited with code ${String(m.exitCode)}`;
  if (m.truncated && m.fullOutputPath) text += `\n\n[Output truncated. Full output: ${String(m.fullOutputPath)}]`;
  return text;
}

/** Entry types pi records for itself and never sends to the model. */
export const PI_UNSENT_ENTRY_TYPES = new Set(['thinking_level_change', 'model_change', 'custom', 'label', 'session_info']);
