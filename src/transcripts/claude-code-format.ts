/**
 * A Claude Code session file (`~/.claude/projects/<project>/<session>.jsonl`) as Claude Code
 * reads it back: which records are on the active branch. Pure: no session, no tokens.
 *
 * Records are linked as a tree by `uuid` / `parentUuid`. The active branch is the path from
 * the last conversation record to the root; a `compact_boundary` has no parent but names the
 * record before it by `logicalParentUuid`, so the walk goes on through it (the history it
 * compacted is imported, then shadowed by the compaction's checkpoint). One API response is
 * written as several records (one per content block) sharing `message.id`, and parallel tool
 * calls hang their results off their own block's record, so those siblings are off the walked
 * path although Claude sent them: they are taken back in (same `message.id`, or a result to
 * a call on the branch). Records of real other branches (an edited prompt, a rewind) stay out.
 */
import { TranscriptImportError, obj, str, type JsonLine } from './common';

export interface ClaudeBranch {
  /** The records Claude Code built its context from, in file order. */
  records: JsonLine[];
  /** Conversation records of the file that are not on the branch (other branches, sidechains). */
  offBranch: number;
  sidechain: number;
  /** Set when the walk met a parent that is not in the file: the line of the record naming it. */
  brokenAt: number | undefined;
  /** Records repeating the uuid of an earlier one (left out: the first stands). */
  repeated: number;
}

const CONVERSATION = new Set(['user', 'assistant', 'system']);

export function isClaudeConversationRecord(r: Record<string, unknown>): boolean {
  return CONVERSATION.has(String(r.type)) && typeof r.uuid === 'string';
}

function toolUseIds(r: Record<string, unknown>): string[] {
  const content = obj(r.message)?.content;
  if (!Array.isArray(content)) return [];
  return content.filter((b) => obj(b)?.type === 'tool_use' && typeof obj(b)!.id === 'string').map((b) => (b as { id: string }).id);
}

function resultIds(r: Record<string, unknown>): string[] | undefined {
  const content = obj(r.message)?.content;
  if (!Array.isArray(content) || content.length === 0) return undefined;
  const ids: string[] = [];
  for (const b of content) {
    const block = obj(b);
    if (block?.type !== 'tool_result' || typeof block.tool_use_id !== 'string') return undefined;
    ids.push(block.tool_use_id);
  }
  return ids;
}

export function claudeActiveBranch(lines: JsonLine[]): ClaudeBranch {
  // Every record with a uuid is a node of the tree (newer Claude Code versions link progress
  // and attachment records into it too); only conversation records are imported.
  const byUuid = new Map<string, JsonLine>();
  let repeated = 0;
  for (const l of lines) {
    const id = l.record.uuid;
    if (typeof id !== 'string' || id === '') continue;
    if (byUuid.has(id)) {
      // A resumed session can repeat records it copied; the first one stands.
      repeated++;
      continue;
    }
    byUuid.set(id, l);
  }
  const conversation = lines.filter((l) => isClaudeConversationRecord(l.record) && byUuid.get(l.record.uuid as string) === l);
  const main = conversation.filter((l) => l.record.isSidechain !== true);
  const leaf = [...main].reverse().find((l) => l.record.type === 'user' || l.record.type === 'assistant');
  const onPath = new Set<string>();
  let brokenAt: number | undefined;
  let current = leaf;
  while (current) {
    const id = current.record.uuid as string;
    if (onPath.has(id)) throw new TranscriptImportError('claude-code', `record ${JSON.stringify(id)} is its own ancestor (a parentUuid cycle); expected a tree.`, { line: current.line });
    onPath.add(id);
    const parent = str(current.record.parentUuid) ?? (current.record.subtype === 'compact_boundary' ? str(current.record.logicalParentUuid) : undefined);
    if (parent === undefined) break;
    const next = byUuid.get(parent);
    if (!next) {
      brokenAt = current.line;
      break;
    }
    current = next;
  }
  // Siblings Claude sent with the branch: the other blocks of a response on it, then results to its calls.
  const responseIds = new Set<string>();
  for (const id of onPath) {
    const r = byUuid.get(id)!.record;
    if (!isClaudeConversationRecord(r)) continue;
    const mid = str(obj(r.message)?.id);
    if (r.type === 'assistant' && mid) responseIds.add(mid);
  }
  const included = new Set([...onPath].filter((id) => isClaudeConversationRecord(byUuid.get(id)!.record)));
  for (const l of main) {
    const mid = str(obj(l.record.message)?.id);
    if (l.record.type === 'assistant' && mid && responseIds.has(mid)) included.add(l.record.uuid as string);
  }
  const calls = new Set<string>();
  const answered = new Set<string>();
  for (const id of included) {
    const r = byUuid.get(id)!.record;
    for (const c of toolUseIds(r)) calls.add(c);
    if (r.type === 'user') for (const c of resultIds(r) ?? []) answered.add(c);
  }
  for (const l of main) {
    if (l.record.type !== 'user' || included.has(l.record.uuid as string)) continue;
    const ids = resultIds(l.record);
    if (ids && ids.every((c) => calls.has(c) && !answered.has(c))) {
      included.add(l.record.uuid as string);
      for (const c of ids) answered.add(c);
    }
  }
  const records = conversation.filter((l) => included.has(l.record.uuid as string));
  const sidechain = conversation.length - main.length;
  return { records, offBranch: main.length - records.filter((l) => l.record.isSidechain !== true).length, sidechain, brokenAt, repeated };
}

/** Claude Code's record types that are bookkeeping, never sent to the model. */
export const CLAUDE_UNSENT_TYPES = new Set(['summary', 'file-history-snapshot', 'queue-operation', 'custom-title', 'tag', 'progress']);
