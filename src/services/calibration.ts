/**
 * Online calibration (SPEC §12): how many tokens the provider counts per token we price, per
 * route (provider/model). Between two provider reports the surface grows by nodes we price
 * with our tokenizer; for a provider with another tokenizer (Claude, Gemini, Qwen …) that
 * growth is off by 20–30%. Each clean step gives one sample, the provider's growth over ours:
 *   (prompt of this report − the previous report's prompt + completion) / (our price of what
 *    was appended in between).
 * The ratio is the median of the route's recent samples, clamped to a sane range, 1.0 before
 * any. The meter feeds it from the log only (usage and node prices), so replaying or reopening
 * a session gives the same figure: it is persisted by being derivable.
 */

export const CALIBRATION = Object.freeze({
  /** Samples kept per route: the median of the most recent ones follows a change of content mix. */
  window: 15,
  /** A step that added fewer priced tokens than this is too small to measure a ratio on. */
  minGrowthTokens: 64,
  /** No real tokenizer pair differs by more than this; a ratio outside is noise or a bad report. */
  minRatio: 0.5,
  maxRatio: 2.5,
});

export interface Calibration {
  /** The route the ratio applies to (the latest request header's provider/model), '' before any. */
  route: string;
  /** Provider tokens per priced token: 1 until the route has a sample. */
  ratio: number;
  /** Samples the ratio is the median of (at most CALIBRATION.window). */
  samples: number;
}

export class CalibrationState {
  private readonly byRoute = new Map<string, number[]>();
  private readonly cache = new Map<string, number>();

  /** One step's growth: what the provider counted more, and what we priced. */
  add(route: string, providerGrowth: number, pricedGrowth: number): void {
    if (pricedGrowth < CALIBRATION.minGrowthTokens) return;
    let samples = this.byRoute.get(route);
    if (!samples) this.byRoute.set(route, (samples = []));
    samples.push(providerGrowth / pricedGrowth);
    if (samples.length > CALIBRATION.window) samples.shift();
    this.cache.delete(route);
  }

  ratio(route: string): number {
    const cached = this.cache.get(route);
    if (cached !== undefined) return cached;
    const samples = this.byRoute.get(route);
    const r = samples && samples.length > 0 ? clamp(median(samples)) : 1;
    this.cache.set(route, r);
    return r;
  }

  describe(route: string): Calibration {
    return { route, ratio: this.ratio(route), samples: this.byRoute.get(route)?.length ?? 0 };
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function clamp(ratio: number): number {
  return Math.min(CALIBRATION.maxRatio, Math.max(CALIBRATION.minRatio, ratio));
}
