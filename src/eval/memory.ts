/**
 * The three memory measures of a compaction policy (docs/memory.md), as pure functions of the
 * original, uncompacted transcript and of the messages the policy sent at each request:
 *
 * - needed recall: facts are file paths (tokens with a `/` and a file extension, or an
 *   absolute path of two or more segments: `src/a/b.ts`, `./x.js`, `/etc/hosts`), error lines
 *   of tool results, and the string arguments of tool calls (the values of path-, file-,
 *   command- and pattern-like keys, and the shell words of ≥ 6 characters containing a letter
 *   of command values). A fact is needed at request t if it occurs in a message before t and
 *   again in an assistant message (text or tool-call arguments) at or after t — the reply to t
 *   included — in the original transcript. Recall at t is the share of the needed facts present
 *   verbatim in what the policy sends at t (its summaries included); the figure is the mean over
 *   the requests with at least one needed fact.
 * - recall after compaction: the same mean, over the first request after each compaction only.
 * - intent recall: for each user message that is not a checkpoint, its text trimmed when it has
 *   at most 160 characters, else its first line of ≥ 20 characters (trimmed, at most its first
 *   160 characters); at each later request, present verbatim or not; the mean over all (request,
 *   earlier user message) pairs.
 *
 * - recoverable recall: needed recall, where a needed fact missing from the request also counts
 *   when the recall tool returns it verbatim for a literal query naming it (the fact itself, its
 *   first 80 characters for a longer one: a path, a command, an error's first words). A policy
 *   with no recall tool (every peer; xcompact with `recall: false`) has recoverable recall equal
 *   to its needed recall.
 *
 * "Verbatim" is substring presence in a message's text: its content, a tool call's name and
 * arguments (as sent, and their string values unescaped).
 */
import type { ChatMessage } from '../session/derive';
import { isCheckpoint, isSurfaceType, toolCallsOf, type SessionEvent, type SurfaceEvent } from '../session/events';
import { toChatMessage } from '../session/derive';
import { FactIndex } from './fact-index';

/** One message of the original transcript. */
export interface TranscriptMessage {
  message: ChatMessage;
  /** A checkpoint an importer carried over (not a user's words). */
  checkpoint?: boolean;
  /** A tool result the tool reported as failed. */
  isError?: boolean;
}

/** The original transcript: every message in the order it was first sent, and where each request stood. */
export interface Transcript {
  messages: readonly TranscriptMessage[];
  /**
   * For request t, the index in `messages` of its reply (the assistant message it produced):
   * `messages[0 .. replyAt[t])` is the history it was sent with.
   */
  replyAt: readonly number[];
}

/**
 * The original transcript of a session's events: every appended surface message (nothing a
 * later replace shadowed is lost; an imported checkpoint is marked), one request per assistant
 * message.
 */
export function transcriptOf(events: Iterable<SessionEvent>): Transcript {
  const messages: TranscriptMessage[] = [];
  const replyAt: number[] = [];
  for (const e of events) {
    if (!isSurfaceType(e.type) || e.surfaceOp === undefined) continue;
    const event = e as SurfaceEvent;
    if (event.type === 'assistant/message') replyAt.push(messages.length);
    const m: TranscriptMessage = { message: toChatMessage(event) };
    if (isCheckpoint(event)) m.checkpoint = true;
    if (event.type === 'tool/result' && event.data.isError === true) m.isError = true;
    messages.push(m);
  }
  return { messages, replyAt };
}

// ---------------------------------------------------------------------------------------
// Facts

const PATH_TOKEN_SPLIT = /[\s"'`()<>[\]{},;|=]+/;
const FILE_EXTENSION = /\.[A-Za-z][A-Za-z0-9]{0,9}$/;
/** Argument keys whose string value is a fact: paths, files, folders, commands, search patterns. */
const FACT_KEY = /path|file|dir|folder|command|cmd|script|pattern|glob|regex|query/i;
const COMMAND_KEY = /command|cmd|script/i;
const MAX_FACT_CHARS = 300;
/** A tool output line that reports an error (compiler, test runner, shell, runtime). */
const ERROR_LINE =
  /\berror TS\d+\b|\b[A-Z]\w*(?:Error|Exception)\b:|^(?:Error|ERROR|error)\b|\bFAIL(?:ED)?\b|(?<!\b0 )\bfailed\b|Traceback \(most recent call last\)|\bpanic:|\bfatal:|npm ERR!|command not found|No such file or directory|Permission denied|cannot find|not found\b/;
/** Source code that mentions an error without reporting one (`} catch (error) {`, `throw new Error(`). */
const CODE_LINE = /^(?:[{}()[\]]|\/\/|\/\*|\*|#|throw\b|catch\b|if\b|else\b|return\b|const\b|let\b|var\b|function\b|import\b|export\b|class\b|def\b)|[{;,]$/;

/** File paths in a text: tokens with a `/` and a file extension, or absolute paths of two or more segments. */
export function pathsIn(text: string): string[] {
  const out: string[] = [];
  for (const raw of text.split(PATH_TOKEN_SPLIT)) {
    if (!raw.includes('/') || raw.includes('://')) continue;
    // Trailing punctuation and a `:line:column` suffix are not part of the path.
    const t = raw.replace(/[.:!?]+$/, '').replace(/:\d+(?::\d+)?$/, '');
    if (t.length < 3 || t.length > MAX_FACT_CHARS || !/[A-Za-z]/.test(t)) continue;
    const absolute = /^(?:~|\.{1,2})?\/[^/]+\/[^/]/.test(t);
    if (FILE_EXTENSION.test(t) || absolute) out.push(t);
  }
  return out;
}

/** The error lines of a tool result: lines shaped like an error report; for a failed result, also its first line. */
export function errorLinesIn(text: string, failed: boolean): string[] {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.length >= 8 && l.length <= MAX_FACT_CHARS);
  const out = lines.filter((l) => ERROR_LINE.test(l) && !CODE_LINE.test(l));
  if (failed && lines[0] !== undefined && !out.includes(lines[0])) out.unshift(lines[0]);
  return out;
}

/** The string arguments of one tool call that are facts. */
export function argumentFacts(argumentsJson: string): string[] {
  let args: unknown;
  try {
    args = JSON.parse(argumentsJson);
  } catch {
    return [];
  }
  const out: string[] = [];
  const walk = (v: unknown, key: string): void => {
    if (typeof v === 'string') {
      if (!FACT_KEY.test(key)) return;
      const value = v.trim();
      if (value.length > 0 && value.length <= MAX_FACT_CHARS) out.push(value);
      if (COMMAND_KEY.test(key)) {
        for (const w of value.split(/\s+/)) {
          const word = w.replace(/^['"`]+|['"`;]+$/g, '');
          if (word.length >= 6 && word.length <= MAX_FACT_CHARS && /[A-Za-z]/.test(word)) out.push(word);
        }
      }
    } else if (Array.isArray(v)) for (const x of v) walk(x, key);
    else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, k);
  };
  walk(args, '');
  return out;
}

/** The facts one message of the transcript states. */
export function factsOf(m: TranscriptMessage): Set<string> {
  const facts = new Set<string>();
  const msg = m.message;
  for (const p of pathsIn(messageText(msg))) facts.add(p);
  if (msg.role === 'tool') for (const l of errorLinesIn(contentText(msg), m.isError === true)) facts.add(l);
  if (msg.role === 'assistant' && msg.tool_calls) {
    for (const c of msg.tool_calls) if (c.type === 'function') for (const f of argumentFacts(c.function.arguments)) facts.add(f);
  }
  return facts;
}

/** The words of a user message that stand for its intent (undefined: no text). */
export function intentKey(text: string): string | undefined {
  const t = text.trim();
  if (t === '') return undefined;
  if (t.length <= 160) return t;
  const line = t
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l.length >= 20);
  return (line ?? t).slice(0, 160).trim();
}

function contentText(m: ChatMessage): string {
  const c = m.content;
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) return '';
  return (c as Array<{ type: string; text?: string }>).map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('\n');
}

/** Everything a message shows the model, as text: content, tool names, arguments as sent and their string values. */
export function messageText(m: ChatMessage): string {
  const parts = [contentText(m)];
  if (m.role === 'assistant' && m.tool_calls) {
    for (const c of m.tool_calls) {
      if (c.type !== 'function') continue;
      parts.push(c.function.name, c.function.arguments);
      try {
        collectStrings(JSON.parse(c.function.arguments), parts);
      } catch {
        // Not JSON: the raw text above is all there is.
      }
    }
  }
  return parts.join('\n');
}

function collectStrings(v: unknown, out: string[]): void {
  if (typeof v === 'string') out.push(v);
  else if (Array.isArray(v)) for (const x of v) collectStrings(x, out);
  else if (v !== null && typeof v === 'object') for (const x of Object.values(v)) collectStrings(x, out);
}

/** What an assistant message says (text and tool-call arguments): where a fact is used again. */
function assistantText(m: ChatMessage): string {
  return m.role === 'assistant' ? messageText(m) : '';
}

// ---------------------------------------------------------------------------------------
// The measures

export interface MemoryFigures {
  /** Mean recall of needed facts over requests with at least one (1 when there are none). */
  neededRecall: number;
  /** Requests with at least one needed fact. */
  neededRequests: number;
  /** Mean recall at the first request after each compaction (undefined: no compaction was followed by a request with needed facts). */
  recallAfterCompaction: number | undefined;
  /** First requests after a compaction that were measured. */
  compactionsMeasured: number;
  /** Mean presence of earlier user messages' intent keys over all (request, message) pairs (1 when there are none). */
  intentRecall: number;
  intentPairs: number;
  /** Needed recall, counting a missing fact the recall tool returns for a query naming it. */
  recoverableRecall: number;
}

export interface RequestMemory {
  /** Needed facts at this request, and how many of them it sent. */
  needed: number;
  recalled: number;
  /** Needed facts missing from the request that the recall tool returned. */
  recoverable: number;
  /** Earlier user messages, and how many of their intent keys it sent. */
  intents: number;
  intentsRecalled: number;
}

/**
 * The measures for one policy, request by request: `observe` each request in order (the
 * messages it sent, and whether a compaction happened since the previous request), then
 * `figures()`. Each distinct message is searched once.
 */
export class MemoryMeter {
  private readonly index: FactIndex;
  /** Per fact id: first request whose history holds it, last request whose reply uses it (facts never needed left out). */
  private readonly neededFrom: number[] = [];
  private readonly neededTo: number[] = [];
  private readonly factIds: number[] = [];
  /** Per intent key id: the first request after its message. */
  private readonly intentFrom: number[] = [];
  private readonly intentIds: number[] = [];
  private readonly byObject = new WeakMap<object, ReadonlySet<number>>();
  private readonly byText = new Map<string, ReadonlySet<number>>();
  private sum = 0;
  private measured = 0;
  private afterSum = 0;
  private afterMeasured = 0;
  private intentPairs = 0;
  private intentHits = 0;
  private recoverableSum = 0;
  private t = 0;
  /** Each measured fact's text, by id. */
  private readonly texts: readonly string[];

  constructor(readonly transcript: Transcript) {
    const { messages, replyAt } = transcript;
    // The request each message is first history for, and the request each reply answers.
    const historyOf = new Array<number>(messages.length);
    const replyOf = new Map<number, number>();
    replyAt.forEach((at, t) => replyOf.set(at, t));
    let next = 0;
    for (let i = 0; i < messages.length; i++) {
      while (next < replyAt.length && replyAt[next]! <= i) next++;
      historyOf[i] = next;
    }
    const facts = new Set<string>();
    const intents = new Map<string, number>();
    messages.forEach((m, i) => {
      for (const f of factsOf(m)) facts.add(f);
      if (m.message.role === 'user' && m.checkpoint !== true) {
        const key = intentKey(contentText(m.message));
        if (key !== undefined && !intents.has(key)) intents.set(key, historyOf[i]!);
      }
    });
    const all = [...facts];
    const allIndex = new FactIndex(all);
    const first = new Array<number>(all.length).fill(Number.POSITIVE_INFINITY);
    const last = new Array<number>(all.length).fill(-1);
    messages.forEach((m, i) => {
      const reply = replyOf.get(i);
      const history = historyOf[i]!;
      for (const id of allIndex.find(messageText(m.message))) if (history < first[id]!) first[id] = history;
      if (reply !== undefined) for (const id of allIndex.find(assistantText(m.message))) if (reply > last[id]!) last[id] = reply;
    });
    const kept: string[] = [];
    all.forEach((f, id) => {
      if (first[id]! > last[id]!) return;
      this.factIds.push(kept.length);
      this.neededFrom.push(first[id]!);
      this.neededTo.push(last[id]!);
      kept.push(f);
    });
    for (const [key, from] of intents) {
      this.intentIds.push(kept.length);
      this.intentFrom.push(from);
      kept.push(key);
    }
    this.index = new FactIndex(kept);
    this.texts = kept;
  }

  /**
   * The next request, in order: the messages the policy sent, whether it compacted since the
   * previous one, and the policy's recall tool (`recover(fact)`: does a query naming the fact
   * return it verbatim?), when it has one.
   */
  observe(sent: readonly ChatMessage[], afterCompaction = false, recover?: (fact: string) => boolean): RequestMemory {
    const t = this.t++;
    const present = new Set<number>();
    for (const m of sent) for (const id of this.found(m)) present.add(id);
    let needed = 0;
    let recalled = 0;
    let recoverable = 0;
    for (let k = 0; k < this.factIds.length; k++) {
      if (this.neededFrom[k]! > t || this.neededTo[k]! < t) continue;
      needed++;
      if (present.has(this.factIds[k]!)) recalled++;
      else if (recover?.(this.texts[this.factIds[k]!]!)) recoverable++;
    }
    if (needed > 0) {
      this.sum += recalled / needed;
      this.recoverableSum += (recalled + recoverable) / needed;
      this.measured++;
      if (afterCompaction) {
        this.afterSum += recalled / needed;
        this.afterMeasured++;
      }
    }
    let intents = 0;
    let intentsRecalled = 0;
    for (let k = 0; k < this.intentIds.length; k++) {
      if (this.intentFrom[k]! > t) continue;
      intents++;
      if (present.has(this.intentIds[k]!)) intentsRecalled++;
    }
    this.intentPairs += intents;
    this.intentHits += intentsRecalled;
    return { needed, recalled, recoverable, intents, intentsRecalled };
  }

  figures(): MemoryFigures {
    return {
      neededRecall: this.measured === 0 ? 1 : this.sum / this.measured,
      neededRequests: this.measured,
      recallAfterCompaction: this.afterMeasured === 0 ? undefined : this.afterSum / this.afterMeasured,
      compactionsMeasured: this.afterMeasured,
      intentRecall: this.intentPairs === 0 ? 1 : this.intentHits / this.intentPairs,
      intentPairs: this.intentPairs,
      recoverableRecall: this.measured === 0 ? 1 : this.recoverableSum / this.measured,
    };
  }

  private found(m: ChatMessage): ReadonlySet<number> {
    const cached = this.byObject.get(m);
    if (cached) return cached;
    const text = messageText(m);
    let ids = this.byText.get(text);
    if (ids === undefined) {
      ids = this.index.find(text);
      this.byText.set(text, ids);
    }
    this.byObject.set(m, ids);
    return ids;
  }
}

/**
 * The measures of one policy's run, at once: `sent[t]` the messages it sent at request t,
 * `compactedBefore[t]` whether it compacted between request t − 1 and t.
 */
export function memoryMeasures(transcript: Transcript, sent: readonly (readonly ChatMessage[])[], compactedBefore: readonly boolean[] = []): MemoryFigures {
  const meter = new MemoryMeter(transcript);
  sent.forEach((messages, t) => meter.observe(messages, compactedBefore[t] === true));
  return meter.figures();
}
