/**
 * The model-free summarizer: fills the checkpoint's eight sections (docs/spec.md#8-the-summarizer) straight from
 * the span's events — user requests verbatim, files and commands seen, errors, the latest
 * assistant text — with no network and no randomness (the same span always gives the same
 * bytes). It lets every test and the main job run without an API key, and is a real fallback
 * for users with no summarization model.
 */
import { SUMMARY_SECTIONS, type SummarySection } from './instruction';
import { unframeCheckpoint } from './checkpoint';
import type { ChatMessage } from '../../session/derive';
import { isCheckpoint, type SurfaceEvent } from '../../session/events';
import { SummarizerError } from './contract';
import {
  fitCheckpointLedger,
  renderLedger,
  userMessage,
  withLedger,
  type Ledger,
  type LedgerError,
  deriveLedgerAndResolved,
  emptyLedger,
  ERROR_LINE,
  parseArgs,
  parseLedger,
  pathArguments,
} from './ledger';
import type { Summarizer, SummaryRequest, SummaryResult } from './contract';

// ── Sections: how entries are written, deduplicated, rendered and read back ──
/*
 * The eight sections of an extractive summary as bullet entries: how an entry is written
 * (bullet, inline code, first line), how entries are deduplicated, how the sections render to
 * Markdown, and how a prior checkpoint's summary is read back into sections.
 */

export type Sections = Record<SummarySection, string[]>;

const NONE = '(none)';

/** Sections of a prior checkpoint's summary, as bullet entries; "(none)" entries dropped. */
export function parseSummary(summary: string): Sections {
  const out = emptySections();
  let current: SummarySection | undefined;
  let entry: string[] | undefined;
  const flush = () => {
    if (current && entry) {
      const text = entry.join('\n').trimEnd();
      if (!/^- \(none\)\.?$/i.test(text) && text !== '-') out[current].push(text);
    }
    entry = undefined;
  };
  for (const raw of summary.split('\n')) {
    const heading = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(raw);
    if (heading) {
      flush();
      const title = heading[1]!.toLowerCase();
      current = SUMMARY_SECTIONS.find((s) => s.toLowerCase() === title);
      continue;
    }
    if (!current) continue;
    if (/^\s*[-*]\s+/.test(raw) && !/^\s{2,}/.test(raw)) {
      flush();
      entry = [raw.replace(/^\s*[-*]\s+/, '- ')];
    } else if (raw.trim() === '') {
      if (entry) entry.push('');
    } else if (entry) {
      entry.push(raw.startsWith('  ') ? raw : `  ${raw.trimStart()}`);
    } else if (raw.trim().toLowerCase() !== NONE) {
      entry = [`- ${raw.trim()}`];
    }
  }
  flush();
  return out;
}

export function emptySections(): Sections {
  return Object.fromEntries(SUMMARY_SECTIONS.map((s) => [s, [] as string[]])) as unknown as Sections;
}

/** A Markdown bullet; continuation lines indented so a multi-line text stays one entry. */
export function bullet(text: string): string {
  return `- ${text
    .split('\n')
    .map((l, i) => (i === 0 || l === '' ? l : `  ${l}`))
    .join('\n')}`;
}

/** An inline code span that survives backticks inside the text; multi-line text shows its first line. */
export function code(text: string): string {
  const lines = text.split('\n');
  const shown = lines.length > 1 ? `${lines[0]} … (+${lines.length - 1} lines)` : text;
  const fence = shown.includes('`') ? '``' : '`';
  return `${fence}${fence === '``' ? ` ${shown} ` : shown}${fence}`;
}

export function firstLine(text: string): string {
  return (
    text
      .split('\n')
      .find((l) => l.trim() !== '')
      ?.trim() ?? ''
  );
}

/** Keeps the LAST occurrence of each entry: the order stays "oldest first, newest last". */
export function dedupe(entries: readonly string[]): string[] {
  const lastAt = new Map<string, number>();
  entries.forEach((e, i) => lastAt.set(e, i));
  return entries.filter((e, i) => lastAt.get(e) === i);
}

export function omittedNote(n: number): string {
  return `- (${n} earlier ${n === 1 ? 'entry' : 'entries'} omitted)`;
}

export function renderSections(sections: Sections, omitted: Partial<Record<SummarySection, number>> = {}): string {
  return SUMMARY_SECTIONS.map((s) => {
    const lines = [...(omitted[s] ? [omittedNote(omitted[s])] : []), ...sections[s]];
    return `## ${s}\n${lines.length > 0 ? lines.join('\n') : NONE}`;
  }).join('\n\n');
}

// ── Reading the span ──
/*
 * Reading the span for the extractive summarizer: its events (or, when there are none, its
 * chat messages) as one list of exchanges, and the file paths and shell commands found in
 * tool-call arguments, commands and text.
 */

/** One exchange of the span, whatever it came from (events, or messages when there are none). */
export type Item =
  | { kind: 'user'; text: string; checkpoint: boolean }
  | { kind: 'assistant'; text: string; calls: Array<{ id: string; name: string; args: string }> }
  | { kind: 'tool'; callId: string; toolName: string | undefined; text: string; isError: boolean };

/** Argument keys whose value is a file or directory path. */
export const PATH_KEYS = /^(?:path|paths|file|files|filename|file_?path|filepath|target_?file|notebook_?path|dir|directory|cwd)$/i;
/** Argument keys whose value is a shell command. */
const COMMAND_KEYS = /^(?:command|cmd|script)$/i;
/**
 * A path with at least one directory and a file extension (`src/a.ts`, `./x/y.json`,
 * `/etc/hosts.conf`, `~/.config/a.toml`). Not after `/`, `.`, `@` or a word character, so
 * URLs (`https://host/a.md`) never match from their middle.
 */
const SLASH_PATH = /(?<![\w@./:*-])(?:~\/|\.{1,2}\/|\/)?(?:[\w@.+-]+\/)+[\w@+-][\w@.+-]*\.[A-Za-z][A-Za-z0-9]{0,9}(?![\w/-])/g;
/** A bare file name with a well-known extension (`package.json`); only trusted in commands and code spans. */
const BARE_FILE =
  /(?<![\w@./:*-])[\w@+-][\w@.+-]*\.(?:ts|tsx|mts|cts|js|jsx|mjs|cjs|json|jsonl|md|mdx|yaml|yml|toml|py|rs|go|java|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|bash|zsh|css|scss|html|vue|svelte|sql|txt|lock|env|ini|cfg|conf|xml|gradle|swift)(?![\w/-])/g;
const CODE_SPAN = /`([^`\n]+)`/g;

export function itemsFromEvents(events: readonly SurfaceEvent[]): Item[] {
  const out: Item[] = [];
  for (const e of events) {
    switch (e.type) {
      case 'user/message': {
        const text = e.data.content
          .map((b) => (b.type === 'text' ? b.text : ''))
          .filter((t) => t !== '')
          .join('\n\n');
        out.push({ kind: 'user', text, checkpoint: isCheckpoint(e) || unframeCheckpoint(text) !== undefined });
        break;
      }
      case 'assistant/message': {
        const text = e.data.content
          .map((b) => (b.type === 'text' ? b.text : ''))
          .filter((t) => t !== '')
          .join('\n\n');
        const calls = e.data.content.flatMap((b) => (b.type === 'tool-call' ? [{ id: b.id, name: b.name, args: b.arguments }] : []));
        out.push({ kind: 'assistant', text, calls });
        break;
      }
      case 'tool/result': {
        const text = e.data.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n');
        out.push({ kind: 'tool', callId: e.data.callId, toolName: e.data.toolName, text, isError: e.data.isError === true });
        break;
      }
      case 'system/message':
        break;
    }
  }
  return out;
}

export function itemsFromMessages(messages: readonly ChatMessage[]): Item[] {
  const textOf = (content: unknown): string =>
    typeof content === 'string'
      ? content
      : Array.isArray(content)
        ? (content as Array<{ type: string; text?: string }>).map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('\n\n')
        : '';
  const out: Item[] = [];
  for (const m of messages) {
    if (m.role === 'user') {
      const text = textOf(m.content);
      out.push({ kind: 'user', text, checkpoint: unframeCheckpoint(text) !== undefined });
    } else if (m.role === 'assistant') {
      const calls = (m.tool_calls ?? []).map((c) =>
        c.type === 'function' ? { id: c.id, name: c.function.name, args: c.function.arguments } : { id: c.id, name: c.custom.name, args: c.custom.input },
      );
      out.push({ kind: 'assistant', text: textOf(m.content), calls });
    } else if (m.role === 'tool') {
      out.push({ kind: 'tool', callId: m.tool_call_id, toolName: undefined, text: textOf(m.content), isError: false });
    }
  }
  return out;
}

export function commandArguments(args: unknown): string[] {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return [];
  return Object.entries(args).flatMap(([k, v]) => (COMMAND_KEYS.test(k) && typeof v === 'string' && v.trim() !== '' ? [v.trim()] : []));
}

export function pathsInText(text: string): string[] {
  const out = [...text.matchAll(SLASH_PATH)].map((m) => m[0]);
  for (const span of text.matchAll(CODE_SPAN)) out.push(...[...span[1]!.matchAll(BARE_FILE)].map((m) => m[0]));
  return stripTrailingDots(out);
}

export function pathsInCommand(command: string): string[] {
  return stripTrailingDots([...command.matchAll(SLASH_PATH), ...command.matchAll(BARE_FILE)].map((m) => m[0]));
}

function stripTrailingDots(paths: string[]): string[] {
  return dedupe(paths.map((p) => p.replace(/[.]+$/, '')).filter((p) => p.length > 0));
}

// ── Fitting the summary and ledger under the cap ──
/*
 * Fitting an extractive summary within its token budget: the ledger and the sections share
 * the cap, each fact stated once (in the ledger or in the prose), and the prose trimmed oldest
 * entry first until the whole text counts within budget. Checks for cancellation between rounds.
 */

/**
 * The sections and the ledger together within `budget` tokens. The ledger gets at most half
 * the cap, and never so much that the sections have less than twice their eight headings (the
 * headings and an "entries omitted" note under each); the sections get the rest. With
 * `userWords` > 0 the user's messages have that budget of their own, beyond `budget`
 * (SummaryRequest.userWordsTokens): the text is then at most `budget` + `userWords` tokens.
 *
 * Each fact once: a path or error line the fitted ledger names verbatim is not restated in
 * "Files and Code" or "Errors and Fixes", and what the ledger cannot hold (its oldest entries
 * over budget, errors a later call resolved) goes into those sections instead, oldest first,
 * so it is the first to be trimmed there. A fact leaves the summary only when neither has room.
 */
export function fitWithLedger(
  sections: Sections,
  derived: { ledger: Ledger; resolved: LedgerError[] },
  budget: number,
  count: (text: string) => number,
  signal: AbortSignal,
  cut: (line: string) => string,
  userWords = 0,
): string {
  const headings = count(renderSections(emptySections()));
  const { ledger: fitted, capTokens } = fitCheckpointLedger(derived.ledger, Math.min(Math.floor(budget / 2), budget - 2 * headings), userWords, count);
  const ledgerText = renderLedger(fitted);
  // What the user's words take beyond the cap (0 without a budget of their own).
  const beyond = ledgerText === '' ? 0 : count(ledgerText) - capTokens;
  const prose = restateOutsideLedger(sections, derived, fitted, cut);
  let room = budget - (ledgerText === '' ? 0 : capTokens + 2);
  for (;;) {
    const text = withLedger(fitToBudget(prose, room, count, signal), ledgerText);
    const over = count(text) - budget - beyond;
    if (over <= 0) return text;
    room -= over;
  }
}

/** The sections with the ledger's facts moved: out where the fitted ledger names them, in where it does not. */
function restateOutsideLedger(
  sections: Sections,
  derived: { ledger: Ledger; resolved: LedgerError[] },
  fitted: Ledger,
  cut: (line: string) => string,
): Sections {
  const out = Object.fromEntries(SUMMARY_SECTIONS.map((s) => [s, [...sections[s]]])) as unknown as Sections;
  // The user's messages the ledger holds verbatim are not restated in the prose.
  const listedRequests = new Set(fitted.requests);
  if (listedRequests.size > 0)
    out['Primary Request and Intent'] = out['Primary Request and Intent'].filter((e) => !listedRequests.has(userMessage(unbullet(e))));
  const listedPaths = new Set([...fitted.read, ...fitted.modified]);
  const listedErrors = new Set(fitted.errors.map((e) => e.line));
  const { ledger } = derived;
  if (listedPaths.size > 0 || ledger.read.length + ledger.modified.length > 0) {
    const modified = new Set(ledger.modified);
    const spilled = [...ledger.read, ...ledger.modified]
      .filter((p) => !listedPaths.has(p))
      .map((p) => bullet(`${code(p)}: ${modified.has(p) ? 'modified' : 'read'}`));
    out['Files and Code'] = dedupe([...spilled, ...out['Files and Code']]).filter((e) => !listedPaths.has(entrySubject(e) ?? ''));
  }
  if (listedErrors.size > 0 || ledger.errors.length + derived.resolved.length > 0) {
    const spilled = [...derived.resolved, ...ledger.errors.filter((e) => !listedErrors.has(e.line))].map((e) =>
      bullet(`${code(e.target.split(' ')[0] ?? 'tool')}: ${cut(e.line)}`),
    );
    out['Errors and Fixes'] = dedupe([...spilled, ...out['Errors and Fixes']]).filter((e) => !listedErrors.has(entryText(e) ?? ''));
  }
  return out;
}

/** The text of a bullet entry (its continuation lines unindented). */
function unbullet(entry: string): string {
  return entry.replace(/^- /, '').replace(/\n {2}/g, '\n');
}

/** The code span an entry starts with (`- \`src/a.ts\`: read` → `src/a.ts`). */
function entrySubject(entry: string): string | undefined {
  const m = /^- (`+) ?([\s\S]*?) ?\1: /.exec(entry);
  return m?.[2];
}

/** What follows an entry's code span (`- \`bash\`: error TS2345: …` → `error TS2345: …`). */
function entryText(entry: string): string | undefined {
  const m = /^- (`+) ?[\s\S]*? ?\1: ([\s\S]*)$/.exec(entry);
  return m?.[2];
}

/**
 * Renders the sections within `budget` tokens. Trims the section that costs most, oldest
 * entry first (a note says how many were left out); a section down to one entry that is still
 * too long keeps that entry's head. Entries are priced one by one (cached), and the whole text
 * is counted again after each round, so the result is exactly within budget.
 */
function fitToBudget(input: Sections, budget: number, count: (text: string) => number, signal: AbortSignal): string {
  const sections = Object.fromEntries(SUMMARY_SECTIONS.map((s) => [s, [...input[s]]])) as unknown as Sections;
  const omitted: Partial<Record<SummarySection, number>> = {};
  const cost = new Map<string, number>();
  const price = (e: string): number => {
    let c = cost.get(e);
    if (c === undefined) {
      c = count(e) + 1;
      cost.set(e, c);
    }
    return c;
  };
  const sectionCost = (s: SummarySection) => sections[s].reduce((sum, e) => sum + price(e), 0) + (omitted[s] ? price(omittedNote(omitted[s])) : 0);

  let text = renderSections(sections, omitted);
  let total = count(text);
  while (total > budget) {
    throwIfCancelled(signal);
    let excess = total - budget;
    while (excess > 0) {
      const candidates = SUMMARY_SECTIONS.filter((s) => sections[s].length > 0);
      if (candidates.length === 0) {
        throw new SummarizerError(
          'summary-truncated',
          `maxTokens ${budget} cannot hold even the eight empty section headings of a checkpoint (${count(renderSections(emptySections()))} tokens); raise maxTokens.`,
        );
      }
      // The most expensive section first; ties go to the earlier section in the order.
      let pick = candidates[0]!;
      for (const s of candidates) if (sectionCost(s) > sectionCost(pick)) pick = s;
      const entries = sections[pick];
      const before = sectionCost(pick);
      if (entries.length > 1) {
        entries.shift();
        omitted[pick] = (omitted[pick] ?? 0) + 1;
      } else {
        const only = entries[0]!;
        const head = keepHead(only, price(only) - 1 - excess, count);
        if (head === undefined) {
          entries.pop();
          omitted[pick] = (omitted[pick] ?? 0) + 1;
        } else {
          entries[0] = head;
        }
      }
      excess -= before - sectionCost(pick);
    }
    text = renderSections(sections, omitted);
    total = count(text);
  }
  return text;
}

/**
 * The longest head of `entry` (by code point) that, with " …", counts ≤ maxTokens; undefined
 * when too little would be left to be worth keeping.
 */
function keepHead(entry: string, maxTokens: number, count: (text: string) => number): string | undefined {
  if (maxTokens < 8) return undefined;
  const points = Array.from(entry);
  let lo = 0;
  let hi = Math.min(points.length - 1, maxTokens * 16);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (count(`${points.slice(0, mid).join('')} …`) <= maxTokens) lo = mid;
    else hi = mid - 1;
  }
  if (lo < 2) return undefined;
  return `${points.slice(0, lo).join('').trimEnd()} …`;
}

function throwIfCancelled(signal: AbortSignal): void {
  if (signal.aborted) {
    throw new SummarizerError('summary-cancelled', 'The extractive summary was cancelled.', { cause: signal.reason });
  }
}

export interface ExtractiveSummarizerOptions {
  /** A command or error line longer than this is cut (with "…"). Default 400 characters. */
  maxLineChars?: number;
  /**
   * What ledger the summary carries (ledger.ts): all of its lists (default), the file lists
   * only (`files`: pi's design), or none. The bench uses the last two to give a simulated
   * peer only what its own summaries carry.
   */
  ledger?: 'full' | 'files' | 'none';
}

export class ExtractiveSummarizer implements Summarizer {
  readonly name = 'extractive';
  private readonly maxLineChars: number;
  private readonly ledger: NonNullable<ExtractiveSummarizerOptions['ledger']>;

  constructor(options: ExtractiveSummarizerOptions = {}) {
    this.maxLineChars = options.maxLineChars ?? 400;
    this.ledger = options.ledger ?? 'full';
  }

  async summarize(request: SummaryRequest, signal: AbortSignal): Promise<SummaryResult> {
    throwIfCancelled(signal);
    const items = request.events.length > 0 ? itemsFromEvents(request.events) : itemsFromMessages(request.messages);
    const sections = this.extract(items);
    const derived = this.ledger === 'none' ? { ledger: emptyLedger(), resolved: [] } : deriveLedgerAndResolved(request.events);
    if (this.ledger === 'files') {
      derived.ledger.errors = [];
      derived.ledger.requests = [];
      derived.ledger.commands = [];
      derived.resolved = [];
    }
    const text = fitWithLedger(sections, derived, request.maxTokens, request.countTokens, signal, (l) => this.line(l), request.userWordsTokens ?? 0);
    throwIfCancelled(signal);
    return { text, provider: 'xcompact', model: 'extractive', requests: 0 };
  }

  private extract(items: readonly Item[]): Sections {
    const prior = emptySections();
    const requests: string[] = [];
    const toolCounts = new Map<string, number>();
    const files = new Map<string, { ops: Map<string, number>; last: number }>();
    const errors: string[] = [];
    const commands: string[] = [];
    const callsById = new Map<string, { name: string; ranCommand: boolean }>();
    let latestAssistant: string | undefined;
    let latestRequest: string | undefined;
    let order = 0;

    const mention = (path: string, op: string) => {
      const entry = files.get(path) ?? { ops: new Map<string, number>(), last: 0 };
      entry.ops.set(op, (entry.ops.get(op) ?? 0) + 1);
      entry.last = order++;
      files.set(path, entry);
    };

    for (const item of items) {
      if (item.kind === 'user') {
        const summary = item.checkpoint ? (unframeCheckpoint(item.text) ?? item.text) : undefined;
        if (summary !== undefined) {
          // The prior ledger is merged by deriveLedger, not copied into the sections.
          const parsed = parseSummary(parseLedger(summary).body);
          for (const s of SUMMARY_SECTIONS) prior[s].push(...parsed[s]);
          continue;
        }
        if (item.text.trim() === '') continue;
        requests.push(bullet(item.text.trim()));
        latestRequest = item.text.trim();
        for (const p of pathsInText(item.text)) mention(p, 'mentioned');
      } else if (item.kind === 'assistant') {
        if (item.text.trim() !== '') {
          latestAssistant = item.text.trim();
          for (const p of pathsInText(item.text)) mention(p, 'mentioned');
        }
        for (const call of item.calls) {
          toolCounts.set(call.name, (toolCounts.get(call.name) ?? 0) + 1);
          const args = parseArgs(call.args);
          for (const p of pathArguments(args, PATH_KEYS)) mention(p, call.name);
          const ran = commandArguments(args);
          callsById.set(call.id, { name: call.name, ranCommand: ran.length > 0 });
          for (const c of ran) {
            commands.push(bullet(`Ran ${code(this.line(c))}`));
            for (const p of pathsInCommand(c)) mention(p, call.name);
          }
        }
      } else {
        const call = callsById.get(item.callId);
        const name = item.toolName ?? call?.name ?? 'tool';
        const errorLine = item.isError || call?.ranCommand === true ? item.text.split('\n').find((l) => ERROR_LINE.test(l)) : undefined;
        const line = errorLine ?? (item.isError ? firstLine(item.text) : undefined);
        if (line !== undefined && line.trim() !== '') errors.push(bullet(`${code(name)}: ${this.line(line.trim())}`));
      }
    }

    const out = emptySections();
    out['Primary Request and Intent'] = dedupe([...prior['Primary Request and Intent'], ...requests]);
    const toolUse = [...toolCounts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    out['Key Technical Concepts'] = dedupe([
      ...prior['Key Technical Concepts'],
      ...(toolUse.length > 0 ? [bullet(`Tools used: ${toolUse.map(([n, c]) => `${code(n)} ×${c}`).join(', ')}`)] : []),
    ]);
    const fileEntries = [...files.entries()]
      .sort((a, b) => a[1].last - b[1].last)
      .map(([path, f]) => bullet(`${code(path)}: ${[...f.ops.entries()].map(([op, n]) => (n > 1 ? `${op} ×${n}` : op)).join(', ')}`));
    out['Files and Code'] = dedupe([...prior['Files and Code'], ...fileEntries]);
    out['Errors and Fixes'] = dedupe([...prior['Errors and Fixes'], ...errors]);
    out['Pending Jobs'] = dedupe(prior['Pending Jobs']);
    out['Current Work'] = latestAssistant !== undefined ? [bullet(latestAssistant)] : dedupe(prior['Current Work']);
    out['Next Step'] =
      latestRequest !== undefined
        ? [bullet(`Continue with the most recent user request: "${this.line(firstLine(latestRequest))}"`)]
        : dedupe(prior['Next Step']);
    out['Critical Context'] = dedupe([...prior['Critical Context'], ...commands]);
    return out;
  }

  private line(s: string): string {
    const points = Array.from(s);
    return points.length <= this.maxLineChars ? s : `${points.slice(0, this.maxLineChars).join('')}…`;
  }
}
