/**
 * The recall suite's regular expressions, for its tests and for bench/recall-regex-engines.ts:
 * the hostile ones (the patterns that froze a backtracking engine on a run of `a`, and random
 * patterns over nested quantifiers, alternation, classes and anchors), the ordinary ones a
 * model writes to find a line, and the syntax no linear-time engine may run.
 */

/** A small deterministic generator (no Math.random: a failure replays). */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Random patterns over a, X, classes, groups, alternation and every quantifier, nested freely. */
export function hostilePattern(next: () => number, depth = 4): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]!;
  const go = (d: number): string => {
    if (d === 0) return pick(['a', 'aa', 'X', '.', '\\w', '\\W', '\\s', '[a-z]', '[^X]', 'a?', '\\b', '^', '$']);
    const r = next();
    if (r < 0.25) return go(d - 1) + go(d - 1);
    if (r < 0.45) return `(${go(d - 1)}|${go(d - 1)})`;
    if (r < 0.8) return `(${go(d - 1)})${pick(['*', '+', '?', '*?', '+?', '{2,}', '{0,5}', '{3}'])}`;
    return go(d - 1) + pick(['*', '+', '.*', 'X']);
  };
  return go(1 + Math.floor(next() * depth));
}

/** The patterns that froze the backtracking engine on a run of 20,000 `a`. */
export const FROZE = ['(a|aa)+X', '.*.*.*.*.*.*X', '(\\w|a)*X', '(a+)+', '(a+)+X', '(a*)*X', '(a|a?)+$X', '(.*a){12}X'];

/** What a model writes to find a line again (the recall tests' and examples' queries). */
export const ORDINARY = [
  'ENOENT\\s+/srv',
  'ENOENT: no such',
  '\\/srv\\/app\\/\\.env',
  'export (const|function) \\w+',
  'function \\w+_f\\d+\\(',
  'RETRY_LIMIT\\s*=\\s*\\d+',
  'error|fail(ed|ure)?',
  '^\\s*import .* from',
  'TODO|FIXME',
  '\\b[A-Z_]{4,}\\b',
  '\\d{3,}',
  'return x \\* \\d+ \\+ \\d+;',
  '"path":\\s*"[^"]+\\.ts"',
  'https?://[\\w./-]+',
  '[\\w.-]+@[\\w.-]+\\.\\w+',
];

/** Syntax that cannot run in linear time (or at all): refused by a linear engine, with a message. */
export const REFUSED = ['(a)\\1', '(?<x>a)\\k<x>', 'foo(?=bar)', 'foo(?!bar)', '(?<=x)y', '(?<!x)y'];
