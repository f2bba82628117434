/**
 * Fuzzing `append` with arbitrary JSON-ish values (docs/reliability.md#the-storable-value-rule): BigInt, cycles,
 * NaN, ±Infinity, -0, Dates, functions, symbols, toJSON objects, class instances, holes, lone
 * surrogates, U+0000, huge strings and deep nesting, in providerOptions, in text and in keys.
 * On both durable stores, every call either commits an event that reopens equal to the one
 * held in memory, or throws a typed XcompactError and leaves the stored log byte-identical.
 * (PostgreSQL's jsonb keeps object keys in its own order, so reopened events are compared
 * with keys sorted there; JSONL reopens byte for byte.)
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { XcompactError } from '../../src/errors';
import { JsonlStore, Session, type SessionStore } from '../../src/session/index';
import type { AppendInput } from '../../src/session/events';
import { closePgStores, pgStore, pgUrl } from '../helpers/pg';
import { removeTempDirs, tempDir } from '../helpers/session';

afterAll(async () => {
  removeTempDirs();
  await closePgStores();
});

class Opaque {
  constructor(readonly n: number) {}
}

const awkwardText = fc.constantFrom('\ud800', '\udfff', 'a\udc00b', '\u0000', '\ud83d\ude00', '\u2028', '"\\', '\ufffd', '');
const text = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: 'binary', maxLength: 12 }) },
  { weight: 2, arbitrary: fc.tuple(fc.string({ maxLength: 4 }), awkwardText, fc.string({ maxLength: 4 })).map((p) => p.join('')) },
  { weight: 1, arbitrary: fc.constantFrom('x'.repeat(300_000), 'é😀'.repeat(50_000)) },
);

const leaf = fc.oneof(
  { weight: 6, arbitrary: fc.oneof(fc.boolean(), fc.constant(null), fc.integer(), fc.double(), text) },
  {
    weight: 3,
    arbitrary: fc
      .constantFrom<() => unknown>(
        () => 1n,
        () => NaN,
        () => Infinity,
        () => -Infinity,
        () => -0,
        () => new Date(0),
        () => () => 1,
        () => Symbol('s'),
        () => ({ toJSON: () => 1 }),
        () => new Opaque(1),
        () => new Map(),
        () => undefined,
        () => [1, , 2],
        () => Object.create(null) as object,
      )
      .map((make) => ({ make })),
  },
);

/** A JSON-ish tree; `{make}` leaves are built fresh per use (values fast-check cannot clone). */
const tree = fc.letrec<{ node: unknown }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.array(tie('node'), { maxLength: 4 }),
    fc.dictionary(text, tie('node'), { maxKeys: 4 }),
  ),
})).node;

interface Shape {
  value: unknown;
  /** Nest the value this deep (crossing the storable rule's limit of 512). */
  depth: number;
  /** Make the value's container hold itself. */
  cycle: boolean;
  text: string;
}

function materialise(v: unknown): unknown {
  if (v !== null && typeof v === 'object' && 'make' in v && typeof v.make === 'function' && Object.keys(v).length === 1) {
    return (v as { make: () => unknown }).make();
  }
  if (Array.isArray(v)) return v.map(materialise);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, materialise(x)]));
  return v;
}

function inputOf(shape: Shape): AppendInput {
  let value = materialise(shape.value);
  for (let i = 0; i < shape.depth; i++) value = [value];
  const holder: Record<string, unknown> = { v: value };
  if (shape.cycle) holder.self = holder;
  return {
    type: 'user/message',
    data: { content: [{ type: 'text', text: shape.text, providerOptions: { fuzz: holder } }] },
    surfaceOp: 'append',
  };
}

const shapes = fc.array(
  fc.record({
    value: tree,
    depth: fc.oneof({ weight: 5, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.constantFrom(100, 509, 510, 511, 600, 5_000) }),
    cycle: fc.boolean().map((b) => b && Math.random() < 0.2),
    text,
  }),
  { minLength: 1, maxLength: 6 },
);

/** Object keys sorted, recursively: jsonb's key order is its own. */
function sortedKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortedKeys);
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortedKeys((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}

interface Backend {
  store: () => SessionStore;
  raw: (store: SessionStore, id: string) => Promise<string>;
  canonical: (events: readonly unknown[]) => string;
  runs: number;
}

const backends: Array<[string, Backend]> = [
  [
    'JsonlStore',
    {
      store: () => new JsonlStore(tempDir(), { sync: false }),
      raw: async (store, id) => {
        try {
          return readFileSync((store as JsonlStore).pathOf(id), 'latin1');
        } catch {
          return '';
        }
      },
      canonical: (events) => JSON.stringify(events),
      runs: 60,
    },
  ],
  [
    'PostgresStore',
    {
      store: () => pgStore(),
      raw: async (store, id) => {
        const schema = (store as unknown as { names: { schema: string } }).names.schema;
        const c = new pg.Client({ connectionString: pgUrl() });
        await c.connect();
        try {
          const r = await c.query(`SELECT seq, event::text AS e FROM ${schema}.events WHERE session_id = $1 ORDER BY seq`, [id]).catch(() => ({ rows: [] }));
          return (r.rows as { seq: number; e: string }[]).map((x) => `${x.seq} ${x.e}`).join('\n');
        } finally {
          await c.end();
        }
      },
      canonical: (events) => JSON.stringify(sortedKeys(events)),
      runs: 12,
    },
  ],
];

describe.each(backends)('append fuzz on %s', (_name, backend) => {
  it('every append commits an event that reopens equal, or throws typed and leaves the stored log byte-identical', async () => {
    let n = 0;
    let committed = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(shapes, async (batch) => {
        const store = backend.store();
        const id = `fuzz-${n++}`;
        let s = await Session.open(store, id);
        try {
          s.append({ type: 'user/message', data: { content: [{ type: 'text', text: 'start' }] }, surfaceOp: 'append' });
          await s.flush();
          for (const shape of batch) {
            await s.flush();
            const before = await backend.raw(store, id);
            const length = s.length;
            let input: AppendInput;
            try {
              input = inputOf(shape);
            } catch {
              continue; // a nesting too deep for this test's own builder
            }
            try {
              s.append(input);
              committed++;
            } catch (err) {
              refused++;
              expect(err, String(err)).toBeInstanceOf(XcompactError);
              expect(s.length).toBe(length);
              await s.flush();
              expect(await backend.raw(store, id)).toBe(before);
            }
          }
          await s.flush();
          const held = backend.canonical(s.events());
          await s.close();
          s = await Session.open(store, id);
          expect(backend.canonical(s.events())).toBe(held);
        } finally {
          await s.close();
        }
      }),
      { numRuns: backend.runs },
    );
    // The generators reach both outcomes.
    expect(committed).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  });
});
