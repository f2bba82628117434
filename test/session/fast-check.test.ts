/**
 * The event schemas' compiled functions (src/session/fast-check.ts) against zod itself: on
 * every type's valid data and on random mutations of it (keys dropped, added, reordered,
 * values replaced by any JSON), whatever `check` keeps and whatever `parse` returns is exactly
 * what zod's parse gives back, keys in the same order; and on valid data they do apply (or the
 * session would silently be back to zod's speed).
 */
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EVENT_TYPES, EventDataSchemas, type EventType } from '../../src/session/index';
import { compileSchema, FAILED } from '../../src/session/fast-check';

const SAMPLES: Record<EventType, unknown[]> = {
  'turn/start': [{ turn: 0 }, { turn: 7 }],
  'turn/end': [{ turn: 0 }, { turn: 3, reason: 'aborted' }],
  'step/start': [{ turn: 0, step: 0 }],
  'step/end': [{ turn: 0, step: 2, reason: 'completed' }],
  'system/message': [{ text: 'You are a coding agent.' }, { text: '' }],
  'user/message': [
    { content: [{ type: 'text', text: 'fix it' }] },
    {
      content: [
        { type: 'text', text: 'look' },
        { type: 'image', url: 'data:image/png;base64,AAAA', detail: 'low' },
      ],
      source: 'compaction-checkpoint',
    },
  ],
  'assistant/message': [
    { content: [{ type: 'text', text: 'done' }] },
    {
      content: [
        { type: 'reasoning', text: 'think', providerOptions: { anthropic: { signature: 'x' } } },
        { type: 'tool-call', id: 'c1', name: 'read', arguments: '{"path":"a.ts"}' },
      ],
      provider: 'openai',
      model: 'gpt-4o',
      usage: { promptTokens: 1200, completionTokens: 30, cachedTokens: 1000 },
      finishReason: 'tool_calls',
    },
    { content: [] },
  ],
  'tool/result': [
    { callId: 'c1', toolName: 'read', content: [{ type: 'text', text: 'export const a = 1;' }] },
    { callId: 'c2', content: [], isError: true, providerOptions: { google: { thoughtSignature: 'y' } } },
  ],
  'request/header': [
    { provider: 'openai', model: 'gpt-4o', tools: [{ type: 'function', function: { name: 'read', parameters: { type: 'object' } } }], maxTokens: 1024 },
    { provider: 'local', model: 'm', tools: [], contextWindow: 4096 },
  ],
  'session/end-seed': [{}, { reason: 'recover' }],
  'compaction/start': [
    { turn: null, trigger: 'manual' },
    { turn: 2, trigger: 'pressure', background: true },
  ],
  'compaction/summary': [
    { summary: 'S', range: { start: 4, end: 9 }, shadowedSeqs: [4, 5, 9], shadowedTokens: 120, truncation: { reason: 'breaker-open' }, redacted: 2 },
  ],
  'compaction/prune': [{ targetSeq: 6, callId: 'c1', tokensBefore: 900, tokensAfter: 40, charsBefore: 3600, charsAfter: 160 }],
  'compaction/end': [{ turn: 1 }, { turn: null, error: { code: 'summary', message: 'failed' } }],
};

/** Equal as values and in every object's key order (what the session's JSON would show). */
function same(a: unknown, b: unknown): boolean {
  if (!isDeepStrictEqual(a, b)) return false;
  if (typeof a !== 'object' || a === null) return true;
  if (Array.isArray(a)) return (a as unknown[]).every((x, i) => same(x, (b as unknown[])[i]));
  const ka = Object.keys(a);
  const kb = Object.keys(b as object);
  return ka.join('\u0000') === kb.join('\u0000') && ka.every((k) => same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/** Any JSON, and the numbers and strings at the schemas' edges (what a live append may pass). */
const json = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom<unknown>(NaN, Infinity, -0, 2 ** 53, 1.5, -1, 0, '', undefined, null));

/** A random edit somewhere in `value`: a key dropped, added or moved last, a value replaced. */
function mutate(value: unknown, picks: number[], replacement: unknown): unknown {
  if (typeof value !== 'object' || value === null) return replacement;
  const [p = 0, ...rest] = picks;
  if (Array.isArray(value)) {
    if (value.length === 0 || p % 5 === 0) return [...value, replacement];
    const i = p % value.length;
    return value.map((x, j) => (j === i ? mutate(x, rest, replacement) : x));
  }
  const keys = Object.keys(value);
  const o = value as Record<string, unknown>;
  const k = keys[p % Math.max(keys.length, 1)];
  switch (p % 4) {
    case 0: {
      const { [k ?? '']: _, ...without } = o;
      return without;
    }
    case 1:
      return { ...o, [k === undefined ? 'extra' : `${k}x`]: replacement };
    case 2:
      return k === undefined ? o : { ...Object.fromEntries(keys.filter((x) => x !== k).map((x) => [x, o[x]])), [k]: o[k] };
    default:
      return k === undefined ? replacement : { ...o, [k]: mutate(o[k], rest, replacement) };
  }
}

describe.each(EVENT_TYPES)('%s', (type) => {
  const schema = EventDataSchemas[type];
  const compiled = compileSchema(schema);

  it('compiles, and applies to valid data', () => {
    expect(compiled).toBeDefined();
    for (const v of SAMPLES[type]) {
      expect(schema.safeParse(v).success, JSON.stringify(v)).toBe(true);
      expect(compiled!.check(v), JSON.stringify(v)).toBe(true);
      expect(same(compiled!.parse(v), schema.parse(v))).toBe(true);
    }
  });

  it('keeps or gives back only what zod gives back', () => {
    fc.assert(
      fc.property(
        fc.nat(SAMPLES[type].length - 1),
        fc.array(fc.nat(99), { minLength: 1, maxLength: 4 }),
        json,
        fc.boolean(),
        (at, picks, replacement, deeper) => {
          let value = mutate(SAMPLES[type][at], picks, replacement);
          if (deeper)
            value = mutate(
              value,
              picks.map((p) => p + 1),
              replacement,
            );
          const z = schema.safeParse(value);
          const out = compiled!.parse(value);
          if (out !== FAILED) {
            expect(z.success).toBe(true);
            expect(same(out, z.data), JSON.stringify(value)).toBe(true);
          }
          if (compiled!.check(value)) {
            expect(z.success).toBe(true);
            expect(same(value, z.data), JSON.stringify(value)).toBe(true);
          }
          // Refusing what zod accepts only costs speed; accepting what zod refuses would break the log.
          if (!z.success) expect(out).toBe(FAILED);
        },
      ),
      { numRuns: 300 },
    );
  });
});

it('the parse is a copy: the caller keeps its own objects', () => {
  const data = SAMPLES['assistant/message'][1] as { content: object[]; usage: object };
  const out = compileSchema(EventDataSchemas['assistant/message'])!.parse(data) as typeof data;
  expect(out).not.toBe(data);
  expect(out.content).not.toBe(data.content);
  expect(out.content[0]).not.toBe(data.content[0]);
  expect(out.usage).not.toBe(data.usage);
});
