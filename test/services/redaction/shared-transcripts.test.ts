/**
 * Redaction on the shared real transcripts (../shared/data/*.jsonl and every file under its
 * corpus/): every string a session could hold goes through the default rules, and every hit is
 * listed. A hit is a false positive unless it was reviewed and found to be a real secret
 * (REVIEWED, by file and redacted text); the reviewed list is empty: those transcripts hold no
 * credential, and nothing in them may be redacted. A new rule that takes an ordinary value for a
 * secret fails here with the value shown. `npx tsx bench/redaction.ts` prints the same scan.
 */
import { describe, expect, it } from 'vitest';
import { findSecrets } from '../../../src/services/redaction/index';
import { SHARED_DATA, sharedDataFiles, stringsOf } from '../../helpers/shared-data';

/** Hits reviewed and found to be real secrets: `${file}: ${the text found}`. None so far. */
const REVIEWED: readonly string[] = [];

const files = sharedDataFiles();

describe.skipIf(files.length === 0)(`redaction on the shared transcripts (${SHARED_DATA})`, () => {
  it('finds no secret where there is none: 0 false positives, every hit listed', () => {
    const hits: string[] = [];
    let strings = 0;
    let chars = 0;
    for (const file of files) {
      for (const s of stringsOf(file)) {
        strings++;
        chars += s.length;
        for (const span of findSecrets(s)) hits.push(`${file.slice(SHARED_DATA.length + 1)}: [${span.kind}] ${s.slice(span.start, span.end)}`);
      }
    }
    expect(files.length).toBeGreaterThanOrEqual(15);
    expect(strings).toBeGreaterThan(100_000);
    expect(chars).toBeGreaterThan(10_000_000);
    const falsePositives = hits.filter((h) => !REVIEWED.includes(h));
    expect(falsePositives).toEqual([]);
  });
});
