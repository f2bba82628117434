/**
 * The model-free summarizer: fills the checkpoint's eight sections (SPEC §8) straight from
 * the span's events — user requests verbatim, files and commands seen, errors, the latest
 * assistant text — with no network and no randomness (the same span always gives the same
 * bytes). It lets every test and the main job run without an API key, and is a real fallback
 * for users with no summarization model.
 */
import { unframeCheckpoint } from './checkpoint';
import type { Summarizer, SummaryRequest, SummaryResult } from './contract';
import { SUMMARY_SECTIONS } from './instruction';
import { deriveLedgerAndResolved, emptyLedger, ERROR_LINE, parseArgs, parseLedger, pathArguments } from './ledger';
import { bullet, code, dedupe, emptySections, firstLine, parseSummary, type Sections } from './extractive-sections';
import { commandArguments, itemsFromEvents, itemsFromMessages, PATH_KEYS, pathsInCommand, pathsInText, type Item } from './extractive-read';
import { fitWithLedger, throwIfCancelled } from './extractive-fit';

export { parseSummary, renderSections } from './extractive-sections';

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
        const summary = item.checkpoint ? unframeCheckpoint(item.text) ?? item.text : undefined;
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
