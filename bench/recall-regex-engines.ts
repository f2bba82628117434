/**
 * Recall's regular-expression engine against re2js (a port of RE2), on the recall suite's own
 * patterns (test/helpers/regex-patterns.ts), measured in one run (docs/recall.md#the-regular-expression-engine):
 *
 * - speed: compile + the first three matches, as one recall call does, for the hostile
 *   patterns on a run of 20,000 `a`, and the ordinary patterns on real text (a shared
 *   transcript's strings, or the suite's file bodies when the data is absent); each engine's
 *   total and the ratio re2js ÷ ours;
 * - safety: time on runs of 20k and 80k `a` (linear: ×4 the text, ×4 the time), the syntax
 *   each refuses (backreferences, lookaround) and how, agreement with JavaScript's matches on
 *   the suite's 1,000 random patterns × 30 texts, and whether a search can stop at a deadline
 *   inside one long text.
 *
 *   npx tsx bench/recall-regex-engines.ts
 */
import { RE2JS } from 're2js';
import { compileLinear } from '../src/services/recall/linear-regex';
import { fileBody, FILES } from '../test/helpers/recall-script';
import { FROZE, ORDINARY, REFUSED, hostilePattern, rng } from '../test/helpers/regex-patterns';
import { sharedDataFiles, stringsOf } from '../test/helpers/shared-data';

const forever = { now: () => 0, deadline: 1 };
type Engine = { name: string; compile(src: string): (text: string) => Array<[number, number]> };

const ours: Engine = {
  name: 'ours (linear-regex.ts)',
  compile(src) {
    const p = compileLinear(src);
    return (text) => p.matches(text, 3, forever);
  },
};

const re2js: Engine = {
  name: 're2js 2.10.0',
  compile(src) {
    const p = RE2JS.compile(RE2JS.translateRegExp(src), RE2JS.CASE_INSENSITIVE);
    return (text) => {
      const m = p.matcher(text);
      const out: Array<[number, number]> = [];
      while (out.length < 3 && m.find()) out.push([m.start(), m.end()]);
      return out;
    };
  },
};

const ENGINES = [ours, re2js];

/** Milliseconds for compile + first three matches of every pattern on every text; patterns an engine refuses are skipped by both. */
function time(engine: Engine, patterns: string[], texts: string[]): number {
  const t = performance.now();
  for (const src of patterns) {
    let run: ((text: string) => Array<[number, number]>) | undefined;
    try {
      run = engine.compile(src);
    } catch {
      continue;
    }
    for (const text of texts) run(text);
  }
  return performance.now() - t;
}

/** Patterns both engines compile (the comparison is on the same work). */
function common(patterns: string[]): string[] {
  return patterns.filter((src) =>
    ENGINES.every((e) => {
      try {
        e.compile(src);
        return true;
      } catch {
        return false;
      }
    }),
  );
}

const next = rng(44);
const generated = Array.from({ length: 1_000 }, () => hostilePattern(next)).filter((src) => {
  try {
    new RegExp(src);
    return true;
  } catch {
    return false;
  }
});
const run20k = 'a'.repeat(20_000);
const files = sharedDataFiles();
const realText = files.length > 0 ? stringsOf(files[0]!).join('\n').slice(0, 1_000_000) : FILES.map(fileBody).join('\n');

const sets: Array<[string, string[], string[]]> = [
  [`froze a backtracking engine (${FROZE.length}) on 20,000 a`, common(FROZE), [run20k]],
  [`1,000 generated hostile (${common(generated).length} valid in both) on 20,000 a`, common(generated), [run20k]],
  [`ordinary (${ORDINARY.length}) on ${(realText.length / 1e6).toFixed(2)} M characters of a real transcript`, common(ORDINARY), [realText]],
];

console.log('## Speed (compile + first three matches; ms, one run; lower is better)\n');
console.log(`| patterns | ${ENGINES.map((e) => e.name).join(' | ')} | re2js ÷ ours |`);
console.log('|---|---|---|---|');
for (const [label, patterns, texts] of sets) {
  for (const e of ENGINES) time(e, patterns.slice(0, 20), texts); // warm-up
  const [a, b] = ENGINES.map((e) => time(e, patterns, texts)) as [number, number];
  console.log(`| ${label} | ${a.toFixed(1)} | ${b.toFixed(1)} | ${(b / a).toFixed(2)} |`);
}

console.log('\n## Safety\n');
console.log(`| check | ${ENGINES.map((e) => e.name).join(' | ')} |`);
console.log('|---|---|---|');
const slowest = (e: Engine, n: number) => {
  const text = 'a'.repeat(n);
  let worst = 0;
  for (const src of common(FROZE)) {
    const run = e.compile(src);
    const t = performance.now();
    run(text);
    worst = Math.max(worst, performance.now() - t);
  }
  return worst;
};
const growth = ENGINES.map((e) => {
  const a = slowest(e, 20_000);
  const b = slowest(e, 80_000);
  return `${a.toFixed(1)} → ${b.toFixed(1)} ms (×${(b / a).toFixed(1)})`;
});
console.log(`| slowest FROZE pattern, 20k → 80k a (linear: ×4) | ${growth.join(' | ')} |`);
for (const src of REFUSED) {
  const cells = ENGINES.map((e) => {
    try {
      e.compile(src);
      return '**runs**';
    } catch (err) {
      return `refused: ${(err as Error).constructor.name}: ${(err as Error).message.slice(0, 60)}`;
    }
  });
  console.log(`| \`${src}\` | ${cells.join(' | ')} |`);
}

// The suite's agreement check: the first three matches of 1,000 random patterns on 30 texts, against JavaScript.
function agreementPattern(nx: () => number, d: number): [string, boolean] {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(nx() * xs.length)]!;
  if (d <= 0) return [pick(['a', 'b', 'X', '.', '\\w', '\\d', '[ab]', '[^a]', '\\s', 'A', '-', '[A-C]', '\\.']), false];
  const r = nx();
  const [x, ex] = agreementPattern(nx, d - 1);
  if (r < 0.3) {
    const [y, ey] = agreementPattern(nx, d - 1);
    return [x + y, ex && ey];
  }
  if (r < 0.45) {
    const [y, ey] = agreementPattern(nx, d - 1);
    return [`(${x}|${y})`, ex || ey];
  }
  if (r < 0.55) return [pick(['^', '$', '\\b', '\\B']) + x, ex];
  if (ex) return [x, ex];
  const q = pick(['*', '+', '?', '*?', '+?', '??', '{1,3}', '{2}', '{0,2}', '{2,}']);
  return [`(?:${x})${q}`, !['+', '+?', '{1,3}', '{2}', '{2,}'].includes(q)];
}
const nx = rng(7);
const texts = Array.from({ length: 30 }, () =>
  Array.from({ length: 1 + Math.floor(nx() * 14) }, () => ['a', 'b', 'X', 'x', ' ', '1', '-', 'B', '\n', '.', 'c'][Math.floor(nx() * 11)]).join(''),
);
const disagree = ENGINES.map(() => 0);
for (let k = 0; k < 1_000; k++) {
  const src = agreementPattern(nx, 3)[0];
  const native = new RegExp(src, 'gi');
  const runs = ENGINES.map((e) => e.compile(src));
  for (const t of texts) {
    native.lastIndex = 0;
    const want: Array<[number, number]> = [];
    for (let m = native.exec(t); m !== null && want.length < 3; m = native.exec(t)) {
      want.push([m.index, m.index + m[0].length]);
      if (m[0].length === 0) native.lastIndex++;
    }
    runs.forEach((run, i) => {
      if (JSON.stringify(run(t)) !== JSON.stringify(want)) disagree[i]!++;
    });
  }
}
console.log(`| disagreements with JavaScript, 1,000 patterns × 30 texts | ${disagree.join(' | ')} |`);
const big = `${'a'.repeat(500_000)}\n${'ab '.repeat(170_000)}`;
const hostile = '(\\w|a|ab|b)*(X|Y|Z){2}';
const t0 = performance.now();
let stopped = false;
try {
  compileLinear(hostile).matches(big, 3, { now: () => performance.now(), deadline: performance.now() + 20 });
} catch {
  stopped = true;
}
const oursStop = performance.now() - t0;
const r = re2js.compile(hostile);
const t1 = performance.now();
r(big);
const re2Full = performance.now() - t1;
console.log(
  `| stops at a 20 ms deadline inside one 1 MB text | ${stopped ? `yes, after ${oursStop.toFixed(0)} ms` : 'no'} | no deadline: the search runs to its end (${re2Full.toFixed(0)} ms) |`,
);
