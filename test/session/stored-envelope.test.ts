/**
 * parseStoredLine checks the common envelope by hand (a reopen reads one per event): it must
 * accept exactly what StoredEventSchema accepts, with the same value, and refuse the rest with
 * the schema's own error.
 */
import { describe, expect, it } from 'vitest';
import { StoredEventSchema } from '../../src/session/events';
import { parseStoredLine } from '../../src/session/validate';

const base = { seq: 3, type: 'user/message', time: '2026-01-01T00:00:00.000Z', data: { content: [{ type: 'text', text: 'hi' }] }, surfaceOp: 'append' };

const cases: unknown[] = [
  base,
  { ...base, surfaceOp: undefined },
  { seq: 3, type: 'turn/start', time: 't', data: { turn: 1 } },
  { seq: 3, type: 'turn/start', time: 't' },
  { ...base, surfaceOp: { op: 'replace', start: 1, end: 2 }, sourceEventSeqs: [1, 2] },
  { ...base, extra: 1 },
  { ...base, seq: -1 },
  { ...base, seq: 1.5 },
  { ...base, seq: 2 ** 53 },
  { ...base, seq: '3' },
  { ...base, type: 'toString' },
  { ...base, type: 'nope/event' },
  { ...base, time: '' },
  { ...base, time: 5 },
  { ...base, surfaceOp: 'prepend' },
  { ...base, sourceEventSeqs: [-1] },
  JSON.parse('{"seq":3,"type":"user/message","time":"t","__proto__":{"x":1}}'),
  [],
  null,
  'line',
  Object.assign(Object.create({ inherited: true }), base),
];

describe('parseStoredLine', () => {
  it.each(cases.map((c, i) => [i, c]))('case %i: the same verdict and value as StoredEventSchema', (_i, value) => {
    const expected = StoredEventSchema.safeParse(value);
    let got: unknown;
    let error: unknown;
    try {
      got = parseStoredLine(value, 3);
    } catch (err) {
      error = err;
    }
    if (expected.success) {
      expect(error).toBeUndefined();
      expect(got).toEqual(expected.data);
    } else {
      expect((error as { rule?: string }).rule).toBe('stored-shape');
    }
  });
});
