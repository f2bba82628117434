/**
 * Just enough of Markdown for the docs test: fenced code blocks, inline links outside code, and
 * heading anchors as GitHub spells them.
 */

export interface CodeBlock {
  lang: string;
  code: string;
  /** 1-based line of the opening fence. */
  line: number;
}

export function codeBlocks(text: string): CodeBlock[] {
  const out: CodeBlock[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([\w+-]*)/.exec(lines[i]!);
    if (!open) continue;
    const fence = open[2]!;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !lines[j]!.trimStart().startsWith(fence)) body.push(lines[j++]!);
    out.push({ lang: open[3]!, code: body.join('\n'), line: i + 1 });
    i = j;
  }
  return out;
}

/** The text with fenced blocks and inline code blanked (line numbers kept). */
function prose(text: string): string[] {
  const lines = text.split('\n');
  let fence: string | null = null;
  return lines.map((line) => {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence !== null) {
      if (m && line.trimStart().startsWith(fence)) fence = null;
      return '';
    }
    if (m) {
      fence = m[1]!;
      return '';
    }
    return line.replace(/(`+)[\s\S]*?\1/g, '');
  });
}

export function linksOf(text: string): Array<{ target: string; line: number }> {
  const out: Array<{ target: string; line: number }> = [];
  prose(text).forEach((line, i) => {
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ target: m[1]!, line: i + 1 });
  });
  return out;
}

/** GitHub's heading slug: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

export function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  const lines = text.split('\n');
  let fence: string | null = null;
  for (const line of lines) {
    const f = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence !== null) {
      if (f && line.trimStart().startsWith(fence)) fence = null;
      continue;
    }
    if (f) {
      fence = f[1]!;
      continue;
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]!);
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const base = slug(h[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}
