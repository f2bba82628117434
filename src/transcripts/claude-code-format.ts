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
  /** Every conversation record is a sidechain: the file is a subagent's own transcript, imported as its conversation. */
  subagent: boolean;
  /** Set when the walk met a parent that is not in the file: the line of the record naming it. */
  brokenAt: number | undefined;
  /** Records repeating the uuid of an earlier one (left out: the first stands). */
  repeated: number;
  /** The file's order disagrees with the tree's (a record before its parent): the records are in the tree's order. */
  outOfOrder: boolean;
  /** Compaction boundaries whose logical parent is not in the file, continued from the record before them. */
  continuedBoundaries: number;
  /** Records whose parent is not in the file, continued from the record written just before them. */
  bridgedGaps: number;
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
  const index = new Map<JsonLine, number>();
  lines.forEach((l, i) => index.set(l, i));
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
  // A subagent's own file (`<session>/subagents/agent-*.jsonl`: a task agent, the compaction
  // call) holds only sidechain records: that sidechain is its conversation.
  const subagent = conversation.length > 0 && conversation.every((l) => l.record.isSidechain === true);
  const main = subagent ? conversation : conversation.filter((l) => l.record.isSidechain !== true);
  const parentOf = new Map<JsonLine, string>();
  const hasChildren = new Set<string>();
  for (const l of byUuid.values()) {
    const parent = str(l.record.parentUuid);
    if (parent !== undefined) {
      parentOf.set(l, parent);
      hasChildren.add(parent);
    }
  }
  // The leaf: the newest conversation record by the tree's own clock (timestamps), else the file's order.
  const leaf = main
    .filter((l) => l.record.type === 'user' || l.record.type === 'assistant')
    .reduce<JsonLine | undefined>((a, l) => (a === undefined || later(l, a, index) ? l : a), undefined);
  const onPath = new Set<string>();
  const path: JsonLine[] = [];
  let brokenAt: number | undefined;
  let continued = 0;
  let bridged = 0;
  let current = leaf;
  while (current) {
    const id = current.record.uuid as string;
    if (onPath.has(id))
      throw new TranscriptImportError('claude-code', `record ${JSON.stringify(id)} is its own ancestor (a parentUuid cycle); expected a tree.`, {
        line: current.line,
      });
    onPath.add(id);
    path.push(current);
    let parent = str(current.record.parentUuid);
    let next = parent === undefined ? undefined : byUuid.get(parent);
    if (parent === undefined && current.record.subtype === 'compact_boundary') {
      // A boundary starts a new chain; the history it compacted is its logical parent, or,
      // when that record is not in the file (Claude Code does not always write it), the tip
      // of the tree just before the boundary: the record the conversation had reached.
      parent = str(current.record.logicalParentUuid);
      next = parent === undefined ? undefined : byUuid.get(parent);
      if (next === undefined || onPath.has(parent!)) {
        next = tipBefore(current, byUuid, hasChildren, onPath, index);
        if (next) continued++;
        else if (parent === undefined) break;
      }
    }
    if (parent === undefined && next === undefined) break;
    if (!next) {
      // A parent Claude Code never wrote (a tool result saved late, a record the saving tool
      // dropped): the branch goes on from the tip just before it, when the file has one.
      next = tipBefore(current, byUuid, hasChildren, onPath, index);
      if (next) bridged++;
    }
    if (!next) {
      brokenAt = current.line;
      break;
    }
    current = next;
  }
  path.reverse();
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
  // The file's order is kept when it agrees with the tree (each record of the branch after the
  // one before it); otherwise the records are put in the tree's order: each off-path sibling
  // right after the record of the branch it hangs from.
  const outOfOrder = path.some((l, i) => i > 0 && index.get(l)! < index.get(path[i - 1]!)!);
  let records = conversation.filter((l) => included.has(l.record.uuid as string));
  if (outOfOrder) {
    const pathIndex = new Map(path.map((l, i) => [l.record.uuid as string, i]));
    const anchor = (l: JsonLine): number => {
      let cur: JsonLine | undefined = l;
      for (let hops = 0; cur && hops < lines.length; hops++) {
        const k = pathIndex.get(cur.record.uuid as string);
        if (k !== undefined) return k;
        const p = parentOf.get(cur);
        cur = p === undefined ? undefined : byUuid.get(p);
      }
      return path.length;
    };
    const key = new Map(records.map((l) => [l, anchor(l)] as const));
    records = [...records].sort((a, b) => {
      const d = key.get(a)! - key.get(b)!;
      if (d !== 0) return d;
      const onA = pathIndex.has(a.record.uuid as string);
      const onB = pathIndex.has(b.record.uuid as string);
      if (onA !== onB) return onA ? -1 : 1;
      return later(a, b, index) ? 1 : later(b, a, index) ? -1 : 0;
    });
  }
  const sidechain = conversation.length - main.length;
  return {
    records,
    subagent,
    offBranch: main.length - records.filter((l) => subagent || l.record.isSidechain !== true).length,
    sidechain,
    brokenAt,
    repeated,
    outOfOrder,
    continuedBoundaries: continued,
    bridgedGaps: bridged,
  };
}

function timeOf(l: JsonLine): number | undefined {
  const t = typeof l.record.timestamp === 'string' ? Date.parse(l.record.timestamp) : NaN;
  return Number.isFinite(t) ? t : undefined;
}

/** Whether `a` was written after `b`: by their timestamps when both have one, else by the file's order. */
function later(a: JsonLine, b: JsonLine, index: Map<JsonLine, number>): boolean {
  const ta = timeOf(a);
  const tb = timeOf(b);
  if (ta !== undefined && tb !== undefined && ta !== tb) return ta > tb;
  return index.get(a)! > index.get(b)!;
}

/**
 * The tip the conversation had reached when `boundary` was written: the newest main-chain
 * record before it that nothing hangs from (else the newest before it), not on the walked path.
 */
function tipBefore(
  boundary: JsonLine,
  byUuid: Map<string, JsonLine>,
  hasChildren: Set<string>,
  onPath: Set<string>,
  index: Map<JsonLine, number>,
): JsonLine | undefined {
  let tip: JsonLine | undefined;
  let any: JsonLine | undefined;
  for (const l of byUuid.values()) {
    const id = l.record.uuid as string;
    if (l === boundary || onPath.has(id) || (l.record.isSidechain === true) !== (boundary.record.isSidechain === true) || !later(boundary, l, index)) continue;
    if (any === undefined || later(l, any, index)) any = l;
    if (!hasChildren.has(id) && (tip === undefined || later(l, tip, index))) tip = l;
  }
  return tip ?? any;
}

/** Claude Code's record types that are bookkeeping, never sent to the model. */
export const CLAUDE_UNSENT_TYPES = new Set(['summary', 'file-history-snapshot', 'queue-operation', 'custom-title', 'tag', 'progress']);
