/**
 * A regular-expression engine whose time is linear in the text whatever the pattern (RE2's
 * semantics: no backreferences, no lookaround), for recall patterns the model writes. The
 * pattern compiles to a Thompson NFA run as a Pike VM (every thread in step, one visit per
 * state per position, leftmost-first priority like JavaScript's engine), so `(a|aa)+X` over
 * 20,000 `a` costs 20,000 × the pattern's size, not 2^20,000. The VM counts its steps and
 * reads the clock every few thousand of them: a budget stops a search in the middle of a text,
 * not only between texts.
 *
 * Syntax: JavaScript's, case-insensitive, without the `u`, `s` or `m` flags (`.` stops at line
 * ends, `^`/`$` are the text's ends): literals and escapes (`\n`, `\t`, `\xHH`, `\uHHHH`,
 * `\cX`, `\/`…), `.`, classes `[…]`/`[^…]` with `\d\w\s` and their negations, groups `(…)`,
 * `(?:…)`, `(?<name>…)`, alternation, `* + ? {n} {n,} {n,m}` and their lazy forms, `^ $ \b \B`.
 * Refused with a message: backreferences, lookahead/lookbehind, a pattern over the size cap.
 */

/** Why a pattern cannot be compiled: `message` is for the model. */
export class PatternError extends Error {}

/** The search ran out of its time budget (the position it reached is lost). */
export class BudgetExceeded extends Error {
  constructor() {
    super('the time budget ran out');
  }
}

/** Compiled instructions beyond this are refused (a counted repetition copies its body). */
export const MAX_PROGRAM = 20_000;
/** VM steps between two clock reads. */
const STEPS_PER_CHECK = 2_048;

type Op =
  | { op: 'char'; test: (c: number) => boolean }
  | { op: 'split'; x: number; y: number }
  | { op: 'jmp'; x: number }
  | { op: 'assert'; kind: '^' | '$' | 'b' | 'B' }
  | { op: 'match' };

type Node =
  /** `lit`: the code unit it stands for, when it is one literal (case ignored). */
  | { t: 'char'; test: (c: number) => boolean; lit?: string }
  | { t: 'assert'; kind: '^' | '$' | 'b' | 'B' }
  | { t: 'cat'; items: Node[] }
  | { t: 'alt'; items: Node[] }
  | { t: 'rep'; node: Node; min: number; max: number; lazy: boolean };

// ── Case folding and the standard classes (UTF-16 code units, as JavaScript without `u`) ──
// One code unit's lower and upper case, computed on first use (-1: not yet).
const lowerOf = new Int32Array(65_536).fill(-1);
const upperOf = new Int32Array(65_536).fill(-1);
function lower(c: number): number {
  let l = lowerOf[c]!;
  if (l < 0) {
    const s = String.fromCharCode(c).toLowerCase();
    lowerOf[c] = l = s.length === 1 ? s.charCodeAt(0) : c;
  }
  return l;
}
function upper(c: number): number {
  let u = upperOf[c]!;
  if (u < 0) {
    const s = String.fromCharCode(c).toUpperCase();
    upperOf[c] = u = s.length === 1 ? s.charCodeAt(0) : c;
  }
  return u;
}

const isDigit = (c: number) => c >= 48 && c <= 57;
const isWord = (c: number) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
const isSpace = (c: number) =>
  c === 32 ||
  (c >= 9 && c <= 13) ||
  c === 0xa0 ||
  c === 0x1680 ||
  (c >= 0x2000 && c <= 0x200a) ||
  c === 0x2028 ||
  c === 0x2029 ||
  c === 0x202f ||
  c === 0x205f ||
  c === 0x3000 ||
  c === 0xfeff;
const isLineEnd = (c: number) => c === 10 || c === 13 || c === 0x2028 || c === 0x2029;

/** A code unit, ignoring case as JavaScript's `i` does: equal once upper-cased. */
function literal(code: number): (c: number) => boolean {
  const u = canonical(code);
  return (c) => canonical(c) === u;
}

/** JavaScript's case canonicalisation without `u`: upper case, unless that maps a non-ASCII unit to ASCII. */
function canonical(c: number): number {
  const u = upper(c);
  return c >= 128 && u < 128 ? c : u;
}

/** A predicate that ignores case: `c`, its lower and its upper form are all tried. */
function folded(test: (c: number) => boolean): (c: number) => boolean {
  return (c) => test(c) || test(lower(c)) || test(upper(c));
}

// ── Parsing ──
class Parser {
  private i = 0;
  constructor(private readonly s: string) {}

  parse(): Node {
    const node = this.alt();
    if (this.i < this.s.length) throw new PatternError(this.s[this.i] === ')' ? 'unmatched ")"' : `unexpected "${this.s[this.i]}" at ${this.i}`);
    return node;
  }

  private alt(): Node {
    const items = [this.cat()];
    while (this.s[this.i] === '|') {
      this.i++;
      items.push(this.cat());
    }
    return items.length === 1 ? items[0]! : { t: 'alt', items };
  }

  private cat(): Node {
    const items: Node[] = [];
    while (this.i < this.s.length && this.s[this.i] !== '|' && this.s[this.i] !== ')') items.push(this.repeat());
    return { t: 'cat', items };
  }

  private repeat(): Node {
    const start = this.i;
    const atom = this.atom();
    const q = this.quantifier();
    if (!q) return atom;
    if (atom.t === 'assert') throw new PatternError(`nothing to repeat at ${start}`);
    if (this.quantifierAhead()) throw new PatternError(`nothing to repeat at ${this.i}`);
    return { t: 'rep', node: atom, ...q };
  }

  private quantifierAhead(): boolean {
    const c = this.s[this.i];
    return c === '*' || c === '+' || c === '?' || (c === '{' && /^\{\d+(,\d*)?\}/.test(this.s.slice(this.i)));
  }

  private quantifier(): { min: number; max: number; lazy: boolean } | undefined {
    const c = this.s[this.i];
    let min: number;
    let max: number;
    if (c === '*' || c === '+' || c === '?') {
      this.i++;
      [min, max] = c === '*' ? [0, Infinity] : c === '+' ? [1, Infinity] : [0, 1];
    } else if (c === '{') {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.s.slice(this.i));
      if (!m) return undefined; // a literal "{", as JavaScript reads it
      this.i += m[0].length;
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
      if (max < min) throw new PatternError('numbers out of order in {} quantifier');
      if (min > 1_000 || (max !== Infinity && max > 1_000)) throw new PatternError('a counted repetition above 1000 is too large');
    } else return undefined;
    const lazy = this.s[this.i] === '?';
    if (lazy) this.i++;
    return { min, max, lazy };
  }

  private atom(): Node {
    const c = this.s[this.i]!;
    if (c === '(') return this.group();
    if (c === '[') return { t: 'char', test: this.cls() };
    if (c === '.') {
      this.i++;
      return { t: 'char', test: (x) => !isLineEnd(x) };
    }
    if (c === '^' || c === '$') {
      this.i++;
      return { t: 'assert', kind: c };
    }
    if (c === '*' || c === '+' || c === '?') throw new PatternError(`nothing to repeat at ${this.i}`);
    if (c === '{' && this.quantifierAhead()) throw new PatternError(`nothing to repeat at ${this.i}`);
    if (c === '\\') {
      const e = this.s[this.i + 1];
      if (e === 'b' || e === 'B') {
        this.i += 2;
        return { t: 'assert', kind: e };
      }
      const before = this.i;
      const test = this.escape(false);
      return { t: 'char', test: this.i - before === 2 && /[dDwWsS]/.test(this.s[before + 1]!) ? test : folded(test) };
    }
    this.i++;
    return { t: 'char', test: literal(c.charCodeAt(0)), lit: c };
  }

  private group(): Node {
    this.i++; // (
    if (this.s[this.i] === '?') {
      const rest = this.s.slice(this.i, this.i + 3);
      if (rest.startsWith('?:')) this.i += 2;
      else if (/^\?<[A-Za-z_$]/.test(rest)) {
        const end = this.s.indexOf('>', this.i);
        if (end < 0) throw new PatternError('unterminated group name');
        this.i = end + 1;
      } else if (/^\?(=|!|<=|<!)/.test(rest))
        throw new PatternError('lookahead and lookbehind ((?=…), (?!…), (?<=…), (?<!…)) are not supported: recall patterns run in linear time (RE2 syntax)');
      else throw new PatternError(`invalid group at ${this.i - 1}`);
    }
    const inner = this.alt();
    if (this.s[this.i] !== ')') throw new PatternError('unterminated group');
    this.i++;
    return inner;
  }

  /** A `[…]` class, case ignored; `this.i` at its "[". */
  private cls(): (c: number) => boolean {
    this.i++;
    const negate = this.s[this.i] === '^';
    if (negate) this.i++;
    const parts: Array<(c: number) => boolean> = [];
    // "]" always ends a class, even first ("[]" matches nothing, "[^]" anything), as in JavaScript.
    while (this.i < this.s.length && this.s[this.i] !== ']') {
      const lo = this.classAtom();
      if (this.s[this.i] === '-' && this.s[this.i + 1] !== undefined && this.s[this.i + 1] !== ']' && typeof lo === 'number') {
        this.i++;
        const hi = this.classAtom();
        if (typeof hi !== 'number') {
          parts.push((x) => x === lo || x === 45, hi);
          continue;
        }
        if (hi < lo) throw new PatternError('range out of order in character class');
        parts.push((x) => x >= lo && x <= hi);
      } else parts.push(typeof lo === 'number' ? (x) => x === lo : lo);
    }
    if (this.s[this.i] !== ']') throw new PatternError('unterminated character class');
    this.i++;
    // Case is ignored before a negation: [^a] refuses "A" too.
    const any = folded((x: number) => parts.some((p) => p(x)));
    return negate ? (x) => !any(x) : any;
  }

  /** One member of a class: a code unit, or a class escape (\d, \w, \s and negations). */
  private classAtom(): number | ((c: number) => boolean) {
    const c = this.s[this.i]!;
    if (c !== '\\') {
      this.i++;
      return c.charCodeAt(0);
    }
    if (this.s[this.i + 1] === 'b') {
      this.i += 2;
      return 8; // backspace, inside a class
    }
    const e = this.s[this.i + 1];
    if (e === 'd' || e === 'D' || e === 'w' || e === 'W' || e === 's' || e === 'S') return this.escape(true);
    const code = this.escapedCode();
    return code;
  }

  /** `\…` outside a class (or a class escape inside one): a predicate. */
  private escape(inClass: boolean): (c: number) => boolean {
    const e = this.s[this.i + 1];
    if (e === undefined) throw new PatternError('\\ at end of pattern');
    const named: Record<string, (c: number) => boolean> = {
      d: isDigit,
      D: (c) => !isDigit(c),
      w: isWord,
      W: (c) => !isWord(c),
      s: isSpace,
      S: (c) => !isSpace(c),
    };
    if (named[e]) {
      this.i += 2;
      return named[e];
    }
    if (!inClass && /[1-9]/.test(e)) throw new PatternError('backreferences (\\1, \\2, …) are not supported: recall patterns run in linear time (RE2 syntax)');
    if (!inClass && e === 'k' && this.s[this.i + 2] === '<')
      throw new PatternError('named backreferences (\\k<name>) are not supported: recall patterns run in linear time (RE2 syntax)');
    const code = this.escapedCode();
    return (c) => c === code;
  }

  /** A single-character escape: `this.i` at the backslash. */
  private escapedCode(): number {
    const e = this.s[this.i + 1];
    if (e === undefined) throw new PatternError('\\ at end of pattern');
    const simple: Record<string, number> = { n: 10, r: 13, t: 9, f: 12, v: 11, '0': 0 };
    if (simple[e] !== undefined && !(e === '0' && /\d/.test(this.s[this.i + 2] ?? ''))) {
      this.i += 2;
      return simple[e];
    }
    if (e === 'x') {
      const m = /^[0-9a-fA-F]{2}/.exec(this.s.slice(this.i + 2));
      if (m) {
        this.i += 4;
        return parseInt(m[0], 16);
      }
    }
    if (e === 'u') {
      const m = /^[0-9a-fA-F]{4}/.exec(this.s.slice(this.i + 2));
      if (m) {
        this.i += 6;
        return parseInt(m[0], 16);
      }
    }
    if (e === 'c' && /[A-Za-z]/.test(this.s[this.i + 2] ?? '')) {
      const code = this.s.charCodeAt(this.i + 2) % 32;
      this.i += 3;
      return code;
    }
    // Anything else escaped is itself (\. \/ \( \- …), as in JavaScript without `u`.
    this.i += 2;
    return e.charCodeAt(0);
  }
}

// ── Compiling to a program ──
function compile(node: Node): Op[] {
  const prog: Op[] = [];
  const emit = (op: Op): number => {
    if (prog.length >= MAX_PROGRAM)
      throw new PatternError(`the pattern is too large once its repetitions are spelled out (over ${MAX_PROGRAM} steps): simplify it`);
    prog.push(op);
    return prog.length - 1;
  };
  const gen = (n: Node): void => {
    switch (n.t) {
      case 'char':
        emit({ op: 'char', test: n.test });
        return;
      case 'assert':
        emit({ op: 'assert', kind: n.kind });
        return;
      case 'cat':
        for (const item of n.items) gen(item);
        return;
      case 'alt': {
        const jumps: number[] = [];
        for (let k = 0; k < n.items.length; k++) {
          if (k < n.items.length - 1) {
            const split = emit({ op: 'split', x: 0, y: 0 });
            (prog[split] as { x: number }).x = prog.length;
            gen(n.items[k]!);
            jumps.push(emit({ op: 'jmp', x: 0 }));
            (prog[split] as { y: number }).y = prog.length;
          } else gen(n.items[k]!);
        }
        for (const j of jumps) (prog[j] as { x: number }).x = prog.length;
        return;
      }
      case 'rep': {
        for (let k = 0; k < n.min; k++) gen(n.node);
        if (n.max === Infinity) {
          // L: split body, out; body; jmp L
          const split = emit({ op: 'split', x: 0, y: 0 });
          const body = prog.length;
          gen(n.node);
          emit({ op: 'jmp', x: split });
          setSplit(split, body, prog.length, n.lazy);
          return;
        }
        // Optional copies: split body, out; body; (nested so each needs the one before)
        const outs: number[] = [];
        for (let k = n.min; k < n.max; k++) {
          const split = emit({ op: 'split', x: 0, y: 0 });
          outs.push(split);
          (prog[split] as { x: number }).x = prog.length;
          gen(n.node);
        }
        for (const s of outs) setSplit(s, (prog[s] as { x: number }).x, prog.length, n.lazy);
        return;
      }
    }
  };
  const setSplit = (at: number, body: number, out: number, lazy: boolean) => {
    prog[at] = lazy ? { op: 'split', x: out, y: body } : { op: 'split', x: body, y: out };
  };
  gen(node);
  emit({ op: 'match' });
  return prog;
}

/**
 * The longest run of literal code units every match contains (lower-cased, ASCII only), or
 * '': a search can skip a text that lacks it without running the VM.
 */
function requiredLiteral(node: Node): string {
  return literalRuns(node).best;
}

/** The literal run a match starts with (lower-cased ASCII), or ''. */
function prefixLiteral(node: Node): string {
  let out = '';
  const items = node.t === 'cat' ? node.items : [node];
  for (const item of items) {
    if (item.t === 'char' && item.lit !== undefined && item.lit.charCodeAt(0) < 128) out += item.lit.toLowerCase();
    else break;
  }
  return out;
}

function literalRuns(node: Node): { best: string } {
  let best = '';
  const visit = (n: Node): void => {
    if (n.t === 'cat') {
      let run = '';
      for (const item of n.items) {
        if (item.t === 'char' && item.lit !== undefined && item.lit.charCodeAt(0) < 128) {
          run += item.lit.toLowerCase();
          if (run.length > best.length) best = run;
          continue;
        }
        run = '';
        visit(item);
      }
    } else if (n.t === 'rep' && n.min >= 1) visit(n.node);
    else if (n.t === 'char' && n.lit !== undefined && n.lit.charCodeAt(0) < 128 && best === '') best = n.lit.toLowerCase();
  };
  visit(node);
  return { best };
}

/** The clock a search reads, and when it must stop. */
export interface SearchBudget {
  now: () => number;
  deadline: number;
}

// Opcodes of the flat program.
const CHAR = 0;
const SPLIT = 1;
const JMP = 2;
const BEGIN = 3;
const END = 4;
const WORD_EDGE = 5;
const NOT_WORD_EDGE = 6;
const MATCH = 7;

export class LinearPattern {
  // The program, flat (typed arrays: the VM's loop reads nothing polymorphic).
  private readonly code: Uint8Array;
  private readonly x: Int32Array;
  private readonly y: Int32Array;
  /** Per char instruction, its answer for each ASCII code unit (pc * 128 + c); others ask `tests`. */
  private readonly ascii: Uint8Array;
  private readonly tests: Array<((c: number) => boolean) | undefined>;
  /** What a match's first code unit can be (ASCII answers, then a test), when it cannot be empty or start with an assertion. */
  private readonly first: { ascii: Uint8Array; test: (c: number) => boolean } | undefined;
  // Work space, reused: two thread lists (pcs and their starts), the closure stack, and the
  // position each pc was last added at.
  private readonly lists: [Int32Array, Int32Array, Int32Array, Int32Array];
  private readonly stack: Int32Array;
  private readonly seen: Int32Array;
  private steps = 0;

  /** A literal every match contains (lower case; '' when there is none to use). */
  readonly required: string;
  /** The literal a match starts with (lower case), or '': a search jumps between its occurrences. */
  readonly prefix: string;

  constructor(readonly source: string) {
    const tree = new Parser(source).parse();
    this.required = requiredLiteral(tree);
    this.prefix = prefixLiteral(tree);
    const prog = compile(tree);
    const m = prog.length;
    this.code = new Uint8Array(m);
    this.x = new Int32Array(m);
    this.y = new Int32Array(m);
    this.ascii = new Uint8Array(m * 128);
    this.tests = new Array(m);
    prog.forEach((op, pc) => {
      switch (op.op) {
        case 'char':
          this.code[pc] = CHAR;
          this.tests[pc] = op.test;
          for (let c = 0; c < 128; c++) this.ascii[pc * 128 + c] = op.test(c) ? 1 : 0;
          break;
        case 'split':
          this.code[pc] = SPLIT;
          this.x[pc] = op.x;
          this.y[pc] = op.y;
          break;
        case 'jmp':
          this.code[pc] = JMP;
          this.x[pc] = op.x;
          break;
        case 'assert':
          this.code[pc] = op.kind === '^' ? BEGIN : op.kind === '$' ? END : op.kind === 'b' ? WORD_EDGE : NOT_WORD_EDGE;
          break;
        case 'match':
          this.code[pc] = MATCH;
      }
    });
    this.lists = [new Int32Array(m), new Int32Array(m), new Int32Array(m), new Int32Array(m)];
    this.stack = new Int32Array(2 * m + 2);
    this.seen = new Int32Array(m);
    this.first = this.firstChars();
  }

  /** Up to `max` non-overlapping matches as [start, end); throws BudgetExceeded past the budget. */
  matches(text: string, max: number, budget: SearchBudget, lowered?: string): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    let from = 0;
    // The text in lower case, to jump to the prefix (only where lower-casing kept every position).
    let lower = this.prefix === '' ? undefined : (lowered ?? text.toLowerCase());
    if (lower !== undefined && lower.length !== text.length) lower = undefined;
    while (out.length < max && from <= text.length) {
      const m = this.search(text, from, budget, lower);
      if (!m) break;
      out.push(m);
      from = m[1] > m[0] ? m[1] : m[1] + 1;
    }
    return out;
  }

  /** The leftmost match at or after `from` (leftmost-first among those, like a backtracking engine). */
  search(text: string, from: number, budget: SearchBudget, lowered?: string): [number, number] | undefined {
    const { code, x, y, ascii, tests, seen, stack } = this;
    const n = text.length;
    let [cpc, cst, npc, nst] = this.lists;
    let cn = 0;
    let nn = 0;
    seen.fill(-1);
    let foundStart = -1;
    let foundEnd = -1;
    let steps = this.steps;
    const check = () => {
      steps = 0;
      if (budget.now() > budget.deadline) {
        this.steps = 0;
        throw new BudgetExceeded();
      }
    };
    // Follows splits, jumps and assertions from pc0 at position i into the list; the threads
    // kept are those that read a code unit or match. Returns the list's new length.
    const add = (pcs: Int32Array, sts: Int32Array, len: number, pc0: number, start: number, i: number): number => {
      let sp = 0;
      stack[sp++] = pc0;
      while (sp > 0) {
        const pc = stack[--sp]!;
        if (seen[pc] === i) continue;
        seen[pc] = i;
        if (++steps >= STEPS_PER_CHECK) check();
        switch (code[pc]) {
          case JMP:
            stack[sp++] = x[pc]!;
            break;
          case SPLIT:
            // y below x: x is followed first (it has priority).
            stack[sp++] = y[pc]!;
            stack[sp++] = x[pc]!;
            break;
          case BEGIN:
            if (i === 0) stack[sp++] = pc + 1;
            break;
          case END:
            if (i === n) stack[sp++] = pc + 1;
            break;
          case WORD_EDGE:
          case NOT_WORD_EDGE: {
            const edge = (i > 0 && isWord(text.charCodeAt(i - 1))) !== (i < n && isWord(text.charCodeAt(i)));
            if (edge === (code[pc] === WORD_EDGE)) stack[sp++] = pc + 1;
            break;
          }
          default:
            pcs[len] = pc;
            sts[len] = start;
            len++;
        }
      }
      return len;
    };
    const first = this.first;
    const prefix = lowered === undefined ? '' : this.prefix;
    for (let i = from; ; i++) {
      if (foundStart < 0) {
        if (cn === 0 && prefix !== '') {
          // Nothing alive: the next place the literal the match starts with is.
          i = lowered!.indexOf(prefix, i);
          if (i < 0) break;
        } else if (cn === 0 && first) {
          // Nothing alive: skip to where a match can start.
          for (; i < n; i++) {
            const c = text.charCodeAt(i);
            if (c < 128 ? first.ascii[c] === 1 : first.test(c)) break;
            if (++steps >= STEPS_PER_CHECK) check();
          }
          if (i >= n) break;
        }
        // A new thread, lowest priority (a pc already taken at i keeps its earlier start).
        cn = add(cpc, cst, cn, 0, i, i);
      }
      if (cn === 0) {
        // Nothing alive: done once a match was found or the text ended, else the next position.
        if (foundStart >= 0 || i >= n) break;
        continue;
      }
      const c = i < n ? text.charCodeAt(i) : -1;
      for (let k = 0; k < cn; k++) {
        const pc = cpc[k]!;
        if (++steps >= STEPS_PER_CHECK) check();
        if (code[pc] === MATCH) {
          foundStart = cst[k]!;
          foundEnd = i;
          break; // lower-priority threads lose to this match
        }
        if (c >= 0 && (c < 128 ? ascii[pc * 128 + c] === 1 : tests[pc]!(c))) nn = add(npc, nst, nn, pc + 1, cst[k]!, i + 1);
      }
      const tp = cpc;
      cpc = npc;
      npc = tp;
      const ts = cst;
      cst = nst;
      nst = ts;
      cn = nn;
      nn = 0;
      if (i >= n) break;
    }
    this.steps = steps;
    return foundStart >= 0 ? [foundStart, foundEnd] : undefined;
  }

  private firstChars(): { ascii: Uint8Array; test: (c: number) => boolean } | undefined {
    const pcs: number[] = [];
    const stack = [0];
    const visited = new Set<number>();
    while (stack.length > 0) {
      const pc = stack.pop()!;
      if (visited.has(pc)) continue;
      visited.add(pc);
      const op = this.code[pc];
      if (op === JMP) stack.push(this.x[pc]!);
      else if (op === SPLIT) stack.push(this.x[pc]!, this.y[pc]!);
      else if (op === CHAR) pcs.push(pc);
      else return undefined; // an assertion or an empty match: every position may start one
    }
    const ascii = new Uint8Array(128);
    for (let c = 0; c < 128; c++) ascii[c] = pcs.some((pc) => this.ascii[pc * 128 + c] === 1) ? 1 : 0;
    return { ascii, test: (c) => pcs.some((pc) => this.tests[pc]!(c)) };
  }
}

/** Compiles a recall pattern (case-insensitive); a PatternError says what cannot be used. */
export function compileLinear(source: string): LinearPattern {
  return new LinearPattern(source);
}
