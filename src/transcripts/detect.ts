/**
 * Which transcript a file is, each format recognised by its own content: an xcompact session
 * log, a pi transcript, a Claude Code session, a Codex rollout (JSONL, by their records) or a
 * Gemini CLI session (one JSON document, or its JSONL layout). A file is of a format when its
 * records are that format's (a line of another shape, or one the format does not know, counts
 * against it); a file none of them claims is refused by the caller with what it is
 * (`describeUnread`: a JSON document that is not JSONL, chat messages, Gemini CLI's prompt log,
 * records of no format read), never read as an empty conversation.
 */
import { EVENT_TYPES } from '../session/events';
import { GEMINI_MESSAGE_TYPES, isGeminiDocument } from './gemini-cli';
import { walkRecords } from './records';

export type TranscriptFormat = 'xcompact' | 'pi' | 'claude-code' | 'codex' | 'gemini-cli';

export const FORMAT_LABELS: Record<TranscriptFormat, string> = {
  xcompact: 'xcompact session ({"seq":0,"type":"turn/start",…})',
  pi: 'pi transcript ({"type":"session"|"message","message":{"role":…}})',
  'claude-code': 'Claude Code session ({"type":"user"|"assistant","uuid":…,"message":{…}})',
  codex: 'Codex rollout ({"timestamp":…,"type":"session_meta"|"response_item"|…,"payload":{…}})',
  'gemini-cli': 'Gemini CLI session ({"sessionId":…,"messages":[{"type":"user"|"gemini"|"info",…}]}, or its JSONL layout)',
};

/** What a file that is one JSON document (not JSONL) holds, when it is no transcript read. */
export type DocumentKind = 'chat-messages' | 'gemini-logs' | 'json';

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
const isChatMessage = (v: unknown): boolean => isObj(v) && typeof v.role === 'string' && 'content' in v;

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
  // The JSONL layout (the document is recognised whole, below): metadata, messages, $set and $rewindTo lines.
  'gemini-cli': (r) => {
    if (typeof r.$rewindTo === 'string' || isObj(r.$set)) return { own: true, message: isObj(r.$set) && Array.isArray(r.$set.messages) };
    if (typeof r.sessionId === 'string' && typeof r.projectHash === 'string' && !('uuid' in r)) return { own: true, message: false };
    const own =
      typeof r.id === 'string' &&
      typeof r.timestamp === 'string' &&
      typeof r.type === 'string' &&
      GEMINI_MESSAGE_TYPES.has(r.type) &&
      'content' in r &&
      !('uuid' in r);
    return { own, message: own && (r.type === 'user' || r.type === 'gemini') };
  },
};

export interface Detection {
  /** The format, when one claims the file. */
  format: TranscriptFormat | undefined;
  /** Lines read (non-empty, JSON objects); for a JSON document, its messages. */
  lines: number;
  /** The first line that is not a JSON object, if any (1-based) and why. */
  badLine: { line: number; reason: string } | undefined;
  /** Set when the file is one JSON document (not JSONL) that no format claims: what it holds. */
  document?: DocumentKind;
}

/** A file that is one JSON document: a Gemini CLI session, or what else it holds; undefined for JSONL (a line per record). */
function detectDocument(text: string): Detection | undefined {
  const t = text.trim();
  if (!t.startsWith('{') && !t.startsWith('[')) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(t);
  } catch {
    return undefined;
  }
  if (isGeminiDocument(value)) return { format: 'gemini-cli', lines: ((value as { messages: unknown[] }).messages ?? []).length, badLine: undefined };
  // One object on one line is a JSONL file of one record: the record detection decides.
  if (isObj(value) && !t.includes('\n')) return undefined;
  const list = Array.isArray(value) ? value : isObj(value) && Array.isArray(value.messages) ? value.messages : undefined;
  let document: DocumentKind = 'json';
  if (list && list.length > 0 && list.every(isChatMessage)) document = 'chat-messages';
  else if (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((e) => isObj(e) && typeof e.sessionId === 'string' && 'messageId' in e && typeof e.message === 'string')
  )
    document = 'gemini-logs';
  return { format: undefined, lines: list?.length ?? 0, badLine: undefined, document };
}

/**
 * What a file no format claims is, in words for a refusal: a JSON document that is not JSONL
 * (chat messages, Gemini CLI's prompt log, another JSON), or records of no format read.
 */
export function describeUnread(d: Detection): string {
  const read = Object.values(FORMAT_LABELS).join('; ');
  switch (d.document) {
    case 'chat-messages':
      return `this is a JSON document of chat messages (role and content), not a session transcript: \`xcompact compact\` reads it; the formats read as transcripts are ${read}`;
    case 'gemini-logs':
      return "this is Gemini CLI's logs.json (the prompts typed, without the model's replies), not a session: pass a session file from ~/.gemini/tmp/<project>/chats/";
    case 'json':
      return `this is a JSON document, not JSONL (one record per line), and not a Gemini CLI session; the formats read are ${read}`;
    default:
      return `not a transcript xcompact reads; tried ${read}, and none describes its ${d.lines} records`;
  }
}

/**
 * The format whose records make up the file: most of the first 200 records are its own, and at
 * least one record in the whole file is one of its messages. Ties go to the first in
 * FORMAT_LABELS order (they cannot happen for real files: the formats share no record shape).
 */
export function detectTranscriptFormat(text: string): Detection {
  const document = detectDocument(text);
  if (document) return document;
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
