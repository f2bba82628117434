/**
 * Every real transcript of /work/shared/data and its corpus/ (when present on this machine)
 * imports whole: no refused file, one checkpoint per compaction the harness made (counted here
 * from the file's own records, independently of the importer), merged and torn lines counted.
 * Absent data skips with a line saying so.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isCheckpoint } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { importTranscriptFile } from '../../src/transcripts/import';

const ROOT = process.env.XCOMPACT_SHARED_DATA ?? '/work/shared/data';
const files = [ROOT, join(ROOT, 'corpus/claude-code'), join(ROOT, 'corpus/codex')]
  .filter((d) => existsSync(d))
  .flatMap((d) =>
    readdirSync(d)
      .filter((f) => f.endsWith('.jsonl'))
      .map((f) => join(d, f)),
  );

/** The harness's own compactions, by a plain text scan of the file. */
function harnessCompactions(text: string): number {
  return (
    (text.match(/"subtype":"compact_boundary"/g) ?? []).length +
    (text.match(/"type":"compacted"/g) ?? []).length +
    (text.match(/^\{"type":"compaction"/gm) ?? []).length
  );
}

describe.skipIf(files.length === 0)('the shared real transcripts import whole', () => {
  it.each(files.map((f) => [f.slice(ROOT.length + 1), f]))(
    '%s',
    async (_name, file) => {
      const s = Session.inMemory();
      const text = readFileSync(file, 'utf8');
      const report = await importTranscriptFile(s, file);
      expect(report.compactions).toBe(harnessCompactions(text));
      expect(s.events().filter(isCheckpoint)).toHaveLength(report.compactions);
      expect(report.mergedLines).toBe(
        text.split('\n').filter(
          (l) =>
            /\}\s*\{"/.test(l) &&
            (() => {
              try {
                JSON.parse(l);
                return false;
              } catch {
                return true;
              }
            })(),
        ).length,
      );
      expect(report.tornLines).toBe(0);
      expect(report.turns).toBeGreaterThan(0);
      // A live session's torn tail: the same file cut mid-record still imports.
      const cut = text.slice(0, text.lastIndexOf('\n', text.length - 2) + 40);
      const torn = await import('../../src/transcripts/import').then((m) => m.importTranscript(Session.inMemory(), cut, report.harness));
      expect(torn.tornLines).toBe(1);
    },
    60_000,
  );
});

if (files.length === 0) it.skip(`no shared transcripts at ${ROOT}: the real-data import test is skipped`, () => undefined);
