/**
 * Online calibration (docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have): what the provider counts for what we price, per route
 * (provider/model). Between two provider reports the surface grows by nodes we price with our
 * tokenizer; for a provider with another tokenizer (Claude, Gemini, Qwen …) that growth is off.
 *
 * A ratio alone cannot model it. Each message also carries framing the provider counts its own
 * way (role markers, a tool result's wrapper, an error flag), a constant per message that is
 * 20–50% of a step adding a short tool result. So each clean step is one sample
 *   provider growth ≈ ratio × priced growth + Σ perNode[kind] × (nodes of that kind appended)
 * where the provider's growth is this report's prompt minus the previous report's prompt and
 * completion (the reply is counted by the provider itself), and priced growth is our price of
 * everything appended in between (our own framing included, so the seed ratio 1, perNode 0 is
 * exactly the uncalibrated meter).
 *
 * The fit is a least-absolute-relative-error regression over the route's last `window` samples
 * (iteratively reweighted least squares, a fixed number of rounds), pulled gently toward the
 * seed so that a kind seen in few samples keeps a small constant, and clamped to sane ranges.
 * Relative error, because that is what a step's prediction is judged on; absolute values,
 * because a few steps the log cannot explain (a provider's hidden system-prompt change, a
 * dropped reasoning block) must not drag the fit. The window is long (128 steps) so that a rare
 * kind (an error result, a user message) stays in view.
 *
 * The meter feeds it from the log only (usage, node prices and node kinds), so replaying or
 * reopening a session gives the same figure: it is persisted by being derivable.
 */
import type { SurfaceEvent } from '../../session/events';

/** What a node's framing depends on: its role, and for a tool result the error flag. */
export const NODE_KINDS = ['user', 'assistant', 'tool', 'toolError'] as const;
export type NodeKind = (typeof NODE_KINDS)[number];

export const CALIBRATION = Object.freeze({
  /** Samples (clean steps) kept per route. */
  window: 128,
  /** Reweighting rounds of the robust fit. */
  rounds: 6,
  /**
   * Clean steps needed before the fit leaves the seed: one or two steps are not evidence of a
   * tokenizer's ratio (a single odd report once drove the ratio to its clamp, and the whole-surface
   * estimate with it, so a trustworthy anchored figure looked suspect right after a compaction).
   */
  minSamples: 4,
  /** No real tokenizer pair differs by more than this; a ratio outside is noise or a bad report. */
  minRatio: 0.5,
  maxRatio: 2.5,
  /** Provider framing per node beyond ratio × our price (ours: 3–4 tokens per message). */
  minPerNode: -16,
  maxPerNode: 64,
});

/** Pull toward the seed, in squared relative error: weak against a few samples' evidence. */
const RIDGE_RATIO = 1e-2;
const RIDGE_PER_NODE = 1e-3;
/** Residuals below this relative error weigh as this (the reweighting never divides by 0). */
const RESIDUAL_FLOOR = 0.02;

export interface Calibration {
  /** The route the figures apply to (the latest request header's provider/model), '' before any. */
  route: string;
  /** Provider tokens per priced token (whole-surface budgets use it): 1 until the route has a sample. */
  ratio: number;
  /** Provider tokens per appended node of each kind beyond `ratio` × its price: 0 until learned. */
  perNode: Record<NodeKind, number>;
  /** Clean steps the figures are fitted to (at most CALIBRATION.window). */
  samples: number;
}

/** Appended nodes by kind, indexed as NODE_KINDS. */
export type NodeCounts = number[];

export function emptyCounts(): NodeCounts {
  return NODE_KINDS.map(() => 0);
}

export function kindOf(event: Pick<SurfaceEvent, 'type' | 'data'>): NodeKind {
  switch (event.type) {
    case 'assistant/message':
      return 'assistant';
    case 'tool/result':
      return (event.data as { isError?: boolean }).isError === true ? 'toolError' : 'tool';
    default:
      // A system prompt appended mid-session is framed like any other message.
      return 'user';
  }
}

export function countNode(counts: NodeCounts, event: Pick<SurfaceEvent, 'type' | 'data'>): void {
  counts[NODE_KINDS.indexOf(kindOf(event))]!++;
}

interface Sample {
  /** The provider's growth. */
  actual: number;
  /** Features: priced growth, then node counts by kind. */
  x: number[];
}

/** Coefficients: ratio, then perNode by kind. */
type Model = number[];

const SEED: Model = [1, ...NODE_KINDS.map(() => 0)];

export class CalibrationState {
  private readonly windows = new Map<string, Sample[]>();
  private readonly models = new Map<string, Model>();

  /** One clean step: what the provider counted more, what we priced, what kinds of nodes came. */
  add(route: string, providerGrowth: number, pricedGrowth: number, added: NodeCounts): void {
    if (pricedGrowth <= 0 || !Number.isFinite(providerGrowth)) return;
    let samples = this.windows.get(route);
    if (!samples) this.windows.set(route, (samples = []));
    samples.push({ actual: providerGrowth, x: [pricedGrowth, ...added] });
    if (samples.length > CALIBRATION.window) samples.shift();
    this.models.delete(route);
  }

  /** Provider tokens per priced token for the route (whole-surface budgets). */
  ratio(route: string): number {
    return this.model(route)[0]!;
  }

  /** The provider's growth for `pricedGrowth` (of either sign: a prune shrinks) with `added` nodes appended. */
  predict(route: string, pricedGrowth: number, added: NodeCounts): number {
    const m = this.model(route);
    let y = m[0]! * pricedGrowth;
    for (let k = 0; k < added.length; k++) y += m[k + 1]! * added[k]!;
    return y;
  }

  /** The samples per route (all the state there is: the fits are derived), for a snapshot. */
  toState(): Array<[string, number[][]]> {
    return [...this.windows].map(([route, samples]) => [route, samples.map((s) => [s.actual, ...s.x])]);
  }

  /** Replaces the state with a snapshot's (`toState`), checked for shape; false (and nothing changed) if it is not one. */
  fromState(state: unknown): boolean {
    if (!Array.isArray(state)) return false;
    const windows = new Map<string, Sample[]>();
    for (const entry of state) {
      if (!Array.isArray(entry) || typeof entry[0] !== 'string' || !Array.isArray(entry[1])) return false;
      const samples: Sample[] = [];
      for (const row of entry[1] as unknown[]) {
        if (!Array.isArray(row) || row.length !== SEED.length + 1 || !row.every((v) => typeof v === 'number' && Number.isFinite(v))) return false;
        samples.push({ actual: row[0] as number, x: row.slice(1) as number[] });
      }
      if (samples.length > CALIBRATION.window) return false;
      windows.set(entry[0], samples);
    }
    this.windows.clear();
    this.models.clear();
    for (const [route, samples] of windows) this.windows.set(route, samples);
    return true;
  }

  describe(route: string): Calibration {
    const m = this.model(route);
    const perNode = {} as Record<NodeKind, number>;
    NODE_KINDS.forEach((k, i) => (perNode[k] = m[i + 1]!));
    return { route, ratio: m[0]!, perNode, samples: this.windows.get(route)?.length ?? 0 };
  }

  private model(route: string): Model {
    let m = this.models.get(route);
    if (!m) {
      const samples = this.windows.get(route);
      m = samples && samples.length >= CALIBRATION.minSamples ? fit(samples) : SEED;
      this.models.set(route, m);
    }
    return m;
  }
}

/**
 * Minimises Σ |prediction − actual| / |actual| + ridge toward SEED by reweighted least squares.
 * If the ratio leaves its range it is held at the bound and the per-node constants refitted.
 *
 * The meter refits at every clean report (a reopened log of 15k steps: 15k fits), so the
 * samples are copied once into flat arrays and every round reuses them; the arithmetic is the
 * same operations in the same order as the plain formulation, so the figures are bit-identical.
 */
export function fit(samples: readonly Sample[]): Model {
  const n = samples.length;
  const d = SEED.length;
  const rows = scratchRows(n, d);
  // Per sample, the features that are not 0 (most node counts are): a 0 adds nothing to a sum.
  const { x, actual, base, nonzero, nonzeroCount } = rows;
  nonzeroCount.fill(0);
  for (let i = 0; i < n; i++) {
    const s = samples[i]!;
    actual[i] = s.actual;
    base[i] = 1 / Math.max(Math.abs(s.actual), 1);
    for (let k = 0; k < d; k++) {
      const v = s.x[k]!;
      x[i * d + k] = v;
      if (v !== 0) nonzero[i * d + nonzeroCount[i]!++] = k;
    }
  }
  rows.weights.set(base.subarray(0, n));
  let model = SEED;
  for (let round = 0; round < CALIBRATION.rounds; round++) {
    model = solve(rows, undefined);
    const clamped = Math.min(CALIBRATION.maxRatio, Math.max(CALIBRATION.minRatio, model[0]!));
    if (clamped !== model[0]) model = solve(rows, clamped);
    for (let k = 1; k < model.length; k++) model[k] = Math.min(CALIBRATION.maxPerNode, Math.max(CALIBRATION.minPerNode, model[k]!));
    for (let i = 0; i < n; i++) {
      let y = 0;
      for (let k = 0; k < d; k++) y += model[k]! * x[i * d + k]!;
      rows.weights[i] = base[i]! / Math.sqrt(Math.max(Math.abs(y - actual[i]!) * base[i]!, RESIDUAL_FLOOR));
    }
  }
  return model;
}

/** The samples as `fit` reads them: features row by row (`d` per sample), targets, weights. */
interface Rows {
  n: number;
  d: number;
  x: Float64Array;
  /** Per sample, 1 / max(|actual|, 1): the weights' start and the relative-error scale. */
  base: Float64Array;
  /** Per sample (`d` slots each), the indices of its features that are not 0, ascending. */
  nonzero: Int32Array;
  nonzeroCount: Int32Array;
  actual: Float64Array;
  weights: Float64Array;
  /** The normal equations' scratch space (at most d × d and d). */
  ata: Float64Array;
  atb: Float64Array;
}

/**
 * One set of arrays for every fit, sized for the largest window seen: a fit runs at every clean
 * report, and allocating its typed arrays each time cost a fifth of it. Fits are synchronous and
 * never overlap, so one set is safe.
 */
let scratch: Rows | undefined;
function scratchRows(n: number, d: number): Rows {
  if (!scratch || scratch.d !== d || scratch.actual.length < n) {
    const cap = Math.max(n, CALIBRATION.window);
    scratch = {
      n,
      d,
      x: new Float64Array(cap * d),
      base: new Float64Array(cap),
      nonzero: new Int32Array(cap * d),
      nonzeroCount: new Int32Array(cap),
      actual: new Float64Array(cap),
      weights: new Float64Array(cap),
      ata: new Float64Array(d * d),
      atb: new Float64Array(d),
    };
  }
  scratch.n = n;
  return scratch;
}

/** Weighted ridge least squares; with `ratio` given, only the per-node constants are free. */
function solve(rows: Rows, ratio: number | undefined): Model {
  const { n: samples, d: n, x, nonzero, nonzeroCount, actual, weights } = rows;
  const free = ratio === undefined ? 0 : 1;
  const size = n - free;
  // Row-major, size × size; reused by every solve of the fit.
  const ata = rows.ata.fill(0);
  const atb = rows.atb.fill(0);
  for (let i = 0; i < samples; i++) {
    const row = i * n;
    const w2 = weights[i]! * weights[i]!;
    const target = ratio === undefined ? actual[i]! : actual[i]! - ratio * x[row]!;
    // Every product with a 0 feature is 0 (all values are finite): skipping it changes no sum.
    const count = nonzeroCount[i]!;
    for (let p = 0; p < count; p++) {
      const kr = nonzero[row + p]!;
      if (kr < free) continue;
      // (w2 × xr) × …, as the plain formulation groups it.
      const wx = w2 * x[row + kr]!;
      atb[kr - free]! += wx * target;
      const ar = (kr - free) * size;
      for (let q = 0; q < count; q++) {
        const kc = nonzero[row + q]!;
        if (kc >= free) ata[ar + kc - free]! += wx * x[row + kc]!;
      }
    }
  }
  for (let r = 0; r < size; r++) {
    const ridge = r + free === 0 ? RIDGE_RATIO : RIDGE_PER_NODE;
    ata[r * size + r]! += ridge;
    atb[r]! += ridge * SEED[r + free]!;
  }
  const solved = gauss(ata, atb, size);
  return ratio === undefined ? solved : [ratio, ...solved];
}

/** Gaussian elimination with partial pivoting (the system is small and, with the ridge, regular); `a` is row-major n × n. */
export function gauss(a: Float64Array, b: Float64Array, n: number): number[] {
  for (let col = 0; col < n; col++) {
    let pivot = col;
    for (let r = col + 1; r < n; r++) if (Math.abs(a[r * n + col]!) > Math.abs(a[pivot * n + col]!)) pivot = r;
    if (pivot !== col) {
      for (let c = 0; c < n; c++) {
        const t = a[col * n + c]!;
        a[col * n + c] = a[pivot * n + c]!;
        a[pivot * n + c] = t;
      }
      const t = b[col]!;
      b[col] = b[pivot]!;
      b[pivot] = t;
    }
    for (let r = col + 1; r < n; r++) {
      const f = a[r * n + col]! / a[col * n + col]!;
      if (f === 0) continue;
      for (let c = col; c < n; c++) a[r * n + c]! -= f * a[col * n + c]!;
      b[r]! -= f * b[col]!;
    }
  }
  const x = new Array<number>(n).fill(0);
  for (let r = n - 1; r >= 0; r--) {
    let s = b[r]!;
    for (let c = r + 1; c < n; c++) s -= a[r * n + c]! * x[c]!;
    x[r] = s / a[r * n + r]!;
  }
  return x;
}

/** The key of a route (provider/model): what calibration, prices and per-model policies are looked up by. */
export function modelKey(provider: string, model: string): string {
  return `${provider}/${model}`;
}
