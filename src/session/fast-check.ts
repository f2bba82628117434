/**
 * Plain functions compiled from a zod schema, for the values zod would accept: the event
 * schemas (events.ts) stay the one statement of the log's shapes, read once here, and an event
 * that passes skips zod's generic parse (a reopen checks 80k events, an adapter's first call
 * 10k). A value they refuse, or a schema using a construct they do not know, goes through zod
 * as before, so every error message is still zod's.
 *
 * - `check`: true only when the schema accepts the value and zod's output would equal it, keys
 *   in the same order (a stored line written from a parsed event): the value itself can be kept.
 * - `parse`: zod's output for a value the schema accepts (objects in the schema's key order,
 *   arrays and records copied, `unknown` values as they are), or FAILED.
 *
 * Mirrors zod 4's rules for the constructs the event schemas use: strict objects, records of
 * string keys, arrays (with a minimum length), string/number/boolean/literal/enum, optional,
 * nullable, unknown, and (discriminated) unions of those. Stricter where being exact would not
 * pay: an object must be a plain one (zod takes a class instance for an object schema).
 * test/session/fast-check.test.ts checks both against zod on generated values.
 */
import type { z } from 'zod';

export const FAILED: unique symbol = Symbol('failed');

export interface Compiled {
  check: (value: unknown) => boolean;
  parse: (value: unknown) => unknown;
}

interface Def {
  type: string;
  shape?: Record<string, { _zod: { def: Def } }>;
  catchall?: { _zod: { def: Def } };
  element?: { _zod: { def: Def } };
  innerType?: { _zod: { def: Def } };
  options?: Array<{ _zod: { def: Def } }>;
  discriminator?: string;
  keyType?: { _zod: { def: Def } };
  valueType?: { _zod: { def: Def } };
  values?: unknown[];
  entries?: Record<string, unknown>;
  checks?: Array<{ _zod: { def: { check: string; minimum?: number; value?: number; inclusive?: boolean; format?: string } } }>;
}

class Unsupported extends Error {}

const isPlain = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
};

const defOf = (schema: unknown): Def => (schema as { _zod: { def: Def } })._zod.def;

/** The compiled pair for `schema`, or undefined when it uses a construct this does not mirror. */
export function compileSchema(schema: z.ZodType): Compiled | undefined {
  try {
    return compile(defOf(schema));
  } catch (err) {
    if (err instanceof Unsupported) return undefined;
    throw err;
  }
}

/** A leaf: zod gives the value back as it is whenever `ok` holds. */
function leaf(ok: (v: unknown) => boolean): Compiled {
  return { check: ok, parse: (v) => (ok(v) ? v : FAILED) };
}

function compile(def: Def): Compiled {
  switch (def.type) {
    case 'unknown':
      return leaf(() => true);
    case 'string':
      return leaf(
        withChecks(
          def,
          (v) => typeof v === 'string',
          (v) => (v as string).length,
        ),
      );
    case 'number':
      return leaf(withChecks(def, (v) => typeof v === 'number' && Number.isFinite(v), undefined));
    case 'boolean':
      return leaf((v) => typeof v === 'boolean');
    case 'literal': {
      const values = def.values ?? [];
      return leaf((v) => values.includes(v));
    }
    case 'enum': {
      const values = Object.values(def.entries ?? {});
      return leaf((v) => values.includes(v));
    }
    case 'optional':
    case 'nullable': {
      const inner = compile(defOf(def.innerType));
      const empty = def.type === 'optional' ? undefined : null;
      return { check: (v) => v === empty || inner.check(v), parse: (v) => (v === empty ? v : inner.parse(v)) };
    }
    case 'array':
      return compileArray(def);
    case 'record':
      return compileRecord(def);
    case 'object':
      return compileObject(def);
    case 'union':
      return compileUnion(def);
    default:
      throw new Unsupported();
  }
}

function compileArray(def: Def): Compiled {
  const element = compile(defOf(def.element));
  const long = withChecks(
    def,
    (v) => Array.isArray(v),
    (v) => (v as unknown[]).length,
  );
  return {
    check: (v) => {
      if (!long(v)) return false;
      const a = v as unknown[];
      for (let i = 0; i < a.length; i++) if (!element.check(a[i])) return false;
      return true;
    },
    parse: (v) => {
      if (!long(v)) return FAILED;
      const a = v as unknown[];
      const out: unknown[] = [];
      for (let i = 0; i < a.length; i++) {
        const item = element.parse(a[i]);
        if (item === FAILED) return FAILED;
        out.push(item);
      }
      return out;
    },
  };
}

function compileRecord(def: Def): Compiled {
  if (defOf(def.keyType).type !== 'string' || (defOf(def.keyType).checks ?? []).length > 0) throw new Unsupported();
  const value = compile(defOf(def.valueType));
  return {
    check: (v) => {
      if (!isPlain(v)) return false;
      for (const k in v) if (Object.hasOwn(v, k) && !value.check(v[k])) return false;
      return true;
    },
    parse: (v) => {
      if (!isPlain(v)) return FAILED;
      const out: Record<string, unknown> = {};
      for (const k in v) {
        if (!Object.hasOwn(v, k)) continue;
        const item = value.parse(v[k]);
        if (item === FAILED) return FAILED;
        out[k] = item;
      }
      return out;
    },
  };
}

function compileObject(def: Def): Compiled {
  // Strict only: with another catchall, zod strips or keeps unknown keys by rules not mirrored here.
  if (!def.catchall || defOf(def.catchall).type !== 'never' || (def.checks ?? []).length > 0) throw new Unsupported();
  const fields = Object.entries(def.shape ?? {}).map(([key, s]) => ({ key, field: compile(defOf(s)), optional: defOf(s).type === 'optional' }));
  const at = new Map(fields.map((f, i) => [f.key, i]));
  return {
    check: (v) => {
      if (!isPlain(v)) return false;
      // Keys known, in the schema's order (zod's output order), each present one valid.
      let next = 0;
      for (const k in v) {
        if (!Object.hasOwn(v, k)) continue;
        const i = at.get(k);
        if (i === undefined || i < next) return false;
        for (let j = next; j < i; j++) if (!fields[j]!.optional) return false;
        if (!fields[i]!.field.check(v[k])) return false;
        next = i + 1;
      }
      for (let j = next; j < fields.length; j++) if (!fields[j]!.optional) return false;
      return true;
    },
    parse: (v) => {
      if (!isPlain(v)) return FAILED;
      for (const k in v) if (Object.hasOwn(v, k) && !at.has(k)) return FAILED;
      const out: Record<string, unknown> = {};
      for (const f of fields) {
        if (!Object.hasOwn(v, f.key)) {
          if (!f.optional) return FAILED;
          continue;
        }
        const item = f.field.parse(v[f.key]);
        if (item === FAILED) return FAILED;
        out[f.key] = item;
      }
      return out;
    },
  };
}

function compileUnion(def: Def): Compiled {
  const options = (def.options ?? []).map((o) => compile(defOf(o)));
  const key = def.discriminator;
  if (key === undefined) {
    // zod's output is the first option that accepts.
    return {
      check: (v) => {
        for (const o of options) if (o.parse(v) !== FAILED) return o.check(v);
        return false;
      },
      parse: (v) => {
        for (const o of options) {
          const out = o.parse(v);
          if (out !== FAILED) return out;
        }
        return FAILED;
      },
    };
  }
  // A discriminated union: the option whose literal the value's discriminator is.
  const byTag = new Map<unknown, Compiled>();
  for (const [i, o] of (def.options ?? []).entries()) {
    const tag = defOf(o).shape?.[key];
    if (!tag || defOf(tag).type !== 'literal') throw new Unsupported();
    for (const value of defOf(tag).values ?? []) byTag.set(value, options[i]!);
  }
  return {
    check: (v) => {
      if (!isPlain(v)) return false;
      const option = byTag.get(v[key]);
      return option !== undefined && option.check(v);
    },
    parse: (v) => {
      if (!isPlain(v)) return FAILED;
      const option = byTag.get(v[key]);
      return option === undefined ? FAILED : option.parse(v);
    },
  };
}

/** `base`, then the schema's checks (minimum lengths, safe integers, lower bounds); an unknown check is Unsupported. */
function withChecks(def: Def, base: (v: unknown) => boolean, length: ((v: unknown) => number) | undefined): (v: unknown) => boolean {
  const checks: Array<(v: unknown) => boolean> = [];
  for (const c of def.checks ?? []) {
    const d = c._zod.def;
    if (d.check === 'min_length' && length && typeof d.minimum === 'number') {
      const min = d.minimum;
      checks.push((v) => length(v) >= min);
    } else if (d.check === 'number_format' && d.format === 'safeint') {
      checks.push((v) => Number.isSafeInteger(v));
    } else if (d.check === 'greater_than' && typeof d.value === 'number') {
      const min = d.value;
      checks.push(d.inclusive ? (v) => (v as number) >= min : (v) => (v as number) > min);
    } else throw new Unsupported();
  }
  if (checks.length === 0) return base;
  return (v) => {
    if (!base(v)) return false;
    for (const c of checks) if (!c(v)) return false;
    return true;
  };
}
