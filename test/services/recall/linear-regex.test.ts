/**
 * Recall patterns run in linear time whatever the model writes (docs/recall.md): the patterns
 * that froze a backtracking engine on one shadowed 20,000-character run of `a`, and 1,000
 * generated ones, answer within the per-call budget; the budget holds inside one long text;
 * the engine finds what JavaScript's finds; what it cannot run in linear time is refused.
 */
import { describe, expect, it } from 'vitest';
import { recallTool } from '../../../src/services/recall/index';
import { BudgetExceeded, compileLinear, PatternError } from '../../../src/services/recall/linear-regex';
import type { Session } from '../../../src/session/session';
import { compact, errorTurn, newSession, readTurn } from '../../helpers/recall';
import { FROZE, hostilePattern, rng } from '../../helpers/regex-patterns';

/** A session whose one shadowed tool result is `text` (a run of `a` by default). */
async function shadowed(text: string): Promise<Session> {
  const { session, w } = newSession();
  errorTurn(w, 'cat big.log', text);
  readTurn(w, 'Now the server.', ['src/server.ts'], 'Server read.');
  await compact(session);
  readTurn(w, 'And the router.', ['src/router.ts'], 'Router read.');
  return session;
}

/**
 * The budget's clock as a count of its reads: the engine reads it every few thousand steps, so
 * a deadline of N reads is N slices of work, whatever the machine's speed. "Within the budget"
 * is then exact (no slack for a loaded machine: no verdict here depends on the wall clock), and
 * "linear" is the reads a search takes growing with the text, not faster.
 */
function stepClock(): { now: () => number; reads: () => number } {
  let n = 0;
  return { now: () => ++n, reads: () => n };
}

/** Budgets in clock reads. */
const BUDGET = 40;
const FOREVER = 1_000_000;

describe('recall regex: linear time on a shadowed run of 20,000 a', () => {
  const RUN = 'a'.repeat(20_000);

  it('the patterns that froze the backtracking engine stop at the budget: one slice of work past it at most', async () => {
    const session = await shadowed(RUN);
    for (const query of FROZE) {
      const clock = stepClock();
      const out = recallTool(session, { scanBudgetMs: BUDGET, now: clock.now }).run({ query, regex: true });
      expect(out.isError, `${query}: ${out.text}`).toBe(false);
      // The read that set the deadline, the budget's reads, and the one that found it passed.
      expect(clock.reads(), query).toBeLessThanOrEqual(BUDGET + 2);
    }
  });

  it('and they finish: the whole history searched (no match, not cut off), in linear time', async () => {
    const small = await shadowed(RUN);
    const large = await shadowed(RUN + RUN);
    for (const query of FROZE) {
      const once = stepClock();
      const out = recallTool(small, { scanBudgetMs: FOREVER, now: once.now }).run({ query, regex: true });
      expect(out.isError, query).toBe(false);
      expect(out.text, query).not.toContain('time budget');
      // Twice the text, at most about twice the work (a backtracking engine's grows without bound).
      const twice = stepClock();
      recallTool(large, { scanBudgetMs: FOREVER, now: twice.now }).run({ query, regex: true });
      expect(twice.reads(), query).toBeLessThanOrEqual(2.5 * once.reads() + 4);
    }
    // The run is followed by a line end: no `a…aX` anywhere (the "x" of "exit code" has no a before it).
    expect(recallTool(small, { scanBudgetMs: FOREVER, now: stepClock().now }).run({ query: '(a|aa)+X', regex: true }).matches).toBe(0);
  });

  it('(a+)+ runs (no longer refused) and finds the run', async () => {
    const session = await shadowed(RUN);
    const out = recallTool(session, { scanBudgetMs: FOREVER, now: stepClock().now }).run({ query: '\\n(a+)+\\n', regex: true });
    expect(out.isError).toBe(false);
    expect(out.matches).toBe(1);
    expect(out.text).toContain('result of bash {"command":"cat big.log"}');
  });

  it('1,000 generated patterns each stop at the budget', async () => {
    const session = await shadowed(RUN);
    const next = rng(44);
    let ran = 0;
    for (let k = 0; k < 1_000; k++) {
      const query = hostilePattern(next);
      const clock = stepClock();
      const out = recallTool(session, { scanBudgetMs: BUDGET, now: clock.now }).run({ query, regex: true });
      // Every pattern JavaScript accepts runs (none is refused for its shape); the rest are answered as errors.
      let valid = true;
      try {
        new RegExp(query);
      } catch {
        valid = false;
      }
      expect(out.isError, `${query}: ${out.text}`).toBe(!valid);
      if (!out.isError) ran++;
      expect(clock.reads(), query).toBeLessThanOrEqual(BUDGET + 2);
    }
    expect(ran).toBeGreaterThan(700);
  });
});

describe('recall regex: the budget holds inside one text', () => {
  it('a 1 MB shadowed text is cut off mid-match at the budget, and the answer says so', async () => {
    const big = `${'a'.repeat(500_000)}\n${'ab '.repeat(170_000)}`;
    const session = await shadowed(big);
    const clock = stepClock();
    const out = recallTool(session, { scanBudgetMs: 3, now: clock.now }).run({ query: '(\\w|a|ab|b)*(X|Y|Z){2}', regex: true });
    expect(out.isError).toBe(false);
    expect(clock.reads()).toBeLessThanOrEqual(3 + 2);
    expect(out.text).toMatch(/before the time budget ran out/);
  });

  it('the engine itself stops at the deadline, during one search', () => {
    const p = compileLinear('(a|aa)+X');
    const text = 'a'.repeat(1_000_000);
    let reads = 0;
    const clock = () => ++reads;
    expect(() => p.search(text, 0, { now: clock, deadline: 3 })).toThrow(BudgetExceeded);
    // It read the clock a few times only: it stopped early in the text, not at its end.
    expect(reads).toBe(4);
  });
});

describe('recall regex: the same matches as JavaScript', () => {
  /** Patterns whose repeated parts cannot match empty (there, JavaScript's empty-iteration rule differs from RE2's). */
  function pattern(next: () => number, d: number): [string, boolean] {
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
    if (d <= 0) return [pick(['a', 'b', 'X', '.', '\\w', '\\d', '[ab]', '[^a]', '\\s', 'A', '-', '[A-C]', '\\.']), false];
    const r = next();
    const [x, nx] = pattern(next, d - 1);
    if (r < 0.3) {
      const [y, ny] = pattern(next, d - 1);
      return [x + y, nx && ny];
    }
    if (r < 0.45) {
      const [y, ny] = pattern(next, d - 1);
      return [`(${x}|${y})`, nx || ny];
    }
    if (r < 0.55) return [pick(['^', '$', '\\b', '\\B']) + x, nx];
    if (nx) return [x, nx];
    const q = pick(['*', '+', '?', '*?', '+?', '??', '{1,3}', '{2}', '{0,2}', '{2,}']);
    return [`(?:${x})${q}`, !['+', '+?', '{1,3}', '{2}', '{2,}'].includes(q)];
  }

  it('on 1,000 random patterns and 30 texts: the first three matches agree', () => {
    const next = rng(7);
    const texts = Array.from({ length: 30 }, () =>
      Array.from({ length: 1 + Math.floor(next() * 14) }, () => ['a', 'b', 'X', 'x', ' ', '1', '-', 'B', '\n', '.', 'c'][Math.floor(next() * 11)]).join(''),
    );
    const forever = { now: () => 0, deadline: 1 };
    let compared = 0;
    for (let k = 0; k < 1_000; k++) {
      const src = pattern(next, 3)[0];
      const native = new RegExp(src, 'gi');
      const linear = compileLinear(src);
      for (const t of texts) {
        native.lastIndex = 0;
        const want: Array<[number, number]> = [];
        for (let m = native.exec(t); m !== null && want.length < 3; m = native.exec(t)) {
          want.push([m.index, m.index + m[0].length]);
          if (m[0].length === 0) native.lastIndex++;
        }
        expect(linear.matches(t, 3, forever), `${src} on ${JSON.stringify(t)}`).toEqual(want);
        compared++;
      }
    }
    expect(compared).toBe(30_000);
  });

  it('escapes, classes, counted repetitions and anchors as JavaScript reads them', () => {
    const forever = { now: () => 0, deadline: 1 };
    const text = 'Error: ENOENT /srv/app/.env.local\tline 42 at 0x1F {a} [x] tab\\';
    for (const src of [
      'ENOENT\\s+/srv',
      '\\/srv\\/app\\/\\.env',
      '\\x30x1f',
      '\\u0041pp',
      '[\\d]{2}',
      '\\{a\\}',
      '{a}',
      '\\[x\\]',
      'l[^a-z\\s]ne',
      '^error',
      'tab\\\\$',
      '\\berr',
      'a\\B',
      '(?<word>env)\\.',
      'e{1,}n',
      '\\t',
      '[.]env',
      '\\cI',
      '[\\w-]+/',
    ]) {
      const native = new RegExp(src, 'i').exec(text);
      const got = compileLinear(src).search(text, 0, forever);
      expect(got, src).toEqual(native ? [native.index, native.index + native[0].length] : undefined);
    }
  });
});

describe('recall regex: what cannot run in linear time is refused, as an answer', () => {
  it.each([
    ['(a)\\1', /backreferences/],
    ['(?<x>a)\\k<x>', /named backreferences/],
    ['foo(?=bar)', /lookahead and lookbehind/],
    ['(?<!x)y', /lookahead and lookbehind/],
    ['([a-z', /unterminated/],
    ['a**', /nothing to repeat/],
    ['(a{1000}){1000}', /too large/],
    ['x{5,2}', /out of order/],
  ])('%s', async (query, message) => {
    const session = await shadowed('a'.repeat(100));
    const before = JSON.stringify(session.events());
    const out = recallTool(session).run({ query, regex: true });
    expect(out.isError).toBe(true);
    expect(out.text).toMatch(/^recall error: query is not a regular expression recall can run/);
    expect(out.text).toMatch(message);
    expect(JSON.stringify(session.events())).toBe(before);
  });

  it('PatternError is what compileLinear throws', () => {
    expect(() => compileLinear('(?=x)')).toThrow(PatternError);
  });
});
