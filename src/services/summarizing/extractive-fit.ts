/**
 * Fitting an extractive summary within its token budget: the ledger and the sections share
 * the cap, each fact stated once (in the ledger or in the prose), and the prose trimmed oldest
 * entry first until the whole text counts within budget. Checks for cancellation between rounds.
 */
import { SummarizerError } from './contract';
import { SUMMARY_SECTIONS, type SummarySection } from './instruction';
import { fitCheckpointLedger, renderLedger, userMessage, withLedger, type Ledger, type LedgerError } from './ledger';
import { bullet, code, dedupe, emptySections, omittedNote, renderSections, type Sections } from './extractive-sections';

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
function restateOutsideLedger(sections: Sections, derived: { ledger: Ledger; resolved: LedgerError[] }, fitted: Ledger, cut: (line: string) => string): Sections {
  const out = Object.fromEntries(SUMMARY_SECTIONS.map((s) => [s, [...sections[s]]])) as unknown as Sections;
  // The user's messages the ledger holds verbatim are not restated in the prose.
  const listedRequests = new Set(fitted.requests);
  if (listedRequests.size > 0) out['Primary Request and Intent'] = out['Primary Request and Intent'].filter((e) => !listedRequests.has(userMessage(unbullet(e))));
  const listedPaths = new Set([...fitted.read, ...fitted.modified]);
  const listedErrors = new Set(fitted.errors.map((e) => e.line));
  const { ledger } = derived;
  if (listedPaths.size > 0 || ledger.read.length + ledger.modified.length > 0) {
    const modified = new Set(ledger.modified);
    const spilled = [...ledger.read, ...ledger.modified].filter((p) => !listedPaths.has(p)).map((p) => bullet(`${code(p)}: ${modified.has(p) ? 'modified' : 'read'}`));
    out['Files and Code'] = dedupe([...spilled, ...out['Files and Code']]).filter((e) => !listedPaths.has(entrySubject(e) ?? ''));
  }
  if (listedErrors.size > 0 || ledger.errors.length + derived.resolved.length > 0) {
    const spilled = [...derived.resolved, ...ledger.errors.filter((e) => !listedErrors.has(e.line))].map((e) => bullet(`${code(e.target.split(' ')[0] ?? 'tool')}: ${cut(e.line)}`));
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

export function throwIfCancelled(signal: AbortSignal): void {
  if (signal.aborted) {
    throw new SummarizerError('summary-cancelled', 'The extractive summary was cancelled.', { cause: signal.reason });
  }
}
