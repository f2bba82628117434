/**
 * Online calibration (SPEC §12): how many tokens the provider counts per token we price, per
 * route (provider/model). Between two provider reports the surface grows by nodes we price
 * with our tokenizer; for a provider with another tokenizer (Claude, Gemini, Qwen …) that
 * growth is off by 20–30%. Each clean step gives one sample, the provider's growth over ours:
 *   (prompt of this report − the previous report's prompt + completion) / (our price of what
 *    was appended in between).
 * The ratio is the median of the route's recent samples, clamped to a sane range, 1.0 before
 * any. Steps are kept in two windows by the size of our priced growth: a step of a few dozen
 * tokens is mostly message framing, which providers count almost as we do (a 15-token tool
 * result is 15 tokens to Claude too), while long text carries the tokenizers' real difference
 * (Claude: ~1.25× o200k). One median over both would be wrong for both: on the real
 * transcript it leaves the median step 14% off, the two windows 8% (4.5% on steps over 200
 * tokens). The large window's ratio is the route's figure: whole-surface budgets use it.
 * The meter feeds it from the log only (usage and node prices), so replaying or reopening
 * a session gives the same figure: it is persisted by being derivable.
 */

export const CALIBRATION = Object.freeze({
  /** Samples kept per route and size: the median of the most recent ones follows a change of content mix. */
  window: 31,
  /** Steps that added fewer priced tokens than this are calibrated apart (mostly framing). */
  smallGrowthTokens: 64,
  /** No real tokenizer pair differs by more than this; a ratio outside is noise or a bad report. */
  minRatio: 0.5,
  maxRatio: 2.5,
});

export interface Calibration {
  /** The route the ratio applies to (the latest request header's provider/model), '' before any. */
  route: string;
  /** Provider tokens per priced token of long text (whole-surface budgets use it): 1 until the route has a sample. */
  ratio: number;
  /** Samples the ratio is the median of (at most CALIBRATION.window). */
  samples: number;
  /** The same for steps of fewer than CALIBRATION.smallGrowthTokens priced tokens. */
  smallStepRatio: number;
  smallStepSamples: number;
}

type Bucket = 'small' | 'large';

export class CalibrationState {
  private readonly windows = new Map<string, number[]>();
  private readonly cache = new Map<string, number>();

  /** One step's growth: what the provider counted more, and what we priced. */
  add(route: string, providerGrowth: number, pricedGrowth: number): void {
    if (pricedGrowth <= 0) return;
    const key = keyOf(route, bucketOf(pricedGrowth));
    let samples = this.windows.get(key);
    if (!samples) this.windows.set(key, (samples = []));
    samples.push(providerGrowth / pricedGrowth);
    if (samples.length > CALIBRATION.window) samples.shift();
    this.cache.delete(key);
  }

  /** The route's ratio for long text (whole-surface budgets). */
  ratio(route: string): number {
    return this.bucketRatio(route, 'large') ?? this.bucketRatio(route, 'small') ?? 1;
  }

  /** The ratio for a growth of `pricedGrowth` tokens (of either sign) since the last report. */
  growthRatio(route: string, pricedGrowth: number): number {
    return this.bucketRatio(route, bucketOf(Math.abs(pricedGrowth))) ?? this.ratio(route);
  }

  describe(route: string): Calibration {
    return {
      route,
      ratio: this.ratio(route),
      samples: this.windows.get(keyOf(route, 'large'))?.length ?? 0,
      smallStepRatio: this.bucketRatio(route, 'small') ?? this.ratio(route),
      smallStepSamples: this.windows.get(keyOf(route, 'small'))?.length ?? 0,
    };
  }

  private bucketRatio(route: string, bucket: Bucket): number | undefined {
    const key = keyOf(route, bucket);
    const cached = this.cache.get(key);
    if (cached !== undefined) return cached;
    const samples = this.windows.get(key);
    if (!samples || samples.length === 0) return undefined;
    const r = clamp(median(samples));
    this.cache.set(key, r);
    return r;
  }
}

function bucketOf(pricedGrowth: number): Bucket {
  return pricedGrowth < CALIBRATION.smallGrowthTokens ? 'small' : 'large';
}

function keyOf(route: string, bucket: Bucket): string {
  return `${bucket} ${route}`;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function clamp(ratio: number): number {
  return Math.min(CALIBRATION.maxRatio, Math.max(CALIBRATION.minRatio, ratio));
}
