/**
 * The storable-value rule (docs/reliability.md#the-storable-value-rule): an append whose event JSON cannot hold
 * exactly — BigInt, cycles, NaN, ±Infinity, -0, Date and other toJSON objects, functions,
 * symbols, class instances, holes, lone surrogates, U+0000 — is a typed SessionRuleError
 * (`not-storable`) thrown before anything is committed: the log in memory and on disk is
 * unchanged, and later appends are stored at the right seq.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { JsonlStore, MemoryStore, Session, SessionRuleError, SessionWriter, XcompactError, createCompactionEngine, importPiFile } from '../../src/index';
import { expectRule, removeTempDirs, tempDir, user } from '../helpers/session';

afterAll(removeTempDirs);

const cyclic = (): Record<string, unknown> => {
  const o: Record<string, unknown> = { a: 1 };
  o.self = o;
  return o;
};

class Point {
  constructor(readonly x: number) {}
}

/** Values JSON cannot hold as they are, each placed inside a block's providerOptions. */
const NOT_STORABLE: Array<[string, () => unknown]> = [
  ['a BigInt', () => 1n],
  ['a cycle', cyclic],
  ['NaN', () => NaN],
  ['Infinity', () => Infinity],
  ['-Infinity', () => -Infinity],
  ['-0', () => -0],
  ['a Date', () => new Date(0)],
  ['a function', () => () => 1],
  ['a symbol', () => Symbol('s')],
  ['an object with toJSON', () => ({ toJSON: () => 'x' })],
  ['a class instance', () => new Point(1)],
  ['a Map', () => new Map([[1, 2]])],
  ['an array with a hole', () => [1, , 3]],
  ['undefined in an array', () => [1, undefined]],
  ['a lone high surrogate', () => 'a\ud800b'],
  ['a lone low surrogate', () => '\udc00'],
  ['U+0000', () => 'a\u0000b'],
];

function withOption(value: unknown) {
  return {
    type: 'user/message' as const,
    data: { content: [{ type: 'text' as const, text: 'hi', providerOptions: { p: { v: value } as Record<string, unknown> } }] },
    surfaceOp: 'append' as const,
  };
}

describe('append refuses values JSON does not keep exactly', () => {
  for (const [what, make] of NOT_STORABLE) {
    it(`${what} in providerOptions is not-storable, nothing committed`, () => {
      const s = Session.inMemory();
      s.append(user('first'));
      const before = JSON.stringify(s.events());
      const err = expectRule(() => s.append(withOption(make())), 'not-storable');
      expect(err.message).toContain('user/message data.content[0].providerOptions.p.v');
      expect(JSON.stringify(s.events())).toBe(before);
      expect(s.length).toBe(1);
      expect(s.check(withOption(make()))?.rule).toBe('not-storable');
    });
  }

  it('a lone surrogate or U+0000 in message text or in an object key is refused too (PostgreSQL jsonb cannot hold it)', () => {
    const s = Session.inMemory();
    expectRule(() => s.append(user('broken \ud83d')), 'not-storable');
    expectRule(() => s.append(user('nul \u0000')), 'not-storable');
    expectRule(() => s.append(withOption({ ['k\u0000']: 1 })), 'not-storable');
    expect(s.length).toBe(0);
    // A well-formed pair is fine.
    s.append(user('emoji \ud83d\ude00'));
    expect(s.length).toBe(1);
  });

  it('tool definitions: Dates and undefined keep their JSON form (what the SDK sends); BigInt and U+0000 are refused', () => {
    const s = Session.inMemory();
    const header = (tools: Record<string, unknown>[]) => ({ type: 'request/header' as const, data: { provider: 'p', model: 'm', tools } });
    expectRule(() => s.append(header([{ n: 1n }])), 'not-storable');
    expectRule(() => s.append(header([{ name: 'a\u0000' }])), 'not-storable');
    expect(s.length).toBe(0);
    const e = s.append(header([{ at: new Date(0), gone: undefined }]));
    expect(e.data.tools).toEqual([{ at: '1970-01-01T00:00:00.000Z' }]);
  });

  it('undefined object values are dropped in memory as JSON drops them, so memory and the store agree', () => {
    const s = Session.inMemory();
    const e = s.append(withOption({ keep: 1, drop: undefined }));
    const po = (e.data.content[0] as unknown as { providerOptions: { p: Record<string, unknown> } }).providerOptions.p;
    expect(Object.keys(po.v as object)).toEqual(['keep']);
  });

  it('the defect of the issue: a BigInt append on JSONL leaves the acknowledged log openable, later appends at the right seq', async () => {
    const dir = tempDir();
    const store = new JsonlStore(dir);
    const s = await Session.open(store, 'big');
    const w = new SessionWriter(s);
    w.startTurn();
    await s.flush();
    const bytes = await readFile(join(dir, 'big.jsonl'));
    expectRule(() => s.append(withOption(1n)), 'not-storable');
    await s.flush();
    expect(await readFile(join(dir, 'big.jsonl'))).toEqual(bytes);
    w.user('after');
    w.endTurn();
    await s.flush();
    const held = JSON.stringify(s.events());
    await s.close();
    const r = await Session.open(store, 'big');
    expect(JSON.stringify(r.events())).toBe(held);
    await r.close();
  });
});

describe('bad input to the public entry points is typed', () => {
  it('append(null), append(42) and check(null) are SessionRuleErrors, nothing committed', () => {
    const s = Session.inMemory();
    expectRule(() => s.append(null as never), 'invalid-input');
    expectRule(() => s.append(42 as never), 'invalid-input');
    expect(s.check(null as never)?.rule).toBe('invalid-input');
    expect(s.length).toBe(0);
  });

  it('assistantFromCompletion(null) and a string tool_calls are typed, nothing committed', () => {
    const s = Session.inMemory();
    const w = new SessionWriter(s);
    expectRule(() => w.assistantFromCompletion(null as never), 'invalid-input');
    expectRule(() => w.assistantFromCompletion({ content: 'x', tool_calls: 'abc' as never }), 'invalid-input');
    expectRule(() => w.assistantFromCompletion({ content: 'x', tool_calls: [null] as never }), 'invalid-input');
    expect(s.length).toBe(0);
    // An SDK-shaped reply still records.
    w.assistantFromCompletion({ content: 'ok', tool_calls: null });
    expect(s.length).toBe(1);
  });

  it('importPiFile on a missing path or a directory is an import error naming the path; nothing appended', async () => {
    const dir = tempDir();
    const s = Session.inMemory();
    for (const path of [join(dir, 'missing.jsonl'), dir]) {
      const err = await importPiFile(s, path).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(XcompactError);
      expect((err as XcompactError).code).toBe('import');
      expect((err as Error).message).toContain(path);
    }
    expect(s.length).toBe(0);
  });

  it('the writer, the stores and the engine answer null or missing arguments typed', async () => {
    const s = Session.inMemory();
    const w = new SessionWriter(s);
    expectRule(() => w.request(null as never), 'invalid-input');
    expectRule(() => w.assistant(null as never), 'invalid-input');
    expect(s.length).toBe(0);
    const codeOf = async (f: () => unknown) => {
      try {
        await f();
        return 'no error';
      } catch (err) {
        return err instanceof XcompactError ? err.code : `raw ${String(err)}`;
      }
    };
    expect(await codeOf(() => Session.open(new MemoryStore(), null as never))).toBe('invalid-session-id');
    expect(await codeOf(() => new JsonlStore(undefined as never))).toBe('config');
    expect(await codeOf(() => createCompactionEngine(null as never))).toBe('config');
    expect(await codeOf(() => createCompactionEngine({ session: null } as never))).toBe('config');
    // null options are no options.
    const engine = createCompactionEngine({ session: Session.inMemory('e'), models: {} });
    expect((await engine.afterStep(null as never)).status).toBe('skipped');
    engine.stop();
  });

  it('errors are XcompactErrors with a code', () => {
    const s = Session.inMemory();
    try {
      s.append(withOption(1n));
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(XcompactError);
      expect(err).toBeInstanceOf(SessionRuleError);
      expect((err as XcompactError).code).toBe('session-rule');
    }
  });
});
