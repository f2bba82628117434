/**
 * The calibration fit runs at every clean report (a reopened log of 15k steps refits 15k
 * times), so it is written for speed: flat arrays, zero features skipped. These check that it
 * is still exactly the plain formulation (docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have: a fold of the log gives the same figures,
 * bit for bit, however it is computed).
 */
import { describe, expect, it } from 'vitest';
import { CALIBRATION, fit } from '../../../src/services/metering/calibration';

const SEED = [1, 0, 0, 0, 0];
const RIDGE_RATIO = 1e-2;
const RIDGE_PER_NODE = 1e-3;
const RESIDUAL_FLOOR = 0.02;

interface Sample {
  actual: number;
  x: number[];
}

/** The fit as the reweighted least squares reads on paper (calibration.ts's comment). */
function plainFit(samples: Sample[]): number[] {
  const base = samples.map((s) => 1 / Math.max(Math.abs(s.actual), 1));
  let weights = base;
  let model = SEED;
  for (let round = 0; round < CALIBRATION.rounds; round++) {
    model = plainSolve(samples, weights, undefined);
    const clamped = Math.min(CALIBRATION.maxRatio, Math.max(CALIBRATION.minRatio, model[0]!));
    if (clamped !== model[0]) model = plainSolve(samples, weights, clamped);
    for (let k = 1; k < model.length; k++) model[k] = Math.min(CALIBRATION.maxPerNode, Math.max(CALIBRATION.minPerNode, model[k]!));
    const m = model;
    weights = samples.map((s, i) => base[i]! / Math.sqrt(Math.max(Math.abs(s.x.reduce((y, v, k) => y + m[k]! * v, 0) - s.actual) * base[i]!, RESIDUAL_FLOOR)));
  }
  return model;
}

function plainSolve(samples: Sample[], weights: number[], ratio: number | undefined): number[] {
  const free = ratio === undefined ? 0 : 1;
  const size = SEED.length - free;
  const a = Array.from({ length: size }, () => new Array<number>(size).fill(0));
  const b = new Array<number>(size).fill(0);
  samples.forEach((s, i) => {
    const w2 = weights[i]! * weights[i]!;
    const target = ratio === undefined ? s.actual : s.actual - ratio * s.x[0]!;
    for (let r = 0; r < size; r++) {
      b[r]! += w2 * s.x[r + free]! * target;
      for (let c = 0; c < size; c++) a[r]![c]! += w2 * s.x[r + free]! * s.x[c + free]!;
    }
  });
  for (let r = 0; r < size; r++) {
    const ridge = r + free === 0 ? RIDGE_RATIO : RIDGE_PER_NODE;
    a[r]![r]! += ridge;
    b[r]! += ridge * SEED[r + free]!;
  }
  for (let col = 0; col < size; col++) {
    let pivot = col;
    for (let r = col + 1; r < size; r++) if (Math.abs(a[r]![col]!) > Math.abs(a[pivot]![col]!)) pivot = r;
    [a[col], a[pivot]] = [a[pivot]!, a[col]!];
    [b[col], b[pivot]] = [b[pivot]!, b[col]!];
    for (let r = col + 1; r < size; r++) {
      const f = a[r]![col]! / a[col]![col]!;
      if (f === 0) continue;
      for (let c = col; c < size; c++) a[r]![c]! -= f * a[col]![c]!;
      b[r]! -= f * b[col]!;
    }
  }
  const x = new Array<number>(size).fill(0);
  for (let r = size - 1; r >= 0; r--) {
    let s = b[r]!;
    for (let c = r + 1; c < size; c++) s -= a[r]![c]! * x[c]!;
    x[r] = s / a[r]![r]!;
  }
  return ratio === undefined ? x : [ratio, ...x];
}

/** Steps like an agent's: a priced growth, mostly one assistant message and one tool result, sometimes an error or a user turn. */
function samples(seed: number, n: number, ratio: number): Sample[] {
  let state = seed;
  const rnd = () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
  return Array.from({ length: n }, () => {
    const x = [1 + Math.floor(rnd() * 4000), rnd() < 0.15 ? 1 : 0, 1, rnd() < 0.8 ? 1 + Math.floor(rnd() * 3) : 0, rnd() < 0.1 ? 1 : 0];
    const noise = (rnd() - 0.5) * 120 + (rnd() < 0.04 ? 3000 : 0);
    return { actual: Math.round(ratio * x[0]! + 7 * x[2]! + noise), x };
  });
}

describe('the calibration fit', () => {
  it('gives the plain formulation’s figures bit for bit, clamped ratios and per-node constants included', () => {
    let compared = 0;
    for (const ratio of [0.3, 0.9, 1.17, 1.6, 3.2]) {
      for (const n of [4, 9, 64, CALIBRATION.window]) {
        const s = samples(Math.round(ratio * 1000) + n, n, ratio);
        const ours = fit(s);
        const plain = plainFit(s);
        expect(ours.map((v) => v.toString())).toEqual(plain.map((v) => v.toString()));
        compared++;
      }
    }
    expect(compared).toBe(20);
  });

  it('is not the seed: the samples move every coefficient', () => {
    const m = fit(samples(5, CALIBRATION.window, 1.3));
    expect(m[0]).toBeGreaterThan(1.2);
    expect(m[0]).toBeLessThan(1.4);
    expect(m[2]).not.toBe(0);
  });
});
