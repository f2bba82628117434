/**
 * Imports a Gemini CLI session (`~/.gemini/tmp/<project>/chats/session-*.json`) into a
 * Session, so that the imported surface is what Gemini CLI sent. Two layouts:
 * - one JSON document `{sessionId, projectHash, startTime, lastUpdated, messages[]}` (the
 *   files Gemini CLI wrote until it moved to JSONL);
 * - JSONL: a metadata line `{sessionId, projectHash, …}`, then one message record per line (a
 *   message written again when it changes: the last copy stands), `{"$set": {…}}` metadata
 *   updates (`$set.messages` replaces the list: a rebuilt history) and `{"$rewindTo": id}`
 *   (that message and everything after it taken back).
 * A message is `{id, timestamp, type, content}`: `user` a prompt (or, in newer versions, tool
 * responses as `functionResponse` parts, which the calls below already carry), `gemini` one
 * model response — its text, `thoughts[]` (reasoning), `toolCalls[]` (each with its `result`,
 * `functionResponse` parts, and its `status`) and `tokens {input, output, cached, thoughts,
 * tool, total}` (the step's usage: input = the whole prompt, cached included) — and `info`,
 * `error`, `warning` the CLI's own notices, never sent.
 *
 * Gemini CLI's compression sends a `<state_snapshot>` summary in the history's place: where
 * the file records it (a user message holding the snapshot, or a rebuilt list `$set.messages`
 * that drops earlier messages for new ones), it becomes a committed checkpoint holding that
 * text, the messages the rebuilt list kept staying after it. Bad input is a
 * TranscriptImportError naming the line; nothing is written.
 */
import type { ImageBlock, TextBlock, Usage } from '../session/events';
import type { TranscriptImportOptions } from './claude-code';
import {
  TranscriptBuilder,
  TranscriptImportError,
  copyInto,
  count,
  dataUrl,
  emptyReport,
  num,
  obj,
  readTranscriptText,
  requireEmpty,
  requireMessages,
  str,
  type ImportedCall,
  type TranscriptImportReport,
} from './common';
import { walkRecords } from './records';
import type { Session } from '../session/session';

const EXPECTED =
  'a Gemini CLI session ({"sessionId":…,"messages":[{"id":…,"type":"user"|"gemini"|"info",…}]} as one JSON document, or its JSONL layout: a {"sessionId":…} line, then message, {"$set":…} and {"$rewindTo":…} lines)';
export const GEMINI_MESSAGE_TYPES = new Set(['user', 'gemini', 'info', 'error', 'warning']);
const NOTICE_TYPES = new Set(['info', 'error', 'warning']);
/** What Gemini CLI's compression sends in the history's place (chatCompressionService). */
const SNAPSHOT = /^\s*<state_snapshot>/;

type Rec = Record<string, unknown>;
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const isObj = (v: unknown): v is Rec => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A Gemini CLI message as the file records it, with the line it was last written on (1 for a document). */
interface GeminiMessage {
  record: Rec;
  line: number;
}

/** One step of the history as the file's order gives it: a message, or a rebuild that replaced what came before. */
type Step = { kind: 'message'; id: string } | { kind: 'rebuild'; dropped: string[]; added: string[]; line: number };

/** Is `value` (a parsed JSON document) a Gemini CLI session? */
export function isGeminiDocument(value: unknown): boolean {
  if (!isObj(value) || typeof value.sessionId !== 'string' || !Array.isArray(value.messages)) return false;
  return value.messages.length === 0 || value.messages.some((m) => isObj(m) && typeof m.type === 'string' && GEMINI_MESSAGE_TYPES.has(m.type));
}

/** The session's messages in the order Gemini CLI sent them, and the rebuilds between them. */
function historyOf(text: string): {
  messages: Map<string, GeminiMessage>;
  steps: Step[];
  lines: number;
  rewound: number;
  torn: { line: number; chars: number } | undefined;
} {
  const messages = new Map<string, GeminiMessage>();
  const steps: Step[] = [];
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    doc = undefined;
  }
  if (isGeminiDocument(doc)) {
    const list = (doc as Rec).messages as unknown[];
    list.forEach((m, i) => {
      if (!isObj(m) || typeof m.id !== 'string') throw new TranscriptImportError('gemini-cli', `message ${i + 1} has no id; expected ${EXPECTED}.`);
      if (!messages.has(m.id)) steps.push({ kind: 'message', id: m.id });
      messages.set(m.id, { record: m, line: 1 });
    });
    return { messages, steps, lines: text.split('\n').filter((l) => l.trim() !== '').length, rewound: 0, torn: undefined };
  }
  const walk = walkRecords(text);
  if (walk.bad) throw new TranscriptImportError('gemini-cli', `${walk.bad.reason}; expected ${EXPECTED}.`, { line: walk.bad.line });
  let order: string[] = [];
  let rewound = 0;
  for (const { line, record } of walk.records) {
    if (typeof record.$rewindTo === 'string') {
      const at = order.indexOf(record.$rewindTo);
      const gone = at < 0 ? order : order.slice(at);
      rewound += gone.length;
      const goneSet = new Set(gone);
      order = at < 0 ? [] : order.slice(0, at);
      for (let i = steps.length - 1; i >= 0; i--) {
        const s = steps[i]!;
        if (s.kind === 'message' && goneSet.has(s.id)) steps.splice(i, 1);
      }
    } else if (isObj(record.$set)) {
      const list = record.$set.messages;
      if (!Array.isArray(list)) continue;
      const ids = list.filter((m): m is Rec => isObj(m) && typeof m.id === 'string').map((m) => m.id as string);
      const known = new Set(order);
      const added = ids.filter((id) => !known.has(id));
      const kept = new Set(ids);
      const dropped = order.filter((id) => !kept.has(id));
      for (const m of list) if (isObj(m) && typeof m.id === 'string') messages.set(m.id, { record: m, line });
      if (dropped.length > 0 || added.length > 0) steps.push({ kind: 'rebuild', dropped, added, line });
      order = ids;
    } else if (typeof record.id === 'string') {
      if (!messages.has(record.id) || !order.includes(record.id)) {
        steps.push({ kind: 'message', id: record.id });
        order.push(record.id);
      }
      messages.set(record.id, { record, line });
    }
    // The metadata line and any other record: the session's bookkeeping, not the conversation.
  }
  return { messages, steps, lines: walk.lines, rewound, torn: walk.torn };
}

/** A PartListUnion (a string, a part, or parts) as text and images; `thought` parts apart. */
function partsOf(
  content: unknown,
  report: TranscriptImportReport,
): { blocks: Array<TextBlock | ImageBlock>; thoughts: string[]; calls: ImportedCall[]; responses: number } {
  const blocks: Array<TextBlock | ImageBlock> = [];
  const thoughts: string[] = [];
  const calls: ImportedCall[] = [];
  let responses = 0;
  const list = typeof content === 'string' ? [content] : Array.isArray(content) ? content : content === undefined || content === null ? [] : [content];
  for (const p of list) {
    if (typeof p === 'string') {
      if (p !== '') blocks.push({ type: 'text', text: p });
      continue;
    }
    const part = obj(p);
    if (!part) continue;
    if (typeof part.text === 'string') {
      if (part.thought === true) thoughts.push(part.text);
      else if (part.text !== '') blocks.push({ type: 'text', text: part.text });
    } else if (obj(part.inlineData)) {
      const d = obj(part.inlineData)!;
      const mime = str(d.mimeType) ?? '';
      if (typeof d.data === 'string' && mime.startsWith('image/')) blocks.push({ type: 'image', url: dataUrl(mime, d.data) });
      else count(report.ignored, `inline data:${mime || 'unknown'}`);
    } else if (obj(part.functionCall)) {
      const c = obj(part.functionCall)!;
      if (typeof c.name === 'string') calls.push({ id: str(c.id) ?? '', name: c.name, arguments: JSON.stringify(c.args ?? {}) });
    } else if (obj(part.functionResponse)) responses++;
    else count(report.ignored, `part:${Object.keys(part)[0] ?? 'empty'}`);
  }
  return { blocks, thoughts, calls, responses };
}

/** A tool call's recorded result (`functionResponse` parts; `response.output` or `response.error`) as a result's content. */
function resultOf(call: Rec, report: TranscriptImportReport): { content: Array<TextBlock | ImageBlock>; isError: boolean } | undefined {
  const status = str(call.status);
  const failed = status === 'error' || status === 'cancelled';
  const result = call.result;
  if (result === undefined || result === null) {
    return failed ? { content: [{ type: 'text', text: `[the tool call ended ${status} without a result]` }], isError: true } : undefined;
  }
  const content: Array<TextBlock | ImageBlock> = [];
  let isError = failed;
  const list = typeof result === 'string' ? [result] : Array.isArray(result) ? result : [result];
  for (const p of list) {
    if (typeof p === 'string') {
      content.push({ type: 'text', text: p });
      continue;
    }
    const part = obj(p);
    const response = obj(obj(part?.functionResponse)?.response);
    if (response) {
      if (typeof response.error === 'string') {
        isError = true;
        content.push({ type: 'text', text: response.error });
      } else if (typeof response.output === 'string') content.push({ type: 'text', text: response.output });
      else content.push({ type: 'text', text: JSON.stringify(response) });
    } else if (part) content.push(...partsOf([part], report).blocks);
  }
  return { content: content.length > 0 ? content : [{ type: 'text', text: '' }], isError };
}

function usageOf(tokens: unknown): Usage | undefined {
  const t = obj(tokens);
  if (!t || num(t.input) === 0) return undefined;
  const thoughts = num(t.thoughts);
  return {
    promptTokens: num(t.input),
    // Gemini counts thoughts apart from the candidates; OpenAI's completion includes reasoning.
    completionTokens: num(t.output) + thoughts,
    ...(num(t.cached) > 0 ? { cachedTokens: num(t.cached) } : {}),
    ...(thoughts > 0 ? { reasoningTokens: thoughts } : {}),
  };
}

function thoughtsText(thoughts: unknown): string {
  return arr(thoughts)
    .map((t) => {
      const o = obj(t);
      if (!o) return '';
      return [str(o.subject), str(o.description)].filter((x) => x !== undefined && x !== '').join(': ');
    })
    .filter((t) => t !== '')
    .join('\n\n');
}

export function importGeminiTranscript(target: Session, text: string, options: TranscriptImportOptions = {}): TranscriptImportReport {
  requireEmpty('gemini-cli', target);
  const history = historyOf(text);
  const report = emptyReport('gemini-cli', {
    lines: history.lines,
    mergedLines: 0,
    torn: history.torn,
  });
  if (history.rewound > 0) count(report.notSent, 'messages taken back ($rewindTo)', history.rewound);
  const b = new TranscriptBuilder(report, options.tools);
  if (options.systemPrompt !== undefined) b.system(options.systemPrompt);
  /** Seq of the first event each message was written as: where a kept range starts. */
  const firstSeq = new Map<string, number>();
  const write = (id: string) => {
    const m = history.messages.get(id);
    if (!m) return;
    const r = m.record;
    firstSeq.set(id, b.session.length);
    try {
      message(r);
    } catch (err) {
      if (err instanceof TranscriptImportError) throw err;
      throw new TranscriptImportError('gemini-cli', (err as Error).message, { line: m.line, cause: err });
    }
  };
  const message = (r: Rec) => {
    const type = str(r.type) ?? '';
    if (NOTICE_TYPES.has(type)) {
      count(report.notSent, `${type} notice`);
      return;
    }
    if (type === 'user') {
      const parts = partsOf(r.content, report);
      if (parts.responses > 0 && parts.blocks.length === 0) {
        // Newer Gemini CLI records tool responses as a user message too; the calls carry them.
        count(report.notSent, 'tool responses recorded as a user message (imported from their calls)');
        return;
      }
      const words = parts.blocks.map((x) => (x.type === 'text' ? x.text : '')).join('\n');
      if (SNAPSHOT.test(words)) {
        b.compaction(parts.blocks, words, 0);
        return;
      }
      b.user(parts.blocks);
      return;
    }
    if (type !== 'gemini') {
      count(report.ignored, `message type:${type || 'none'}`);
      return;
    }
    const parts = partsOf(r.content, report);
    const recorded = arr(r.toolCalls).filter(isObj);
    const calls: ImportedCall[] = recorded.map((c, i) => {
      if (typeof c.name !== 'string' || c.name === '') throw new Error(`a tool call without its name; expected {"id":…,"name":…,"args":{…},"result":[…]}.`);
      return { id: str(c.id) || `${String(r.id)}-call-${i}`, name: c.name, arguments: JSON.stringify(c.args ?? {}) };
    });
    // A functionCall part whose call the record does not list (toolCalls is authoritative).
    const listed = new Set(calls.map((c) => c.id));
    for (const c of parts.calls)
      if (!listed.has(c.id) && !calls.some((k) => k.name === c.name && k.arguments === c.arguments))
        calls.push({ ...c, id: c.id || `${String(r.id)}-call-${calls.length}` });
    const text = parts.blocks.map((x) => (x.type === 'text' ? x.text : '')).join('\n\n');
    const reasoning = [thoughtsText(r.thoughts), ...parts.thoughts].filter((t) => t !== '').join('\n\n');
    const usage = usageOf(r.tokens);
    b.reply({
      ...(text ? { text } : {}),
      ...(reasoning ? { reasoning } : {}),
      calls,
      ...(usage ? { usage } : {}),
      provider: 'google',
      model: str(r.model) || 'unknown',
    });
    recorded.forEach((c, i) => {
      const result = resultOf(c, report);
      if (result) b.result(calls[i]!.id, result.content, { isError: result.isError, toolName: calls[i]!.name });
    });
  };
  for (const step of history.steps) {
    if (step.kind === 'message') {
      write(step.id);
      continue;
    }
    // A rebuilt list: what it dropped is shadowed by what it added (the compression's summary), what it kept stays.
    const added = step.added.map((id) => history.messages.get(id)?.record).filter((m): m is Rec => m !== undefined);
    const blocks = added.flatMap((m) => partsOf(m.content, report).blocks);
    const summary = blocks.map((x) => (x.type === 'text' ? x.text : '')).join('\n\n');
    if (step.dropped.length === 0 || blocks.length === 0) {
      for (const id of step.added) write(id);
      continue;
    }
    const keptFrom = [...firstSeq.entries()].filter(([id]) => !step.dropped.includes(id) && !step.added.includes(id)).map(([, seq]) => seq);
    b.compaction(blocks, summary, 0, keptFrom.length > 0 ? Math.min(...keptFrom) : undefined);
  }
  requireMessages('gemini-cli', report, EXPECTED);
  copyInto(target, b.finish());
  return report;
}

export async function importGeminiFile(session: Session, path: string, options: TranscriptImportOptions = {}): Promise<TranscriptImportReport> {
  const text = await readTranscriptText('gemini-cli', path);
  try {
    return importGeminiTranscript(session, text, options);
  } catch (err) {
    throw err instanceof TranscriptImportError ? err.inFile(path) : err;
  }
}
