/**
 * What the provider counted for each surface node, as exactly as its reports allow (docs/spec.md#11-real-transcripts-in-faithfully:
 * after a replace the anchor is carried only by an exact delta).
 *
 * A report's prompt counts the envelope and every node on the surface. Between two reports
 * with nothing but appends in between, the difference of their prompts is exactly what the
 * provider counted for the nodes appended in between (the previous reply as re-sent, tool
 * results, a user message); that interval's total is spread over its nodes by our prices.
 * So when a compaction removes most of the surface, what it removed is known in the
 * provider's tokens to within the nodes since the last report, instead of being our price of
 * the span times a ratio learned on other text: a span of prose removed with a ratio learned
 * on code left the figure 79% above the provider's next report (the AI SDK example with a
 * few prose files first: 5,661 against 3,158).
 *
 * Nodes without an interval (appended since the last report, in an interval a replace or an
 * envelope change interrupted, or in one whose ratio no tokenizer pair explains: a noisy or bad
 * report) have no entry: the meter prices them by calibration.
 */
import { CALIBRATION } from './calibration';

export interface LedgerState {
  counted: Array<[number, number]>;
  since: number[];
  last: { prompt: number; priced: number; route: string } | null;
  fromStart: boolean;
}

export class ProviderLedger {
  /** Provider tokens per node (seq), for nodes of completed clean intervals. */
  private readonly counted = new Map<number, number>();
  /** Nodes appended since the last report, in order. */
  private since: number[] = [];
  /** The last report: its prompt, our price of the same request, its route. Undefined once interrupted. */
  private last: { prompt: number; priced: number; route: string } | undefined;
  /** True until the first report: its prompt covers the whole request, every node of which is in `since`. */
  private fromStart = true;

  /** Everything the ledger holds, for a snapshot. */
  toState(): LedgerState {
    return { counted: [...this.counted], since: [...this.since], last: this.last ? { ...this.last } : null, fromStart: this.fromStart };
  }

  /** Replaces the state with a snapshot's (`toState`), checked for shape; false (and nothing changed) if it is not one. */
  fromState(state: unknown): boolean {
    const s = state as Partial<LedgerState> | null;
    if (s === null || typeof s !== 'object' || !Array.isArray(s.counted) || !Array.isArray(s.since) || typeof s.fromStart !== 'boolean') return false;
    if (!s.counted.every((e) => Array.isArray(e) && e.length === 2 && Number.isSafeInteger(e[0]) && Number.isFinite(e[1]))) return false;
    if (!s.since.every((seq) => Number.isSafeInteger(seq))) return false;
    const l = s.last;
    if (l !== null && (typeof l !== 'object' || !Number.isFinite(l?.prompt) || !Number.isFinite(l?.priced) || typeof l?.route !== 'string')) return false;
    this.counted.clear();
    for (const [seq, n] of s.counted) this.counted.set(seq, n);
    this.since = [...s.since];
    this.last = l === null || l === undefined ? undefined : { prompt: l.prompt, priced: l.priced, route: l.route };
    this.fromStart = s.fromStart;
    return true;
  }

  appended(seq: number): void {
    this.since.push(seq);
  }

  /**
   * A report of `prompt` provider tokens for a request we price at `priced` (envelope +
   * surface, before the reply is appended). `priceOf` gives our price of a node.
   */
  report(route: string, prompt: number, priced: number, priceOf: (seq: number) => number | undefined): void {
    const last = this.last;
    let providerGrowth: number | undefined;
    let pricedGrowth = 0;
    if (last && last.route === route) {
      providerGrowth = prompt - last.prompt;
      pricedGrowth = priced - last.priced;
    } else if (this.fromStart) {
      providerGrowth = prompt;
      pricedGrowth = priced;
    }
    const ratio = providerGrowth !== undefined && pricedGrowth > 0 ? providerGrowth / pricedGrowth : 0;
    if (ratio >= CALIBRATION.minRatio && ratio <= CALIBRATION.maxRatio) {
      for (const seq of this.since) {
        const p = priceOf(seq);
        if (p !== undefined) this.counted.set(seq, p * ratio);
      }
    }
    this.since = [];
    this.last = { prompt, priced, route };
    this.fromStart = false;
  }

  /** The provider's count of a node leaving the surface (undefined when not known), forgotten. */
  take(seq: number): number | undefined {
    const n = this.counted.get(seq);
    this.counted.delete(seq);
    return n;
  }

  /** The surface or the envelope changed other than by appends: the next report's difference is no interval. */
  interrupt(): void {
    this.last = undefined;
    this.since = [];
  }

  /** Everything counted is void (another provider's tokens): the next report only starts an interval. */
  reset(): void {
    this.counted.clear();
    this.interrupt();
    this.fromStart = false;
  }
}
