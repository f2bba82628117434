/**
 * The one record walker every transcript importer reads its file with (pi, Claude Code, Codex)
 * and format detection samples with: JSONL as a live harness writes it. Pure: no session.
 *
 * - A line holding several records written without a newline between them (`…}{…`, as Claude
 *   Code sometimes writes) is split into its records, each keeping the line's number; the line
 *   is counted in `mergedLines`.
 * - A last line that does not parse is a torn write (the harness is still writing, or crashed
 *   mid-record): it is reported in `torn` and skipped, as a live file is read, never a reason to
 *   refuse the file.
 * - Any other line that is not a JSON object is reported in `bad` (the first one), for the
 *   importer to refuse the file with its own typed error naming the line.
 */

export interface JsonLine {
  /** 1-based line number in the file (records split from one line share it). */
  line: number;
  record: Record<string, unknown>;
}

export interface RecordWalk {
  records: JsonLine[];
  /** Non-empty lines of the file (a merged line counts once, a torn one too). */
  lines: number;
  /** Lines that held more than one record. */
  mergedLines: number;
  /** The torn last line, skipped: its number and its length in characters. */
  torn: { line: number; chars: number } | undefined;
  /** The first line that is neither a JSON object nor records run together, and why. */
  bad: { line: number; reason: string } | undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The top-level JSON values of `raw` run together (`{…}{…}`), as source slices: a scan that
 * follows strings and nesting, so a `}{` inside a string is no boundary. Undefined when the
 * text does not close (a torn record) or holds anything but values between them.
 */
export function splitRecords(raw: string): string[] | undefined {
  const out: string[] = [];
  let depth = 0;
  let inString = false;
  let escaped = false;
  let start = -1;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (inString) {
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') {
      inString = true;
      if (depth === 0) return undefined; // a bare string between records
      continue;
    }
    if (c === '{' || c === '[') {
      if (depth === 0) start = i;
      depth++;
    } else if (c === '}' || c === ']') {
      depth--;
      if (depth < 0) return undefined;
      if (depth === 0) out.push(raw.slice(start, i + 1));
    } else if (depth === 0 && !/\s/.test(c)) return undefined;
  }
  return depth === 0 && !inString && out.length > 0 ? out : undefined;
}

/** Walks JSONL text: every record, merged lines split, a torn last line skipped, the first bad line named. */
export function walkRecords(text: string): RecordWalk {
  const walk: RecordWalk = { records: [], lines: 0, mergedLines: 0, torn: undefined, bad: undefined };
  const lines = text.split('\n');
  let last = lines.length - 1;
  while (last >= 0 && lines[last]!.trim() === '') last--;
  for (let i = 0; i <= last; i++) {
    const raw = lines[i]!.trim();
    if (raw === '') continue;
    walk.lines++;
    let value: unknown;
    let error: Error | undefined;
    try {
      value = JSON.parse(raw);
    } catch (err) {
      error = err as Error;
    }
    if (error === undefined) {
      if (isObject(value)) walk.records.push({ line: i + 1, record: value });
      else walk.bad ??= { line: i + 1, reason: 'not a JSON object' };
      continue;
    }
    const parts = splitRecords(raw);
    const values = parts?.map((p) => {
      try {
        return JSON.parse(p) as unknown;
      } catch {
        return undefined;
      }
    });
    if (values && values.every(isObject)) {
      for (const v of values) walk.records.push({ line: i + 1, record: v });
      walk.mergedLines++;
      continue;
    }
    if (i === last) {
      walk.torn = { line: i + 1, chars: lines[i]!.length };
      continue;
    }
    walk.bad ??= { line: i + 1, reason: `not valid JSON (${error.message})` };
  }
  return walk;
}
