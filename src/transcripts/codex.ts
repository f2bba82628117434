/**
 * Imports an OpenAI Codex CLI rollout (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) into a
 * Session, so that the imported surface is what Codex really sent. A rollout is
 * `{timestamp, type, payload}` per line; the `response_item` records are the model's
 * history, in order:
 * - `message` (user / developer / assistant), `reasoning` (its summary or content text),
 *   `function_call` / `custom_tool_call` / `local_shell_call` and their outputs; the items of
 *   one model response (reasoning, text, calls) are one assistant message, one step;
 * - `event_msg` `token_count` carries the response's usage (`last_token_usage`), the step's
 *   anchor: Codex writes it before or after the response's items, and repeats it unchanged
 *   with rate-limit updates (a repeat is skipped);
 * - `compacted` is Codex's own compaction: its `replacement_history` (or, from older Codex,
 *   its summary `message`) becomes a checkpoint replacing everything before it. A summary
 *   Codex holds only encrypted (remote compaction) is a checkpoint that says its text is not
 *   available.
 * `event_msg` records other than token_count repeat the history for Codex's UI, and
 * `turn_context` / `session_meta` / ghost snapshots are Codex's own bookkeeping: counted in
 * `notSent`. Unknown records in `ignored`. Bad input is a TranscriptImportError naming the
 * line; nothing is written.
 */
import type { ImageBlock, TextBlock, Usage } from '../session/events';
import type { TranscriptImportOptions } from './claude-code';
import {
  TranscriptBuilder,
  TranscriptImportError,
  copyInto,
  count,
  emptyReport,
  num,
  obj,
  readRecords,
  readTranscriptText,
  requireEmpty,
  requireMessages,
  str,
  type ImportedCall,
  type TranscriptImportReport,
} from './common';
import type { Session } from '../session/session';

const EXPECTED = 'a Codex rollout record ({"timestamp":…,"type":"session_meta"|"turn_context"|"response_item"|"event_msg"|"compacted","payload":{…}})';
export const CODEX_RECORD_TYPES = new Set(['session_meta', 'turn_context', 'response_item', 'event_msg', 'compacted']);
const ENCRYPTED = "[Codex compacted the conversation here; its summary is encrypted (OpenAI's remote compaction), so its text is not available.]";
const UNAVAILABLE = '[Codex compacted the conversation here, but the rollout does not record its summary: the text it sent is not available.]';
const CALL_TYPES = new Set(['function_call', 'custom_tool_call', 'local_shell_call']);
const OUTPUT_TYPES = new Set(['function_call_output', 'custom_tool_call_output']);
/** Response items as the rollouts of early Codex CLI versions wrote them: one per line, unwrapped. */
export const CODEX_ITEM_TYPES = new Set([
  'message',
  'reasoning',
  'function_call',
  'function_call_output',
  'custom_tool_call',
  'custom_tool_call_output',
  'local_shell_call',
  'web_search_call',
  'ghost_snapshot',
]);

/**
 * A line of either rollout layout as `{type, payload}`: early Codex versions wrote a header
 * `{id, timestamp, instructions}`, then each response item bare, with `{"record_type":"state"}`
 * lines between.
 */
export function codexRecord(r: Record<string, unknown>): { type: string; payload: unknown } {
  if ('payload' in r || CODEX_RECORD_TYPES.has(String(r.type))) return { type: String(r.type), payload: r.payload };
  if (r.record_type === 'state') return { type: 'state', payload: r };
  if (r.type === undefined && typeof r.id === 'string' && typeof r.timestamp === 'string') return { type: 'session_meta', payload: r };
  if (CODEX_ITEM_TYPES.has(String(r.type))) return { type: 'response_item', payload: r };
  return { type: String(r.type), payload: r.payload };
}

/** One model response being gathered from its items. */
interface Response {
  line: number;
  text: string[];
  reasoning: string[];
  calls: ImportedCall[];
  usage: Usage | undefined;
  model: string;
  contextWindow: number | undefined;
}

export function importCodexTranscript(target: Session, jsonl: string, options: TranscriptImportOptions = {}): TranscriptImportReport {
  requireEmpty('codex', target);
  const walk = readRecords('codex', jsonl, EXPECTED);
  const lines = walk.records;
  const report = emptyReport('codex', walk);
  const b = new TranscriptBuilder(report, options.tools);
  if (options.systemPrompt !== undefined) b.system(options.systemPrompt);
  let provider = 'openai';
  let model = 'unknown';
  /** The window Codex recorded for the model (`model_context_window`), the latest before each response. */
  let contextWindow: number | undefined;
  let response: Response | undefined;
  /** Usage that came before the items of its response. */
  let pendingUsage: Usage | undefined;
  let lastTotal: string | undefined;
  /** The last response written, while no item of another has come: usage written after its items. */
  let awaitingUsage: Response | undefined;
  /** What to write, in order; written once the whole file is read (usage may come after its response's results). */
  const queue: Array<{ line: number; write: () => void }> = [];
  let line = 0;
  /** Calls of written responses whose output has not come yet. */
  const awaiting = new Set<string>();
  /**
   * Developer and system messages Codex wrote between a call and its output (an approval
   * flow): written after the outputs they came between, so the calls keep their real results.
   */
  const deferred: Array<{ line: number; write: () => void }> = [];
  let movedAfterResults = 0;
  let recordedSystem = false;
  const releaseDeferred = () => {
    queue.push(...deferred.splice(0));
  };
  // Some rollouts (Codex Desktop) record the user's prompts only as `event_msg` user_message
  // events, not as response items: those are then the prompts the model was sent.
  const promptsFromEvents = !lines.some((l) => {
    const { type, payload } = codexRecord(l.record);
    const p = obj(payload);
    return type === 'response_item' && p?.type === 'message' && p.role === 'user';
  });
  const open = (): Response => {
    if (!response) {
      releaseDeferred();
      awaiting.clear();
      response = { line, text: [], reasoning: [], calls: [], usage: pendingUsage, model, contextWindow };
      pendingUsage = undefined;
      awaitingUsage = undefined;
    }
    return response;
  };
  /** A response is written when its first non-response item comes; results wait in `queue` until then. */
  const flush = () => {
    if (response) {
      const r = response;
      response = undefined;
      awaitingUsage = r.usage ? undefined : r;
      for (const c of r.calls) awaiting.add(c.id);
      queue.push({
        line: r.line,
        write: () =>
          b.reply({
            ...(r.text.length > 0 ? { text: r.text.join('\n\n') } : {}),
            ...(r.reasoning.length > 0 ? { reasoning: r.reasoning.join('\n\n') } : {}),
            calls: r.calls,
            ...(r.usage ? { usage: r.usage } : {}),
            provider,
            model: r.model,
            ...(r.contextWindow ? { contextWindow: r.contextWindow } : {}),
          }),
      });
    }
  };

  for (const l of lines) {
    const record = l.record;
    line = l.line;
    try {
      const { type, payload } = codexRecord(record);
      const p = obj(payload);
      if (type === 'state') {
        count(report.notSent, 'state');
        continue;
      }
      if (!CODEX_RECORD_TYPES.has(type)) {
        count(report.ignored, `record:${type}`);
        continue;
      }
      if (!p) throw new Error(`a ${type} record without its payload object; expected ${EXPECTED}.`);
      if (type === 'session_meta') {
        provider = str(p.model_provider) || provider;
        // The instructions Codex sent as its system prompt (`base_instructions`, or an early rollout's `instructions`).
        const instructions = str(obj(p.base_instructions)?.text) ?? str(p.base_instructions) ?? str(p.instructions);
        if (options.systemPrompt === undefined && instructions && !recordedSystem) {
          recordedSystem = true;
          queue.push({ line, write: () => b.system(instructions) });
          count(report.rendered, 'system prompt (recorded instructions)');
        }
        count(report.notSent, 'session_meta');
      } else if (type === 'turn_context') {
        model = str(p.model) || model;
        count(report.notSent, 'turn_context');
      } else if (type === 'event_msg') {
        const recordedWindow = num(p.model_context_window) || num(obj(p.info)?.model_context_window);
        if (recordedWindow > 0) {
          contextWindow = recordedWindow;
          if (response) response.contextWindow ??= recordedWindow;
        }
        if (promptsFromEvents && p.type === 'user_message' && typeof p.message === 'string') {
          flush();
          releaseDeferred();
          awaiting.clear();
          const text = p.message;
          const images = arr(p.images).filter((u): u is string => typeof u === 'string' && u !== '');
          queue.push({ line, write: () => b.user([{ type: 'text', text }, ...images.map((url) => ({ type: 'image' as const, url }))]) });
          continue;
        }
        if (p.type !== 'token_count') {
          count(report.notSent, `event_msg:${String(p.type)}`);
          continue;
        }
        const info = obj(p.info);
        const last = obj(info?.last_token_usage);
        if (!last) continue;
        const total = JSON.stringify(info?.total_token_usage ?? last);
        if (total === lastTotal) continue; // the same report again, with new rate limits
        lastTotal = total;
        const usage: Usage = {
          promptTokens: num(last.input_tokens),
          completionTokens: num(last.output_tokens),
          cachedTokens: num(last.cached_input_tokens),
          ...(num(last.reasoning_output_tokens) > 0 ? { reasoningTokens: num(last.reasoning_output_tokens) } : {}),
        };
        if (response && !response.usage) response.usage = usage;
        else if (awaitingUsage) {
          awaitingUsage.usage = usage;
          awaitingUsage = undefined;
        } else pendingUsage = usage;
      } else if (type === 'compacted') {
        flush();
        const content = compactedContent(p, report);
        const summary = str(p.message) || content.map((c) => (c.type === 'text' ? c.text : '')).join('\n\n');
        queue.push({ line, write: () => b.compaction(content, summary, 0) });
      } else {
        item(p);
      }
    } catch (err) {
      if (err instanceof TranscriptImportError) throw err;
      throw new TranscriptImportError('codex', (err as Error).message, { line, cause: err });
    }
  }
  flush();
  releaseDeferred();
  if (movedAfterResults > 0) {
    report.warnings.push(
      `${movedAfterResults} developer/system message${movedAfterResults === 1 ? '' : 's'} written between a call and its output (an approval flow) imported after the outputs, so each call keeps its real result`,
    );
  }
  for (const q of queue) {
    try {
      q.write();
    } catch (err) {
      if (err instanceof TranscriptImportError) throw err;
      throw new TranscriptImportError('codex', (err as Error).message, { line: q.line, cause: err });
    }
  }
  requireMessages('codex', report, EXPECTED);
  copyInto(target, b.finish());
  return report;

  function item(p: Record<string, unknown>): void {
    const t = String(p.type);
    if (t === 'message') {
      const role = String(p.role);
      if (role === 'assistant') {
        const text = textOf(p.content, report);
        if (text) open().text.push(text);
        return;
      }
      if (role !== 'user' && role !== 'developer' && role !== 'system')
        throw new Error(`a message of role ${JSON.stringify(p.role)}; expected user, developer or assistant.`);
      flush();
      const blocks = userBlocks(p.content, report);
      const write = { line, write: () => b.user(blocks, role === 'user' ? undefined : `${role} message`) };
      if (role !== 'user' && awaiting.size > 0) {
        deferred.push(write);
        movedAfterResults++;
        return;
      }
      releaseDeferred();
      awaiting.clear();
      queue.push(write);
      return;
    }
    if (t === 'reasoning') {
      const texts = [...arr(p.content), ...arr(p.summary)].map((s) => str(obj(s)?.text) ?? '').filter((s) => s !== '');
      if (texts.length > 0) open().reasoning.push(texts.join('\n\n'));
      else if (p.encrypted_content) open(); // reasoning kept only encrypted: nothing readable, but part of the response
      return;
    }
    if (CALL_TYPES.has(t)) {
      const id = str(p.call_id) ?? str(p.id);
      const name = t === 'local_shell_call' ? 'local_shell' : str(p.name);
      if (!id || !name) throw new Error(`a ${t} without its call_id or name; expected {"type":"${t}","name":…,"call_id":…}.`);
      const args =
        t === 'function_call'
          ? (str(p.arguments) ?? JSON.stringify(p.arguments ?? {}))
          : t === 'custom_tool_call'
            ? String(p.input ?? '')
            : JSON.stringify(p.action ?? {});
      open().calls.push({ id, name, arguments: args });
      return;
    }
    if (OUTPUT_TYPES.has(t)) {
      const id = str(p.call_id);
      if (!id) throw new Error(`a ${t} without its call_id; expected {"type":"${t}","call_id":…,"output":…}.`);
      flush();
      const { content, isError } = outputOf(p.output, report);
      queue.push({ line, write: () => b.result(id, content, isError ? { isError } : {}) });
      awaiting.delete(id);
      if (awaiting.size === 0) releaseDeferred();
      return;
    }
    if (t === 'ghost_snapshot') count(report.notSent, 'ghost_snapshot');
    else count(report.ignored, `response_item:${t}`);
  }
}

export async function importCodexFile(session: Session, path: string, options: TranscriptImportOptions = {}): Promise<TranscriptImportReport> {
  const text = await readTranscriptText('codex', path);
  try {
    return importCodexTranscript(session, text, options);
  } catch (err) {
    throw err instanceof TranscriptImportError ? err.inFile(path) : err;
  }
}

const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

function textOf(content: unknown, report: TranscriptImportReport): string {
  if (typeof content === 'string') return content;
  const out: string[] = [];
  for (const c of arr(content)) {
    const part = obj(c);
    if (typeof part?.text === 'string') out.push(part.text);
    else if (part?.type === 'refusal' && typeof part.refusal === 'string') out.push(part.refusal);
    else count(report.ignored, `assistant content:${String(part?.type)}`);
  }
  return out.join('\n\n');
}

function userBlocks(content: unknown, report: TranscriptImportReport): Array<TextBlock | ImageBlock> {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  const out: Array<TextBlock | ImageBlock> = [];
  for (const c of arr(content)) {
    const part = obj(c);
    if (typeof part?.text === 'string') out.push({ type: 'text', text: part.text });
    else if (part?.type === 'input_image' && typeof part.image_url === 'string' && part.image_url) out.push({ type: 'image', url: part.image_url });
    else if (part?.type === 'input_image') count(report.ignored, 'image without a url');
    else count(report.ignored, `content:${String(part?.type)}`);
  }
  return out;
}

/**
 * A call's output. Codex's shell tools answer `{"output": …, "metadata": {"exit_code": n}}` as
 * a string the model reads as is; a non-zero exit code (or `success: false`) marks an error.
 */
function outputOf(output: unknown, report: TranscriptImportReport): { content: Array<TextBlock | ImageBlock>; isError: boolean } {
  if (typeof output === 'string') {
    let isError = false;
    if (output.startsWith('{')) {
      try {
        const parsed = obj(JSON.parse(output));
        const code = obj(parsed?.metadata)?.exit_code;
        isError = (typeof code === 'number' && code !== 0) || parsed?.success === false;
      } catch {
        // plain text that happens to start with a brace
      }
    }
    return { content: [{ type: 'text', text: output }], isError };
  }
  const o = obj(output);
  if (o && ('content' in o || 'success' in o)) {
    const inner = outputOf(o.content ?? '', report);
    return { content: inner.content, isError: o.success === false || inner.isError };
  }
  if (Array.isArray(output)) return { content: userBlocks(output, report), isError: false };
  return { content: [{ type: 'text', text: JSON.stringify(output ?? '') }], isError: false };
}

/** What Codex sent in the history's place after a compaction, as one checkpoint's blocks. */
function compactedContent(p: Record<string, unknown>, report: TranscriptImportReport): Array<TextBlock | ImageBlock> {
  const history = p.replacement_history;
  if (!Array.isArray(history)) {
    const message = str(p.message);
    if (message) {
      count(report.notSent, 'compaction without replacement_history (only its summary is kept)');
      return [{ type: 'text', text: message }];
    }
    report.summariesUnavailable++;
    return [{ type: 'text', text: UNAVAILABLE }];
  }
  const out: Array<TextBlock | ImageBlock> = [];
  let readable = false;
  for (const h of history) {
    const item = obj(h) ?? {};
    const t = String(item.type);
    if (t === 'message') {
      const blocks = userBlocks(item.content, report);
      if (item.role === 'assistant') out.push({ type: 'text', text: `(assistant) ${blocks.map((x) => (x.type === 'text' ? x.text : '')).join('\n\n')}` });
      else out.push(...blocks);
      readable ||= blocks.length > 0;
    } else if (item.encrypted_content !== undefined && item.encrypted_content !== null) {
      out.push({ type: 'text', text: ENCRYPTED });
    } else if (t !== 'ghost_snapshot') count(report.ignored, `replacement_history:${t}`);
  }
  if (out.some((x) => x.type === 'text' && x.text === ENCRYPTED)) report.summariesUnavailable++;
  else if (!readable) {
    report.summariesUnavailable++;
    out.push({ type: 'text', text: str(p.message) || UNAVAILABLE });
  }
  return out;
}
