/**
 * Every file of the shared real transcripts (../shared/data: its *.jsonl and everything under
 * corpus/, whatever the format) as the strings a session could hold: each JSON line's or JSON
 * file's string values, and a file that is not JSON as its whole text. For scans that must see
 * all of it (redaction's false positives).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const SHARED_DATA = process.env.XCOMPACT_SHARED_DATA ?? '/work/shared/data';

/** The transcripts: the *.jsonl at the top, and every file under corpus/. */
export function sharedDataFiles(root = SHARED_DATA): string[] {
  if (!existsSync(root)) return [];
  const walk = (dir: string): string[] =>
    readdirSync(dir)
      .sort()
      .flatMap((name) => {
        const path = join(dir, name);
        return statSync(path).isDirectory() ? walk(path) : [path];
      });
  const top = readdirSync(root)
    .filter((f) => f.endsWith('.jsonl'))
    .sort()
    .map((f) => join(root, f));
  return [...top, ...(existsSync(join(root, 'corpus')) ? walk(join(root, 'corpus')) : [])];
}

function collect(value: unknown, out: string[]): void {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) collect(v, out);
  else if (value !== null && typeof value === 'object') for (const v of Object.values(value)) collect(v, out);
}

/** The strings of one file (see the header). */
export function stringsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  const parse = (s: string): boolean => {
    try {
      collect(JSON.parse(s), out);
      return true;
    } catch {
      return false;
    }
  };
  if (file.endsWith('.jsonl')) {
    for (const line of text.split('\n')) if (line.trim() !== '' && !parse(line)) out.push(line);
  } else if (!(file.endsWith('.json') && parse(text))) out.push(text);
  return out;
}
