/**
 * Every pointer in the sources resolves inside the repository: no `SPEC §N` or `issue N` left
 * (scripts/rewrite-refs.ts turns them into docs pointers), and every `docs/….md#anchor` in a
 * comment names a page and a heading that exist.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchors, brokenPointers, files, issuePage, rewriteFile, root, specPointer } from '../../scripts/rewrite-refs';

describe('references in the sources', () => {
  const all = files().map((file) => ({ file, text: readFileSync(join(root, file), 'utf8') }));

  it('no SPEC § or issue reference is left to rewrite, and every docs pointer names an existing heading', () => {
    const left: string[] = [];
    const broken: string[] = [];
    for (const { file, text } of all) {
      for (const r of rewriteFile(file, text).refs) left.push(`${r.file}:${r.line}: ${r.text}${r.problem ? ` (${r.problem})` : ` → ${r.to}`}`);
      for (const r of brokenPointers(file, text)) broken.push(`${r.file}:${r.line}: ${r.text} (${r.problem})`);
    }
    expect(left, 'run `npx tsx scripts/rewrite-refs.ts`').toEqual([]);
    expect(broken).toEqual([]);
    expect(all.length).toBeGreaterThan(300);
  });

  it('every section of docs/spec.md and every page the issue table names exists', () => {
    for (let n = 1; n <= 18; n++) expect(specPointer(n), `§${n}`).toMatch(new RegExp(`^docs/spec\\.md#${n}-`));
    for (let n = 1; n <= 18; n++) {
      const [page, anchor] = specPointer(n)!.slice('docs/'.length).split('#') as [string, string];
      expect(anchors(page)!.has(anchor)).toBe(true);
    }
    expect(issuePage('test/x.test.ts', 26, undefined)).toBe('docs/recall.md');
  });

  it('the rewrite finds what it must and is idempotent (a comment, a test name, not program output)', () => {
    const test = "// SPEC §13 and issue 26\nit('stalls (issue 29 item 3)', () => {});\nconst s = 'issue 26';\n";
    const once = rewriteFile('test/x.test.ts', test);
    expect(once.refs.map((r) => r.to)).toEqual([specPointer(13), 'docs/recall.md', 'docs/reliability.md#summary-timeouts', 'docs/recall.md']);
    expect(once.text).toBe(
      `// ${specPointer(13)} and docs/recall.md\nit('stalls (docs/reliability.md#summary-timeouts)', () => {});\nconst s = 'docs/recall.md';\n`,
    );
    expect(rewriteFile('test/x.test.ts', once.text)).toEqual({ text: once.text, refs: [] });
    const src = '/** issue 26 */\nexport const template = `see issue #212`;\n';
    expect(rewriteFile('src/x.ts', src).text).toBe('/** docs/recall.md */\nexport const template = `see issue #212`;\n');
    expect(rewriteFile('src/x.ts', '// issue 999\n').refs[0]!.problem).toMatch(/no page/);
    expect(brokenPointers('src/x.ts', '// docs/spec.md#99-nope and docs/nope.md\n').map((r) => r.problem)).toEqual([
      'no heading #99-nope in docs/spec.md',
      'no page docs/nope.md',
    ]);
  });
});
