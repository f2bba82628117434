/**
 * `npx tsx scripts/rewrite-refs.ts [--check]`: turns every pointer that leads out of the repository
 * into one that resolves inside it. `SPEC §N` becomes `docs/spec.md#N-<heading>`; `issue N` (an
 * old tracker nobody who clones the repository can see) becomes the docs page that holds its rule
 * (ISSUE_PAGES), or is reworded away where no rule stands behind it (REWORDINGS).
 * Reads comments in src/ test/ bench/ scripts/ visualizer/ examples/, and in test/ and bench/ also
 * string literals (test names, `why:` texts, report labels); src/ strings are program output and
 * left alone. Idempotent: a second run changes nothing. Prints counts; `--check` writes nothing and
 * exits 1 while a reference is unresolved or a `docs/….md#anchor` pointer names no heading.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const FOLDERS = ['src', 'test', 'bench', 'scripts', 'visualizer', 'examples'];
/** Folders whose string literals are read too (test names, labels): not program output. */
const STRING_FOLDERS = ['test/', 'bench/'];
/** This script and its test: their examples are references on purpose. */
const SELF = new Set(['scripts/rewrite-refs.ts', 'test/project/refs.test.ts']);

/** An `issue N` reference: the number, then an item or section it names. */
const ISSUE = /\b[Ii]ssue #?(\d+)(?:(?:,| ) ?items? (\d+)(?: and (\d+))?(?:,? and \d+)*| §(\d+))?/g;
const SPEC = /\bSPEC §(\d+)(?:\.(\d+))?/g;
/** A pointer into the docs: what the check verifies. */
const POINTER = /\bdocs\/([\w-]+\.md)(?:#([\w-]+))?/g;

/**
 * Where the rule of an old issue is written down now, read from the context of its references.
 * `file` narrows an entry to files whose path matches; `item` to one item of the issue. The first
 * entry that matches wins, so specific ones come first.
 */
export const ISSUE_PAGES: Array<{ issue: number; item?: number; file?: RegExp; to: string }> = [
  { issue: 3, to: 'docs/measured.md' },
  { issue: 12, item: 3, to: 'docs/spec.md#5-the-transaction' },
  { issue: 12, item: 5, to: 'docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have' },
  { issue: 12, item: 4, to: 'docs/configuration.md' },
  { issue: 12, file: /policies/, to: 'docs/configuration.md' },
  { issue: 12, to: 'docs/spec.md' },
  { issue: 13, to: 'docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have' },
  { issue: 16, to: 'docs/background.md' },
  { issue: 18, file: /snapshot|program\.test/, to: 'docs/sessions-and-stores.md#reopening-a-long-session' },
  { issue: 18, file: /summary-prices/, to: 'docs/cost-model.md' },
  { issue: 18, to: 'docs/measured.md' },
  { issue: 20, to: 'docs/testing.md' },
  { issue: 25, file: /machines\//, to: 'docs/spec.md#13-background-compaction' },
  { issue: 25, file: /measure-once/, to: 'docs/background.md' },
  { issue: 25, file: /economics\.test|weigh/, to: 'docs/cost-model.md' },
  { issue: 25, file: /economics\/(run|frontier)/, to: 'docs/measured.md#economics-and-memory-xcompact-against-simulated-peer-policies' },
  { issue: 25, to: 'docs/memory.md' },
  { issue: 26, to: 'docs/recall.md' },
  { issue: 28, to: 'docs/transcripts-and-eval.md#measured' },
  { issue: 29, item: 1, to: 'docs/reliability.md#the-storable-value-rule' },
  { issue: 29, item: 3, to: 'docs/reliability.md#summary-timeouts' },
  { issue: 29, item: 5, to: 'docs/reliability.md#the-stores-at-their-edges' },
  { issue: 29, item: 6, to: 'docs/reliability.md#the-stores-at-their-edges' },
  { issue: 29, to: 'docs/reliability.md' },
  { issue: 30, file: /bench\//, to: 'docs/measured.md' },
  { issue: 30, to: 'docs/sessions-and-stores.md#reopening-a-long-session' },
  { issue: 34, file: /compact-local/, to: 'docs/cli.md' },
  { issue: 34, item: 1, to: 'docs/local-models.md#counts-the-tokenizer-is-not-ours' },
  { issue: 34, item: 2, to: 'docs/spec.md#4-pressure-compaction' },
  { issue: 34, item: 3, to: 'docs/local-models.md#the-server-tokenizer-the-model-servers-own-counts' },
  { issue: 34, item: 4, to: 'docs/local-models.md#one-server-slot-background-summaries-while-the-tools-run' },
  { issue: 34, item: 5, to: 'docs/local-models.md#replies-cut-inside-a-tool-call' },
  { issue: 34, file: /tokenizers\/server|server-tokenizer/, to: 'docs/local-models.md#the-server-tokenizer-the-model-servers-own-counts' },
  { issue: 34, file: /slot|required/, to: 'docs/local-models.md#one-server-slot-background-summaries-while-the-tools-run' },
  { issue: 34, file: /measurement|actors|summarizing\/openai/, to: 'docs/local-models.md#counts-the-tokenizer-is-not-ours' },
  { issue: 34, file: /select|range/, to: 'docs/spec.md#4-pressure-compaction' },
  { issue: 34, file: /error-bodies/, to: 'docs/local-models.md#replies-cut-inside-a-tool-call' },
  { issue: 34, to: 'docs/local-models.md' },
  { issue: 40, to: 'docs/transcripts-and-eval.md' },
  { issue: 41, item: 3, to: 'docs/local-models.md#replies-cut-inside-a-tool-call' },
  { issue: 41, item: 6, to: 'docs/testing.md' },
  { issue: 41, file: /real-server/, to: 'docs/testing.md' },
  { issue: 41, file: /llama-truncated|error-bodies|derive|classify/, to: 'docs/local-models.md#replies-cut-inside-a-tool-call' },
  { issue: 41, file: /server-tokenizer|tokenizers\/server/, to: 'docs/local-models.md' },
  { issue: 41, file: /before-request|drop-in|ai-sdk/, to: 'docs/drop-in.md' },
  { issue: 41, to: 'docs/reliability.md' },
  { issue: 42, file: /background|gate|overflow/, to: 'docs/background.md' },
  { issue: 42, file: /peer|fidelity/, to: 'docs/transcripts-and-eval.md' },
  { issue: 42, to: 'docs/measured.md' },
  { issue: 43, to: 'docs/loop-testing.md' },
  { issue: 44, item: 1, to: 'docs/recall.md' },
  { issue: 44, file: /recall|linear-regex/, to: 'docs/recall.md' },
  { issue: 44, to: 'docs/reliability.md' },
  { issue: 45, to: 'docs/measured.md' },
  { issue: 46, to: 'docs/architecture.md' },
  { issue: 47, to: 'docs/drop-in.md' },
];

/** Phrases a mechanical rewrite would leave awkward, or references with no rule behind them: reworded. */
export const REWORDINGS: Array<[from: string, to: string]> = [
  ['Smaller engine defects of issue 12 §5, each', 'Smaller engine defects, each'],
  ['engine defects (issue 12 §5)', 'engine defects'],
  ["Issue 25's reproduction:", 'The reproduction (docs/cost-model.md):'],
  ['5 steps, as issue 20 asks:', '5 steps:'],
  ['The goal of issue 25 for one row', 'The goal for one row (docs/measured.md#economics-and-memory-xcompact-against-simulated-peer-policies)'],
  ['row goal of issue 25 is judged', 'row goal (docs/measured.md#economics-and-memory-xcompact-against-simulated-peer-policies) is judged'],
  ["(issue 25's needed recall, src/eval/memory.ts)", '(needed recall, docs/memory.md, src/eval/memory.ts)'],
  ['the needed facts of issue 25 (src/eval/memory.ts', 'the needed facts (docs/memory.md, src/eval/memory.ts'],
  ['(goals, issue 30: 10k', '(goals: 10k'],
  ['(issue 30 measured 80k events)', '(80k events, as measured on a long real session)'],
  ['(issue 29, "done when")', '(docs/reliability.md#the-storable-value-rule)'],
  ['(issue 3, "Measured, not assumed", items 3 and 4)', '(docs/measured.md)'],
  [
    "used by issue 34's tests and bench:",
    'used by the one-slot tests and bench (docs/local-models.md#one-server-slot-background-summaries-while-the-tools-run):',
  ],
  ["Issue 34 item 5, the CLI's small ones:", "The CLI's small ones (docs/cli.md):"],
  ['The memory measures of issue 25 (src/eval/memory.ts)', 'The memory measures (docs/memory.md, src/eval/memory.ts)'],
  ['(issue 29 items 1, 2 and 5)', '(docs/reliability.md#the-storable-value-rule)'],
];

export interface Ref {
  file: string;
  line: number;
  text: string;
  kind: 'spec' | 'issue' | 'pointer';
  /** What it becomes, or why it cannot (`unresolved: …`). */
  to?: string;
  problem?: string;
}

export function files(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.name === 'node_modules' || e.name === 'out' || e.name === 'fixtures' || e.name.startsWith('.')) continue;
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(m?ts|tsx|m?js)$/.test(e.name)) out.push(relative(root, p));
    }
  };
  for (const f of FOLDERS) walk(join(root, f));
  return out.filter((f) => !SELF.has(f)).sort();
}

/** The [start, end) ranges of a file's comments and (where read) its string literals. */
export function textRanges(file: string, text: string): Array<[number, number, 'comment' | 'string']> {
  // Asked twice per file (rewriteFile, brokenPointers): parsed once.
  if (lastRanges?.file === file && lastRanges.text === text) return lastRanges.ranges;
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, file.endsWith('js') ? ts.ScriptKind.JS : ts.ScriptKind.TS);
  const out: Array<[number, number, 'comment' | 'string']> = [];
  const strings = STRING_FOLDERS.some((f) => file.startsWith(f));
  // Comments live in the gaps between a node's children (with its own tokens: braces, keywords,
  // punctuation; every literal is a child node). Each gap is scanned once, so each comment is
  // met once. ts.forEachChild, not node.getChildren: building a syntax list per node was most
  // of this check's time.
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, sf.languageVariant, text);
  const gap = (from: number, to: number) => {
    if (to <= from) return;
    scanner.resetTokenState(from);
    for (let k = scanner.scan(); k !== ts.SyntaxKind.EndOfFileToken && scanner.getTokenEnd() <= to; k = scanner.scan()) {
      if (k === ts.SyntaxKind.SingleLineCommentTrivia || k === ts.SyntaxKind.MultiLineCommentTrivia)
        out.push([scanner.getTokenStart(), scanner.getTokenEnd(), 'comment']);
      if (scanner.getTokenEnd() >= to) break;
    }
  };
  const visit = (node: ts.Node) => {
    if (strings && (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateLiteralToken(node)))
      out.push([node.getStart(sf), node.getEnd(), 'string']);
    // A literal's own text is no gap (a template tail `}…//…` is not a comment); its leading trivia is.
    if (node.kind >= ts.SyntaxKind.FirstLiteralToken && node.kind <= ts.SyntaxKind.LastTemplateToken) return gap(node.pos, node.getStart(sf));
    let pos = node.pos;
    ts.forEachChild(node, (child) => {
      gap(pos, child.pos);
      visit(child);
      pos = child.end;
    });
    gap(pos, node.end);
  };
  visit(sf);
  const ranges = out.sort((a, b) => a[0] - b[0]);
  lastRanges = { file, text, ranges };
  return ranges;
}
let lastRanges: { file: string; text: string; ranges: Array<[number, number, 'comment' | 'string']> } | undefined;

/** The docs' heading anchors, as GitHub spells them (the docs test's own slug). */
const anchorCache = new Map<string, Set<string> | undefined>();
export function anchors(page: string): Set<string> | undefined {
  if (!anchorCache.has(page)) anchorCache.set(page, readAnchors(page));
  return anchorCache.get(page);
}

function readAnchors(page: string): Set<string> | undefined {
  let text: string;
  try {
    text = readFileSync(join(root, 'docs', page), 'utf8');
  } catch {
    return undefined;
  }
  const out = new Set<string>();
  const counts = new Map<string, number>();
  let fence = false;
  for (const line of text.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fence = !fence;
    const m = fence ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (!m) continue;
    const base = m[1]!
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const n = counts.get(base) ?? 0;
    counts.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** `docs/spec.md#N-…` for section N, read from the page's `## N.` heading. */
export function specPointer(section: number): string | undefined {
  const text = readFileSync(join(root, 'docs', 'spec.md'), 'utf8');
  const m = new RegExp(`^## ${section}\\. (.*)$`, 'm').exec(text);
  if (!m) return undefined;
  const slug = `${section}. ${m[1]}`
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
  return `docs/spec.md#${slug}`;
}

export function issuePage(file: string, issue: number, item: number | undefined): string | undefined {
  for (const e of ISSUE_PAGES) {
    if (e.issue !== issue) continue;
    if (e.item !== undefined && e.item !== item) continue;
    if (e.file && !e.file.test(file)) continue;
    return e.to;
  }
  return undefined;
}

/** One file: its references, and its text with every resolvable one rewritten. */
export function rewriteFile(file: string, text: string): { text: string; refs: Ref[] } {
  const refs: Ref[] = [];
  const ranges = textRanges(file, text);
  let out = '';
  let last = 0;
  const lineAt = (pos: number) => text.slice(0, pos).split('\n').length;
  for (const [start, end] of ranges) {
    out += text.slice(last, start);
    let piece = text.slice(start, end);
    for (const [from, to] of REWORDINGS) {
      const parts = piece.split(from);
      for (let i = 1; i < parts.length; i++) refs.push({ file, line: lineAt(start), text: from, kind: 'issue', to });
      piece = parts.join(to);
    }
    piece = piece.replace(SPEC, (whole, n: string, _m, offset: number) => {
      const to = specPointer(Number(n));
      refs.push({ file, line: lineAt(start + offset), text: whole, kind: 'spec', ...(to ? { to } : { problem: `no section ${n} in docs/spec.md` }) });
      return to ?? whole;
    });
    piece = piece.replace(ISSUE, (whole, n: string, item: string | undefined, _i2, _i3, _s, offset: number) => {
      const to = issuePage(file, Number(n), item === undefined ? undefined : Number(item));
      refs.push({
        file,
        line: lineAt(start + offset),
        text: whole,
        kind: 'issue',
        ...(to ? { to } : { problem: `issue ${n}: no page in ISSUE_PAGES (scripts/rewrite-refs.ts)` }),
      });
      return to ?? whole;
    });
    out += piece;
    last = end;
  }
  out += text.slice(last);
  return { text: out, refs };
}

/**
 * Every `docs/….md(#anchor)` pointer in the comments (and read strings) whose page or heading is
 * missing. In a string, a bare `docs/x.md` naming no page is a test's data, not a pointer.
 */
export function brokenPointers(file: string, text: string): Ref[] {
  const out: Ref[] = [];
  for (const [start, end, kind] of textRanges(file, text)) {
    for (const m of text.slice(start, end).matchAll(POINTER)) {
      const page = anchors(m[1]!);
      const line = text.slice(0, start + m.index).split('\n').length;
      if (!page && kind === 'string' && m[2] === undefined) continue; // a test's data (a path named `docs/x.md`), not a pointer
      if (!page) out.push({ file, line, text: m[0], kind: 'pointer', problem: `no page docs/${m[1]}` });
      else if (m[2] !== undefined && !page.has(m[2])) out.push({ file, line, text: m[0], kind: 'pointer', problem: `no heading #${m[2]} in docs/${m[1]}` });
    }
  }
  return out;
}

export function scan(write: boolean): { rewritten: Ref[]; unresolved: Ref[]; broken: Ref[]; changedFiles: string[] } {
  const rewritten: Ref[] = [];
  const unresolved: Ref[] = [];
  const broken: Ref[] = [];
  const changedFiles: string[] = [];
  for (const file of files()) {
    const path = join(root, file);
    const before = readFileSync(path, 'utf8');
    const { text, refs } = rewriteFile(file, before);
    for (const r of refs) (r.problem ? unresolved : rewritten).push(r);
    if (text !== before) {
      changedFiles.push(file);
      if (write) writeFileSync(path, text);
    }
    broken.push(...brokenPointers(file, write ? text : before));
  }
  return { rewritten, unresolved, broken, changedFiles };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check');
  const { rewritten, unresolved, broken, changedFiles } = scan(!check);
  const count = (rs: Ref[], k: Ref['kind']) => rs.filter((r) => r.kind === k).length;
  console.log(
    `${check ? 'would rewrite' : 'rewrote'}: ${count(rewritten, 'spec')} SPEC §, ${count(rewritten, 'issue')} issue references in ${changedFiles.length} files` +
      (changedFiles.length > 0 && changedFiles.length <= 200 ? ` (${changedFiles.join(', ')})` : ''),
  );
  console.log(`unresolved: ${unresolved.length}; broken docs pointers: ${broken.length}`);
  for (const r of [...unresolved, ...broken]) console.log(`  ${r.file}:${r.line}: ${r.text}: ${r.problem}`);
  if (unresolved.length + broken.length > 0 || (check && changedFiles.length > 0)) process.exitCode = 1;
}
