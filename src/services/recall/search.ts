/**
 * Runs one recall request against the index and writes the answer the model reads: the
 * matching originals with where they were, newest first, cut to the token budget, with a note
 * of what else matched. A text or path query narrows its candidates with the word index; a
 * regular expression checks every entry (the shadowed text, never the whole log) with a
 * linear-time engine under a time budget that also holds inside one long text.
 */
import type { RecallEntry } from './entries';
import { RECALL_MAX_TOKENS_CAP, RecallError, type RecallQuery, type RecallRequest } from './args';
import { parseHandle } from './handles';
import type { RecallIndex } from './recall-index';
import { BudgetExceeded } from './linear-regex';
import { redactForExcerpt, redactSecrets, type RedactionSettings } from '../redaction';

export interface RecallAnswer {
  /** What the tool returns to the model (also an error's explanation). */
  text: string;
  /** The arguments could not be used (the text says how to fix them). */
  isError: boolean;
  /** Entries that matched. */
  matches: number;
  /** Entries shown in `text` (in whole or cut). */
  shown: number;
}

export interface SearchOptions {
  /** Tokens of a text (default: the reference heuristic, ceil(length / 4)). */
  countTokens?: (text: string) => number;
  /** Stops a regular-expression scan after this long, saying how much it searched (default 60 ms). */
  scanBudgetMs?: number;
  now?: () => number;
  /**
   * Secrets in what the answer shows become `[REDACTED:<kind>]` (default on): each text is
   * redacted whole before a window of it is cut, so a window's edge never shows part of one.
   */
  redaction?: RedactionSettings;
}

interface Hit {
  id: number;
  /** Match offsets in the entry's text (at most MAX_WINDOWS kept); empty: show the head. */
  at: Array<[number, number]>;
  /** Show the whole text (a path's own tool result, a handle). */
  whole: boolean;
  group: number;
}

const CONTEXT_CHARS = 400;
const WHOLE_BELOW_CHARS = 1_600;
const MAX_WINDOWS = 3;

const heuristic = (text: string) => Math.ceil(text.length / 4);

export function searchIndex(index: RecallIndex, request: RecallRequest, options: SearchOptions = {}): RecallAnswer {
  const count = options.countTokens ?? heuristic;
  const { query } = request;
  if (query.kind === 'handle') return answerHandle(index, query.text, request, count, options.redaction);
  const { hits, note } = find(index, query, options);
  if (hits.length === 0) return { text: noMatch(index, query, note), isError: false, matches: 0, shown: 0 };
  hits.sort((a, b) => a.group - b.group || index.entry(b.id).seq - index.entry(a.id).seq);
  const head = `recall: ${hits.length} match${hits.length === 1 ? '' : 'es'} for ${describe(query)} in the history off your context, newest first${note ? ` (${note})` : ''}:`;
  return render(index, head, hits, request, count, options.redaction);
}

function describe(q: RecallQuery): string {
  return q.kind === 'regex' ? `/${q.text}/i` : q.kind === 'path' ? `path ${JSON.stringify(q.text)}` : JSON.stringify(q.text);
}

/** Text checked per call once enough has matched: a query that matches everything stays bounded. */
const CHECK_CHARS = 4_000_000;
const ENOUGH_HITS = 25;

/** Candidates newest first, checked until enough matched and the check budget is spent; the rest counted. */
function checkNewestFirst(
  index: RecallIndex,
  candidates: readonly number[],
  matches: (e: RecallEntry, id: number) => Hit | undefined,
): { hits: Hit[]; note?: string } {
  // A copy: a single word's candidates are its postings themselves, which must stay ascending.
  const ids = [...candidates].sort((a, b) => index.entry(b).seq - index.entry(a).seq);
  const hits: Hit[] = [];
  let checked = 0;
  for (let k = 0; k < ids.length; k++) {
    if (checked > CHECK_CHARS && hits.length >= ENOUGH_HITS) {
      const rest = ids.length - k;
      return { hits, note: `${rest} older message${rest === 1 ? '' : 's'} holding the same words not checked` };
    }
    const e = index.entry(ids[k]!);
    checked += e.text.length;
    const hit = matches(e, ids[k]!);
    if (hit) hits.push(hit);
  }
  return { hits };
}

function find(index: RecallIndex, query: Exclude<RecallQuery, { kind: 'handle' }>, options: SearchOptions): { hits: Hit[]; note?: string } {
  const all = () => index.entries.map((_, i) => i);
  if (query.kind === 'text') {
    const needle = query.text.toLowerCase();
    return checkNewestFirst(index, index.candidates(query.text) ?? all(), (e, id) => {
      const at = positions(e.text.toLowerCase(), needle);
      return at.length > 0 || (e.callArguments?.toLowerCase().includes(needle) ?? false) ? { id, at, whole: false, group: 0 } : undefined;
    });
  }
  if (query.kind === 'path') {
    const path = query.text.replace(/^\.\//, '');
    return checkNewestFirst(index, index.candidates(path) ?? all(), (e, id) => {
      if (e.source === 'tool-result' && (e.callArguments?.includes(path) ?? false)) return { id, at: [], whole: true, group: 0 };
      const at = positions(e.text, path);
      return at.length > 0 ? { id, at, whole: false, group: 1 } : undefined;
    });
  }
  const now = options.now ?? Date.now;
  const budget = { now, deadline: now() + (options.scanBudgetMs ?? 60) };
  const hits: Hit[] = [];
  const entries = index.entries;
  // A literal every match holds narrows the entries as a text query's words do (the word
  // index, then a plain substring check): the VM runs only where a match can be.
  const lit = query.pattern.required;
  const only = lit.length >= 2 ? index.candidates(lit) : undefined;
  const ids = only ? [...only].sort((a, b) => a - b) : undefined;
  const total = ids ? ids.length : entries.length;
  // Newest first, so a scan cut short by its time budget has looked at what matters most. The
  // engine is linear in the text and reads the clock as it goes: the budget holds inside a text too.
  for (let k = total - 1; k >= 0; k--) {
    const id = ids ? ids[k]! : k;
    let at: Array<[number, number]>;
    try {
      if ((k & 63) === 0 && now() > budget.deadline) throw new BudgetExceeded();
      const text = entries[id]!.text;
      const lower = lit.length >= 2 || query.pattern.prefix !== '' ? text.toLowerCase() : undefined;
      at = lit.length >= 2 && !lower!.includes(lit) ? [] : query.pattern.matches(text, MAX_WINDOWS, budget, lower);
    } catch (err) {
      if (!(err instanceof BudgetExceeded)) throw err;
      const searched = total - 1 - k;
      return {
        hits,
        note: `searched the newest ${searched} of ${total} messages${ids ? ` holding "${lit}"` : ''} before the time budget ran out: make the pattern more specific, or search for a plain word of it`,
      };
    }
    if (at.length > 0) hits.push({ id, at, whole: false, group: 0 });
  }
  return { hits };
}

function positions(text: string, needle: string): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let i = text.indexOf(needle); i >= 0 && out.length < MAX_WINDOWS; i = text.indexOf(needle, i + Math.max(1, needle.length)))
    out.push([i, i + needle.length]);
  return out;
}

/**
 * Excerpt windows around the matches, widened to line starts and ends nearby, merged when they
 * touch. The text is redacted whole first and the match offsets moved onto the redacted text: a
 * window that ends inside a secret ends at its mark instead, so no `…` ever follows a piece of one.
 */
function excerpt(original: string, hit: Hit, redaction: RedactionSettings | undefined): string {
  const clean = redactForExcerpt(original, redaction);
  const text = clean.text;
  if (hit.whole || text.length <= WHOLE_BELOW_CHARS) return text;
  const found = hit.at.map(([a, b]): [number, number] => [clean.at(a, 'start'), clean.at(b, 'end')]);
  const spans = (found.length > 0 ? found : [[0, 0] as [number, number]]).map(([a, b]) => widen(text, a, b));
  const merged: Array<[number, number]> = [];
  for (const s of spans) {
    const last = merged[merged.length - 1];
    if (last && s[0] <= last[1]) last[1] = Math.max(last[1], s[1]);
    else merged.push([...s]);
  }
  let out = '';
  let at = 0;
  for (const [a, b] of merged) {
    if (a > at) out += at === 0 && out === '' ? '…' : '\n…\n';
    out += text.slice(a, b);
    at = b;
  }
  if (at < text.length) out += '…';
  return out;
}

function widen(text: string, a: number, b: number): [number, number] {
  let start = Math.max(0, a - CONTEXT_CHARS);
  const nl = text.lastIndexOf('\n', a);
  if (nl >= 0 && nl + 1 < start && a - nl <= CONTEXT_CHARS * 2) start = nl + 1;
  else if (start > 0) {
    const line = text.indexOf('\n', start);
    if (line >= 0 && line < a) start = line + 1;
  }
  let end = Math.min(text.length, b + CONTEXT_CHARS);
  const after = text.lastIndexOf('\n', end);
  if (after > b) end = after;
  return [start, end];
}

export function whereOf(e: RecallEntry, redaction?: RedactionSettings): string {
  const parts: string[] = [e.turn === null ? 'before the first turn' : `turn ${e.turn}`];
  if (e.source === 'tool-result') {
    // Redacted before it is cut: a secret in the arguments goes whole or not at all.
    const call = e.callArguments === undefined ? undefined : redactSecrets(e.callArguments, redaction).text;
    const args = call === undefined ? '' : ` ${call.length > 160 ? `${call.slice(0, 160)}…` : call}`;
    parts.push(`result of ${e.toolName ?? 'a tool call'}${args} (call ${e.callId})`);
  } else parts.push(e.source === 'assistant' ? 'your message' : 'user message');
  parts.push(`seq ${e.seq}`);
  if (e.pruned !== undefined)
    parts.push(e.checkpoint !== undefined ? `pruned (${e.pruned}), then condensed into checkpoint ${e.checkpoint}` : `pruned (${e.pruned})`);
  else if (e.checkpoint !== undefined) parts.push(`condensed into checkpoint ${e.checkpoint}`);
  return parts.join(' · ');
}

function render(
  index: RecallIndex,
  head: string,
  hits: readonly Hit[],
  request: RecallRequest,
  count: (t: string) => number,
  redaction: RedactionSettings | undefined,
): RecallAnswer {
  const budget = request.maxTokens;
  const blocks: string[] = [head];
  let used = count(head);
  let shown = 0;
  let restTokens = 0;
  for (const hit of hits) {
    const e = index.entry(hit.id);
    const where = `\n[${shown + 1}] ${whereOf(e, redaction)}\n`;
    const block = `${where}${excerpt(e.text, hit, redaction)}`;
    const cost = count(block);
    if (restTokens === 0 && used + cost <= budget) {
      blocks.push(block);
      used += cost;
      shown++;
      continue;
    }
    // A whole text that does not fit may still fit as an excerpt (a checkpoint's long tool output).
    const short = hit.whole ? `${where}${excerpt(e.text, { ...hit, whole: false }, redaction)}` : block;
    const shortCost = short === block ? cost : count(short);
    if (restTokens === 0 && shown > 0 && used + shortCost <= budget) {
      blocks.push(short);
      used += shortCost;
      shown++;
      continue;
    }
    if (shown === 0) {
      // Nothing fits whole: the first match, cut to the budget (its head, where a whole text starts).
      const room = Math.max(0, budget - used - 40);
      const keep = Math.floor((block.length * room) / Math.max(1, cost));
      blocks.push(`${block.slice(0, keep)}\n[… cut: ${block.length - keep} more characters of this message]`);
      used = budget;
      shown = 1;
      continue;
    }
    restTokens += shortCost;
  }
  const more = hits.length - shown;
  const notes: string[] = [];
  if (more > 0) {
    const wider = budget < RECALL_MAX_TOKENS_CAP ? `, or ask again with a larger maxTokens (up to ${RECALL_MAX_TOKENS_CAP})` : '';
    notes.push(`… ${more} more match${more === 1 ? '' : 'es'} not shown (about ${restTokens} tokens): narrow the query${wider}.`);
  }
  if (request.askedTokens !== undefined) notes.push(`(maxTokens ${request.askedTokens} is above the cap: answered within ${RECALL_MAX_TOKENS_CAP}.)`);
  return { text: [...blocks, ...(notes.length > 0 ? ['', ...notes] : [])].join('\n'), isError: false, matches: hits.length, shown };
}

function noMatch(index: RecallIndex, query: RecallQuery, note: string | undefined): string {
  const n = index.entries.length;
  if (n === 0) return `recall: no match for ${describe(query)}: nothing has been condensed or pruned yet, so everything is still in your context.`;
  return `recall: no match for ${describe(query)} in the ${n} message${n === 1 ? '' : 's'} off your context (condensed or pruned)${note ? `; ${note}` : ''}.`;
}

function answerHandle(
  index: RecallIndex,
  handle: string,
  request: RecallRequest,
  count: (t: string) => number,
  redaction: RedactionSettings | undefined,
): RecallAnswer {
  const parsed = parseHandle(handle);
  const known = () => {
    const cps = index.checkpoints
      .slice(-6)
      .map((c) => c.handle)
      .reverse();
    const prs = index.prunedHandles(6);
    const list = [...cps, ...prs];
    return list.length === 0 ? 'nothing has been condensed or pruned yet' : `handles named in your context look like ${list.join(', ')}`;
  };
  if (parsed === undefined)
    throw new RecallError(
      `"${handle}" is not a handle (cp-N for a checkpoint, pr-N for a pruned result); ${known()}. To search text, send {"query": ${JSON.stringify(handle)}}.`,
    );
  if (parsed.kind === 'pruned') {
    const id = index.pruned(handle);
    if (id === undefined) throw new RecallError(`no pruned result has handle ${handle}; ${known()}.`);
    const e = index.entry(id);
    const hits = [{ id, at: [], whole: true, group: 0 }];
    return render(
      index,
      `recall: the full text of pruned ${e.source === 'tool-result' ? 'tool result' : 'message'} ${handle}:`,
      hits,
      request,
      count,
      redaction,
    );
  }
  const info = index.checkpoint(handle);
  if (info === undefined) throw new RecallError(`no checkpoint has handle ${handle}; ${known()}.`);
  const ids = index.entriesOf(info);
  if (ids.length === 0)
    return { text: `recall: checkpoint ${handle} condensed nothing that can be recalled (only earlier summaries).`, isError: false, matches: 0, shown: 0 };
  const hits = ids.map((id) => ({ id, at: [], whole: true, group: 0 }));
  const merged = info.merged.length > 0 ? ` (with the earlier checkpoint${info.merged.length > 1 ? 's' : ''} ${info.merged.join(', ')} merged into it)` : '';
  return render(
    index,
    `recall: the ${ids.length} message${ids.length === 1 ? '' : 's'} checkpoint ${handle} condensed${merged}, in order:`,
    hits,
    request,
    count,
    redaction,
  );
}
