/**
 * The storable-value rule: an event is committed only if every store can keep it exactly, so
 * the event held in memory is the event every reopen reads back (docs/reliability.md).
 *
 * Storable is plain JSON that survives a JSON round trip unchanged *and* that PostgreSQL's
 * jsonb accepts: null, booleans, finite numbers other than -0, well-formed strings without
 * U+0000 (keys too), arrays without holes, and plain objects (prototype Object or null)
 * nested at most MAX_DEPTH deep. An object key whose value is `undefined` is dropped, as
 * JSON drops it (the caller's object is left alone: a copy is returned). Anything else — a
 * BigInt, a cycle, NaN, ±Infinity, -0, a Date or any object with `toJSON`, a function, a
 * symbol, a class instance (Map, Buffer …), a hole or `undefined` in an array, a lone
 * surrogate, U+0000 — is a `not-storable` SessionRuleError naming the path.
 */
import { SessionRuleError } from './errors';

/** Deeper than this is refused: JSON parsers (PostgreSQL's among them) give up on deep nesting. */
export const MAX_DEPTH = 512;

/** A lone surrogate (either half without its partner) or U+0000. */
const BAD_TEXT = /[\u0000\ud800-\udfff]/;
const LONE_OR_NUL = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function badText(s: string): string | undefined {
  if (!BAD_TEXT.test(s)) return undefined; // the fast path: almost every string
  const m = LONE_OR_NUL.exec(s);
  if (!m) return undefined;
  const c = m[0].charCodeAt(0);
  return c === 0
    ? `U+0000 at index ${m.index} (PostgreSQL cannot store it; replace it, e.g. with U+FFFD)`
    : `a lone surrogate U+${c.toString(16).toUpperCase()} at index ${m.index} (not valid Unicode: JSON stores it as an escape PostgreSQL refuses; replace it, e.g. with U+FFFD)`;
}

function pathOf(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${parent}.${key}` : `${parent}[${JSON.stringify(key)}]`;
}

function refuse(path: string, what: string): never {
  throw new SessionRuleError('not-storable', `${path} is ${what}: an event must be plain JSON that every store keeps exactly.`);
}

function describe(v: unknown): string {
  if (typeof v === 'bigint') return 'a BigInt (store it as a string or a number)';
  if (typeof v === 'function') return 'a function';
  if (typeof v === 'symbol') return 'a symbol';
  if (typeof v === 'undefined') return 'undefined (JSON turns it into null in an array)';
  if (typeof v === 'number') {
    if (Number.isNaN(v)) return 'NaN (JSON stores null)';
    if (!Number.isFinite(v)) return `${v} (JSON stores null)`;
    return '-0 (JSON stores 0)';
  }
  return typeof v;
}

/**
 * Checks `value` against the storable rule; returns it (or, when an `undefined` object value
 * had to be dropped, a copy without it). Throws `not-storable` naming `path`.
 */
export function storable<T>(value: T, path: string): T {
  return walk(value, path, [], 0) as T;
}

function walk(v: unknown, path: string, ancestors: object[], depth: number): unknown {
  switch (typeof v) {
    case 'string': {
      const bad = badText(v);
      if (bad) refuse(path, `a string with ${bad}`);
      return v;
    }
    case 'boolean':
      return v;
    case 'number':
      if (!Number.isFinite(v) || Object.is(v, -0)) refuse(path, describe(v));
      return v;
    case 'object':
      if (v === null) return v;
      break;
    default:
      refuse(path, describe(v));
  }
  const o = v as object;
  if (depth >= MAX_DEPTH) refuse(path, `nested deeper than ${MAX_DEPTH} levels`);
  if (ancestors.includes(o)) refuse(path, 'a cycle (an object that contains itself)');
  if (typeof (o as { toJSON?: unknown }).toJSON === 'function') {
    refuse(path, `${o instanceof Date ? 'a Date' : 'an object with toJSON'} (JSON stores what toJSON returns: store that instead)`);
  }
  ancestors.push(o);
  try {
    if (Array.isArray(o)) return walkArray(o, path, ancestors, depth);
    const proto = Object.getPrototypeOf(o) as unknown;
    if (proto !== Object.prototype && proto !== null) {
      const name = (o.constructor as { name?: unknown } | undefined)?.name;
      refuse(path, `an instance of ${typeof name === 'string' && name ? name : 'a class'} (JSON keeps only its own enumerable fields, if any)`);
    }
    if (Object.getOwnPropertySymbols(o).length > 0) refuse(path, 'an object with symbol keys (JSON drops them)');
    const rec = o as Record<string, unknown>;
    let copy: Record<string, unknown> | undefined;
    for (const k of Object.keys(rec)) {
      const bad = badText(k);
      if (bad) refuse(pathOf(path, k), `a key with ${bad}`);
      const item = rec[k];
      if (item === undefined) {
        copy ??= { ...rec };
        delete copy[k];
        continue;
      }
      const out = walk(item, pathOf(path, k), ancestors, depth + 1);
      if (out !== item) (copy ??= { ...rec })[k] = out;
    }
    return copy ?? o;
  } finally {
    ancestors.pop();
  }
}

function walkArray(a: unknown[], path: string, ancestors: object[], depth: number): unknown[] {
  let copy: unknown[] | undefined;
  for (let i = 0; i < a.length; i++) {
    if (!(i in a)) refuse(pathOf(path, i), 'a hole (JSON stores null)');
    const item = a[i];
    const out = walk(item, pathOf(path, i), ancestors, depth + 1);
    if (out !== item) (copy ??= [...a])[i] = out;
  }
  if (Object.keys(a).length !== a.length) refuse(path, 'an array with extra properties (JSON drops them)');
  return copy ?? a;
}
