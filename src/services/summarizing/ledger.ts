/**
 * The checkpoint ledger: the user's own messages verbatim, cumulative lists of the files the
 * agent read and modified, of the commands it ran and the patterns it searched, and of the
 * errors still unresolved, derived from the span's events, merged with the ledgers of the
 * checkpoints inside the span, and appended to the summary in a fixed machine-readable form
 * (`<user-messages>`, `<read-files>`, `<modified-files>` — pi's tags — `<commands>` and
 * `<unresolved-errors>`) so the next compaction parses and merges it again. The agent uses its
 * own commands again more than anything else it did (the words of a build, test or search
 * command recur in its later calls): on the shared sessions they are most of what a checkpoint
 * forgot that the agent needed later. The
 * user's words are what compaction loses most painfully in every harness (their goal and
 * instructions); Codex keeps them verbatim, and so does this. The lists cost a
 * few tokens per entry and survive any number of compactions, so a small retained tail loses
 * less: a path or error line the summary prose dropped is still named verbatim.
 */
import { unframeCheckpoint } from './checkpoint';
import type { Summarizer, SummaryRequest, SummaryResult } from './contract';
import { isCheckpoint, type SurfaceEvent } from '../../session/events';

export interface Ledger {
  /** The user's messages (not checkpoints), verbatim up to {@link MAX_USER_MESSAGE_CHARS} code points, oldest first. */
  requests: string[];
  /** Files only read (never modified), oldest first. */
  read: string[];
  /** Files written, edited, created, moved or deleted, oldest first. */
  modified: string[];
  /**
   * Shell commands run and patterns searched (`grep TODO`), one line each, cut at
   * {@link MAX_COMMAND_CHARS} code points, oldest first: a command run again moves to the end.
   */
  commands: string[];
  /** Errors no later successful call on the same target resolved, oldest first, one per error line. */
  errors: LedgerError[];
}

export interface LedgerError {
  /** The tool and what it acted on (`bash npm test`, `read src/a.ts`). */
  target: string;
  /** The error line, verbatim (cut at {@link MAX_ERROR_CHARS} code points). */
  line: string;
}

const TAGS = { requests: 'user-messages', read: 'read-files', modified: 'modified-files', commands: 'commands', errors: 'unresolved-errors' } as const;
const MESSAGE_TAG = 'message';
/** A user message longer than this keeps its head (with "…"): what it asks comes first. */
export const MAX_USER_MESSAGE_CHARS = 600;
/** What an old user message is cut to before it leaves a full ledger: its first 160 characters, or its first line of ≥ 20. */
const USER_MESSAGE_KEY_CHARS = 160;
const MAX_ERROR_CHARS = 400;
/** A command's head: what it runs and on what comes first (a heredoc's body does not). */
export const MAX_COMMAND_CHARS = 200;
const MAX_TARGET_CHARS = 80;

/** Argument keys whose value is a file or directory path. */
const PATH_KEYS = /^(?:path|paths|file|files|filename|file_?path|filepath|target_?file|notebook_?path|source|destination|old_?path|new_?path)$/i;
/** Argument keys whose value is a shell command. */
const COMMAND_KEYS = /^(?:command|cmd|script)$/i;
/** Argument keys whose value is a search pattern (`grep`, `glob`, a code search's `query`). */
const PATTERN_KEYS = /^(?:pattern|query|glob|regex)$/i;
/** Argument keys naming a sub-operation of a multi-purpose file tool (`str_replace_based_edit_tool`'s `command: "create"`). */
const OP_KEYS = /^(?:command|action|operation|op|mode)$/i;
/** Tool names or operations that change a file. */
const MODIFIES = /write|edit|create|patch|replace|insert|delete|remove|move|rename|append|save|undo/i;
/** Same test as the extractive summarizer: a line that reports an error. */
export const ERROR_LINE =
  /\berror TS\d+\b|\b[A-Z]\w*(?:Error|Exception)\b:|^\s*(?:Error|ERROR|error)\b|\bFAIL\b|(?<!\b0 )\bfailed\b|Traceback \(most recent call last\)|\bpanic:|\bfatal:|npm ERR!|^npm error\b|command not found|No such file or directory/;

export function emptyLedger(): Ledger {
  return { requests: [], read: [], modified: [], commands: [], errors: [] };
}

/**
 * The ledger of a span: the ledgers of the checkpoints inside it (oldest first), then what its
 * own tool calls and results add. A file modified anywhere is listed as modified only; an error
 * leaves the list when a later call on the same target succeeds.
 */
export function deriveLedger(events: readonly SurfaceEvent[]): Ledger {
  return deriveLedgerAndResolved(events).ledger;
}

/**
 * The span's ledger, and the errors a later successful call resolved in it (oldest first):
 * they leave the ledger, and a summary that wants to keep its history of fixes writes them
 * elsewhere (the extractive summarizer's "Errors and Fixes").
 */
export function deriveLedgerAndResolved(events: readonly SurfaceEvent[]): { ledger: Ledger; resolved: LedgerError[] } {
  const requests = new Recency();
  const read = new Recency();
  const modified = new Recency();
  const commands = new Recency();
  const errors = new Map<string, LedgerError>();
  const resolvedErrors = new Map<string, LedgerError>();
  const calls = new Map<string, { target: string; ranCommand: boolean }>();
  const resolve = (target: string) => {
    for (const [k, e] of errors) {
      if (e.target !== target) continue;
      errors.delete(k);
      resolvedErrors.delete(k);
      resolvedErrors.set(k, e);
    }
  };
  // One entry per error line: the same compiler error reached by three commands is one fact,
  // listed once with the newest command that reported it.
  const addError = (e: LedgerError) => {
    errors.delete(e.line);
    errors.set(e.line, e);
  };
  for (const e of events) {
    if (e.type === 'user/message') {
      const text = e.data.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
      const summary = isCheckpoint(e) ? (unframeCheckpoint(text) ?? text) : unframeCheckpoint(text);
      if (summary === undefined) {
        const words = userMessage(text);
        if (words !== '') requests.touch(words);
        continue;
      }
      const prior = parseLedger(summary).ledger;
      for (const r of prior.requests) requests.touch(r);
      for (const p of prior.read) read.touch(p);
      for (const p of prior.modified) modified.touch(p);
      for (const c of prior.commands) commands.touch(c);
      for (const err of prior.errors) addError(err);
    } else if (e.type === 'assistant/message') {
      for (const b of e.data.content) {
        if (b.type !== 'tool-call') continue;
        const args = parseArgs(b.arguments);
        const paths = pathArguments(args);
        // `command` names an operation only on a file tool (one with a path); elsewhere it is a shell command.
        const op = paths.length > 0 ? opArgument(args) : undefined;
        // A multi-purpose file tool (`str_replace_based_edit_tool`) is judged by its operation, not its name.
        const changes = MODIFIES.test(op ?? b.name);
        for (const p of paths) (changes ? modified : read).touch(p);
        const command = commandArgument(args);
        if (command !== undefined && op === undefined) commands.touch(oneLine(command, MAX_COMMAND_CHARS));
        for (const p of patternArguments(args)) commands.touch(oneLine(`${b.name} ${p}`, MAX_COMMAND_CHARS));
        const object = paths[0] ?? (command !== undefined && op === undefined ? firstLine(command) : '');
        calls.set(b.id, { target: targetOf(`${b.name}${object === '' ? '' : ` ${object}`}`), ranCommand: command !== undefined && op === undefined });
      }
    } else if (e.type === 'tool/result') {
      const call = calls.get(e.data.callId);
      const target = call?.target ?? targetOf(e.data.toolName ?? 'tool');
      const failed = e.data.isError === true;
      const text = e.data.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
      const lines = text
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l !== '');
      const errorLine = failed || call?.ranCommand === true ? lines.find((l) => ERROR_LINE.test(l)) : undefined;
      const line = errorLine ?? (failed ? lines[0] : undefined);
      if (line === undefined) resolve(target);
      else addError({ target, line: oneLine(line, MAX_ERROR_CHARS) });
    }
  }
  const modifiedList = modified.list();
  const changed = new Set(modifiedList);
  return {
    ledger: {
      requests: requests.list(),
      read: read.list().filter((p) => !changed.has(p)),
      modified: modifiedList,
      commands: commands.list(),
      errors: [...errors.values()],
    },
    // An error reported again after its fix is unresolved, not resolved.
    resolved: [...resolvedErrors.values()].filter((e) => !errors.has(e.line)),
  };
}

export function isEmptyLedger(l: Ledger): boolean {
  return l.requests.length === 0 && l.read.length === 0 && l.modified.length === 0 && l.commands.length === 0 && l.errors.length === 0;
}

/** A user message as the ledger keeps it: trimmed, its head when it is long. */
export function userMessage(text: string): string {
  const t = text.trim();
  const points = Array.from(t);
  return points.length <= MAX_USER_MESSAGE_CHARS ? t : `${points.slice(0, MAX_USER_MESSAGE_CHARS).join('').trimEnd()}…`;
}

/** The words of a user message that state what it asks: all of a short one, else its first line of ≥ 20 characters (at most 160). */
export function userMessageKey(text: string): string {
  const t = text.trim();
  if (Array.from(t).length <= USER_MESSAGE_KEY_CHARS) return t;
  const line =
    t
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l.length >= 20) ?? t;
  return Array.from(line).slice(0, USER_MESSAGE_KEY_CHARS).join('').trim();
}

/** The ledger's text: one block per non-empty list, one entry a line; "" for an empty ledger. */
export function renderLedger(l: Ledger): string {
  const blocks: string[] = [];
  const block = (tag: string, lines: string[]) => {
    if (lines.length > 0) blocks.push(`<${tag}>\n${lines.join('\n')}\n</${tag}>`);
  };
  // Verbatim, several lines each: one element per message (a closing tag inside one is broken up).
  block(
    TAGS.requests,
    l.requests.map((r) => `<${MESSAGE_TAG}>${r.split(`</${MESSAGE_TAG}>`).join(`</ ${MESSAGE_TAG}>`)}</${MESSAGE_TAG}>`),
  );
  block(TAGS.read, l.read);
  block(TAGS.modified, l.modified);
  block(TAGS.commands, l.commands);
  block(
    TAGS.errors,
    l.errors.map((e) => `[${e.target}] ${e.line}`),
  );
  return blocks.join('\n');
}

/**
 * The largest ledger whose text counts ≤ `budget` tokens: the oldest entries go first, errors
 * before read files before commands before modified files; the user's messages last — first
 * cut, oldest first, to the words that state what they ask ({@link userMessageKey}), then
 * dropped, oldest first. An error line costs as much as ten paths and goes stale soonest; how
 * the agent builds, tests and searches it uses again; what was changed matters longer; what the
 * user asked for, longest.
 */
/** The lists a ledger over its budget loses first, in order; the user's messages go last. */
const FIT_ORDER = ['errors', 'read', 'commands', 'modified'] as const;

export function fitLedger(l: Ledger, budget: number, count: (text: string) => number): Ledger {
  const out: Ledger = { requests: [...l.requests], read: [...l.read], modified: [...l.modified], commands: [...l.commands], errors: [...l.errors] };
  if (budget <= 0) return emptyLedger();
  let total = count(renderLedger(out));
  let shortened = 0;
  while (total > budget && !isEmptyLedger(out)) {
    // Drop about the share that is over, at least one entry, from the cheapest list to lose.
    const list: unknown[] = FIT_ORDER.map((k) => out[k] as unknown[]).find((x) => x.length > 0) ?? out.requests;
    const over = Math.max(1, Math.floor(((total - budget) / total) * list.length));
    if (list === out.requests && shortened < out.requests.length) {
      // Cut before dropping: the oldest messages to their key first.
      const end = Math.min(out.requests.length, shortened + over);
      for (let i = shortened; i < end; i++) out.requests[i] = userMessageKey(out.requests[i]!);
      shortened = end;
    } else list.splice(0, Math.min(over, list.length));
    total = count(renderLedger(out));
  }
  return out;
}

/**
 * The ledger as a checkpoint carries it: with `userWords` > 0 the user's messages are fitted in
 * that many tokens of their own (beyond the summary's cap: SummaryRequest.userWordsTokens), the
 * other lists in `budget`; with 0, all of it in `budget` (fitLedger). `capTokens` is what of the
 * rendered ledger the summary's cap pays for: all of it, or all but the user's messages.
 */
export function fitCheckpointLedger(l: Ledger, budget: number, userWords: number, count: (text: string) => number): { ledger: Ledger; capTokens: number } {
  if (userWords <= 0) {
    const ledger = fitLedger(l, budget, count);
    return { ledger, capTokens: isEmptyLedger(ledger) ? 0 : count(renderLedger(ledger)) };
  }
  const rest = fitLedger({ ...l, requests: [] }, budget, count);
  const words = fitLedger({ ...emptyLedger(), requests: l.requests }, userWords, count);
  const ledger: Ledger = { ...rest, requests: words.requests };
  if (isEmptyLedger(rest)) return { ledger, capTokens: 0 };
  return { ledger, capTokens: Math.max(0, count(renderLedger(ledger)) - (words.requests.length === 0 ? 0 : count(renderLedger(words)))) };
}

/** Appends a rendered ledger to a summary (after a blank line); the summary alone when the ledger is empty. */
export function withLedger(summary: string, ledgerText: string): string {
  const body = summary.trimEnd();
  return ledgerText === '' ? body : `${body}\n\n${ledgerText}`;
}

/**
 * Splits a summary into its prose and its ledger. Every ledger block anywhere in the text is
 * read and removed (the last block of a kind wins), so a model that copied an earlier ledger
 * into its prose does not duplicate it.
 */
export function parseLedger(summary: string): { body: string; ledger: Ledger } {
  const ledger = emptyLedger();
  let body = summary;
  for (const [key, tag] of Object.entries(TAGS) as Array<[keyof typeof TAGS, string]>) {
    const re = new RegExp(`<${tag}>\\n?([\\s\\S]*?)\\n?</${tag}>`, 'g');
    let last: string | undefined;
    body = body.replace(re, (_, inner: string) => {
      last = inner;
      return '';
    });
    if (last === undefined) continue;
    if (key === 'requests') {
      const re2 = new RegExp(`<${MESSAGE_TAG}>([\\s\\S]*?)</${MESSAGE_TAG}>`, 'g');
      ledger.requests = dedupe([...last.matchAll(re2)].map((m) => m[1]!.trim()).filter((x) => x !== ''));
      continue;
    }
    const lines = last
      .split('\n')
      .map((x) => x.trim())
      .filter((x) => x !== '');
    if (key === 'errors') {
      ledger.errors = lines.map((x) => {
        const m = /^\[([^\]]*)\] (.*)$/.exec(x);
        return m ? { target: m[1]!, line: m[2]! } : { target: '', line: x };
      });
    } else ledger[key] = dedupe(lines);
  }
  return { body: body.replace(/\n{3,}/g, '\n\n').trim(), ledger };
}

// ---------------------------------------------------------------------------------------

/** Insertion order with "touch moves to the end": the list reads oldest first, newest last. */
class Recency {
  private readonly items = new Set<string>();
  touch(item: string): void {
    this.items.delete(item);
    this.items.add(item);
  }
  list(): string[] {
    return [...this.items];
  }
}

function dedupe(items: readonly string[]): string[] {
  const r = new Recency();
  for (const i of items) r.touch(i);
  return r.list();
}

/** A tool call's arguments as JSON, or undefined when they are not JSON. */
export function parseArgs(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return undefined;
  }
}

/** Values of path-like keys (`keys`), anywhere in the arguments. */
export function pathArguments(args: unknown, keys: RegExp = PATH_KEYS): string[] {
  const out: string[] = [];
  const visit = (v: unknown, key: string | undefined) => {
    if (typeof v === 'string') {
      if (key !== undefined && keys.test(key) && isPathValue(v)) out.push(v);
    } else if (Array.isArray(v)) for (const x of v) visit(x, key);
    else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) visit(x, k);
  };
  visit(args, undefined);
  return out;
}

/** Search patterns (values of pattern-like keys) at the top level of the arguments. */
function patternArguments(args: unknown): string[] {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return [];
  return Object.entries(args).flatMap(([k, v]) => (PATTERN_KEYS.test(k) && typeof v === 'string' && v.trim() !== '' ? [v.trim()] : []));
}

/**
 * The shell command of a call: a command-like key's string, or its argv (Codex's `shell` tool:
 * `["bash", "-lc", "rg -n foo"]`), a shell's `-c` script given as what it runs.
 */
function commandArgument(args: unknown): string | undefined {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return undefined;
  for (const [k, v] of Object.entries(args)) {
    if (!COMMAND_KEYS.test(k)) continue;
    if (typeof v === 'string' && v.trim() !== '') return v.trim();
    if (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string')) {
      const argv = v;
      const script = argv.length === 3 && /^(?:\/\S*\/)?(?:ba|z|da|k)?sh$/.test(argv[0]!) && /^-l?c$/.test(argv[1]!) ? argv[2]! : argv.join(' ');
      if (script.trim() !== '') return script.trim();
    }
  }
  return undefined;
}

/** A one-word operation (`view`, `create`), not a shell command. */
function opArgument(args: unknown): string | undefined {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return undefined;
  for (const [k, v] of Object.entries(args)) if (OP_KEYS.test(k) && typeof v === 'string' && /^[\w-]{1,24}$/.test(v)) return v;
  return undefined;
}

function isPathValue(v: string): boolean {
  return v.length > 0 && v.length <= 260 && !v.includes('\n') && v !== '.' && v !== '/' && v !== '..' && !/^[a-z][a-z0-9+.-]*:\/\//i.test(v);
}

function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .find((l) => l.trim() !== '')
      ?.trim() ?? ''
  );
}

/** One line, cut at `max` code points. */
function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s*\n\s*/g, ' ').trim();
  const points = Array.from(flat);
  return points.length <= max ? flat : `${points.slice(0, max).join('')}…`;
}

/** An error's target: one short line without `]`, which closes it in the rendered entry. */
function targetOf(text: string): string {
  return oneLine(text.replace(/\]/g, ')'), MAX_TARGET_CHARS);
}

/**
 * A model summarizer with the checkpoint ledger appended: the model writes the prose, the
 * ledger is derived from the span (not asked of the model) and its size taken off the model's
 * cap, so the checkpoint stays within `maxTokens`. Wraps the whole summarizer (bounding
 * included), so a span summarized in chunks still gets one ledger of the whole span.
 */
export function withCheckpointLedger(inner: Summarizer): Summarizer {
  return {
    name: inner.name,
    async summarize(full: SummaryRequest, signal: AbortSignal): Promise<SummaryResult> {
      const { ledger, capTokens } = fitCheckpointLedger(deriveLedger(full.events), Math.floor(full.maxTokens / 4), full.userWordsTokens ?? 0, full.countTokens);
      const ledgerText = renderLedger(ledger);
      if (ledgerText === '') return inner.summarize(full, signal);
      // The model writes within the cap less what of the ledger the cap pays for (not the user's words, with a budget of their own).
      const result = await inner.summarize({ ...full, maxTokens: full.maxTokens - capTokens - 2 }, signal);
      return { ...result, text: withLedger(parseLedger(result.text).body, ledgerText) };
    },
  };
}
