/**
 * Why recall keeps its own linear-time engine rather than re2js (docs/recall.md#the-regular-expression-engine;
 * the timings are bench/recall-regex-engines.ts's, never a test verdict): on the suite's own
 * patterns both run in linear time and agree with JavaScript, and ours is the safer of the two:
 * it refuses every backreference and lookaround as a typed answer, where re2js (2.10.0, fed
 * the JavaScript syntax through its own translateRegExp) runs `\k<name>` as something else;
 * and it stops at the deadline inside one long text, where re2js's search runs to its end.
 */
import { RE2JS } from 're2js';
import { describe, expect, it } from 'vitest';
import { BudgetExceeded, compileLinear, PatternError } from '../../../src/services/recall/linear-regex';
import { parseRecallArgs, RecallError } from '../../../src/services/recall/index';
import { FROZE, ORDINARY, REFUSED } from '../../helpers/regex-patterns';

const re2 = (src: string) => RE2JS.compile(RE2JS.translateRegExp(src), RE2JS.CASE_INSENSITIVE);

describe("the regular-expression engine: ours against re2js on the suite's patterns", () => {
  it.each(REFUSED.map((src) => [src]))('%s: ours refuses it with a typed error, as a recall answer', (src) => {
    expect(() => compileLinear(src)).toThrow(PatternError);
    expect(() => parseRecallArgs({ query: src, regex: true })).toThrow(RecallError);
  });

  it('re2js does not refuse every one of them: a named backreference runs as a different pattern', () => {
    const refusedByRe2 = REFUSED.filter((src) => {
      try {
        re2(src);
        return false;
      } catch {
        return true;
      }
    });
    expect(refusedByRe2.length).toBeLessThan(REFUSED.length);
    // `(?<x>a)\k<x>` means "a, then a again" to JavaScript; re2js answers for another text.
    expect(new RegExp('(?<x>a)\\k<x>').test('aa')).toBe(true);
    expect(re2('(?<x>a)\\k<x>').matcher('aa').find()).toBe(false);
  });

  it('both compile every hostile and ordinary pattern of the suite', () => {
    for (const src of [...FROZE, ...ORDINARY]) {
      expect(() => compileLinear(src), src).not.toThrow();
      expect(() => re2(src), src).not.toThrow();
    }
  });

  it('ours stops at the deadline inside one long text (a clock it reads as it goes)', () => {
    let reads = 0;
    expect(() => compileLinear('(a|aa)+X').search('a'.repeat(1_000_000), 0, { now: () => ++reads, deadline: 3 })).toThrow(BudgetExceeded);
    expect(reads).toBeLessThan(10);
  });
});
