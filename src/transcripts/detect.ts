/**
 * Which transcript a JSONL file is, each format recognised by its own records: an xcompact
 * session log, a pi transcript, a Claude Code session or a Codex rollout. A file is of a
 * format when its records are that format's (a line of another shape, or one the format
 * does not know, counts against it); a file none of them claims is refused by the caller,
 * naming the formats tried, never read as an empty conversation.
 */
import { EVENT_TYPES } from '../session/events';
import { walkRecords } from './records';

export type TranscriptFormat = 'xcompact' | 'pi' | 'claude-code' | 'codex';

export const FORMAT_LABELS: Record<TranscriptFormat, string> = {
  xcompact: 'xcompact session ({"seq":0,"type":"turn/start",…})',
  pi: 'pi transcript ({"type":"session"|"message","message":{"role":…}})',
  'claude-code': 'Claude Code session ({"type":"user"|"assistant","uuid":…,"message":{…}})',
  codex: 'Codex rollout ({"timestamp":…,"type":"session_meta"|"response_item"|…,"payload":{…}})',
};

const XCOMPACT_TYPES = new Set<string>(EVENT_TYPES);
const PI_ROLES = new Set(['user', 'assistant', 'toolResult', 'bashExecution', 'custom', 'hookMessage', 'branchSummary', 'compactionSummary']);
const PI_TYPES = new Set([
  'session',
  'message',
  'model_change',
  'thinking_level_change',
  'compaction',
  'custom_message',
  'branch_summary',
  'custom',
  'label',
  'session_info',
]);
const CLAUDE_TYPES = new Set(['user', 'assistant', 'system', 'summary', 'file-history-snapshot', 'queue-operation', 'custom-title', 'tag', 'progress']);
const CODEX_TYPES = new Set(['session_meta', 'turn_context', 'response_item', 'event_msg', 'compacted']);
const LEGACY_CODEX_ITEMS = new Set(['reasoning', 'function_call', 'function_call_output', 'custom_tool_call', 'custom_tool_call_output', 'local_shell_call']);

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** For one record: does it belong to the format, and is it one of its messages (what makes a conversation)? */
const RECOGNISERS: Record<TranscriptFormat, (r: Record<string, unknown>) => { own: boolean; message: boolean }> = {
  xcompact: (r) => {
    const own = typeof r.seq === 'number' && typeof r.type === 'string' && XCOMPACT_TYPES.has(r.type) && typeof r.time === 'string';
    return { own, message: own };
  },
  pi: (r) => {
    if (r.type === 'session') return { own: typeof r.id === 'string' || typeof r.timestamp === 'string', message: false };
    if (r.type === 'message') {
      const m = r.message;
      const ok = isObj(m) && typeof m.role === 'string' && PI_ROLES.has(m.role);
      return { own: ok, message: ok };
    }
    return { own: typeof r.type === 'string' && PI_TYPES.has(r.type) && !('payload' in r) && !('uuid' in r), message: r.type === 'compaction' };
  },
  'claude-code': (r) => {
    if (r.type === 'user' || r.type === 'assistant') {
      const ok = typeof r.uuid === 'string' && 'parentUuid' in r && isObj(r.message) && r.message.role === r.type;
      return { own: ok, message: ok };
    }
    if (r.type === 'system') return { own: typeof r.uuid === 'string', message: r.subtype === 'compact_boundary' };
    const linked = typeof r.uuid === 'string' && 'parentUuid' in r; // any record Claude Code links into its tree
    return { own: typeof r.type === 'string' && (CLAUDE_TYPES.has(r.type) || linked) && !('payload' in r), message: false };
  },
  codex: (r) => {
    const own = typeof r.type === 'string' && CODEX_TYPES.has(r.type) && isObj(r.payload);
    if (own) return { own, message: r.type === 'response_item' || r.type === 'compacted' };
    // The early layout: a header, bare response items (a message's content is typed parts), state lines.
    if (r.record_type === 'state') return { own: true, message: false };
    if (r.type === undefined && typeof r.id === 'string' && typeof r.timestamp === 'string') return { own: true, message: false };
    if (r.type === 'message') {
      const parts =
        Array.isArray(r.content) &&
        r.content.length > 0 &&
        r.content.every((c) => isObj(c) && typeof c.type === 'string' && /^(input|output)_(text|image)$|^refusal$/.test(c.type));
      return { own: parts, message: parts };
    }
    const item = typeof r.type === 'string' && LEGACY_CODEX_ITEMS.has(r.type) && (typeof r.call_id === 'string' || r.type === 'reasoning');
    return { own: item, message: item };
  },
};

export interface Detection {
  /** The format, when one claims the file. */
  format: TranscriptFormat | undefined;
  /** Lines read (non-empty, JSON objects). */
  lines: number;
  /** The first line that is not a JSON object, if any (1-based) and why. */
  badLine: { line: number; reason: string } | undefined;
}

/**
 * The format whose records make up the file: most of the first 200 records are its own, and at
 * least one record in the whole file is one of its messages. Ties go to the first in
 * FORMAT_LABELS order (they cannot happen for real files: the formats share no record shape).
 */
export function detectTranscriptFormat(text: string): Detection {
  // The importers' own walker: merged lines split, a torn last line skipped.
  const walk = walkRecords(text);
  const records = walk.records.map((r) => r.record);
  const badLine = walk.bad;
  let best: { format: TranscriptFormat; own: number } | undefined;
  for (const format of Object.keys(RECOGNISERS) as TranscriptFormat[]) {
    const recognise = RECOGNISERS[format];
    const sample = records.slice(0, 200);
    const own = sample.filter((r) => recognise(r).own).length;
    if (own * 2 <= sample.length) continue;
    if (!records.some((r) => recognise(r).message)) continue;
    if (!best || own > best.own) best = { format, own };
  }
  return { format: best?.format, lines: records.length, badLine };
}
