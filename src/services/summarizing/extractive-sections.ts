/**
 * The eight sections of an extractive summary as bullet entries: how an entry is written
 * (bullet, inline code, first line), how entries are deduplicated, how the sections render to
 * Markdown, and how a prior checkpoint's summary is read back into sections.
 */
import { SUMMARY_SECTIONS, type SummarySection } from './instruction';

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
  return `- ${text.split('\n').map((l, i) => (i === 0 || l === '' ? l : `  ${l}`)).join('\n')}`;
}

/** An inline code span that survives backticks inside the text; multi-line text shows its first line. */
export function code(text: string): string {
  const lines = text.split('\n');
  const shown = lines.length > 1 ? `${lines[0]} … (+${lines.length - 1} lines)` : text;
  const fence = shown.includes('`') ? '``' : '`';
  return `${fence}${fence === '``' ? ` ${shown} ` : shown}${fence}`;
}

export function firstLine(text: string): string {
  return text.split('\n').find((l) => l.trim() !== '')?.trim() ?? '';
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
