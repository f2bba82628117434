/**
 * What a measurement says, and how a provider's report is judged before it anchors one.
 *
 * Which request a report describes (docs/local-models.md#counts-the-tokenizer-is-not-ours). A report answers the request of the latest
 * request/header: the agent built that request from the surface as it was then. A background
 * summary may commit while the request is open, so by the time the reply is recorded the
 * surface is shorter than what the provider counted; anchoring the new surface to the old
 * count over-reports pressure by about the compacted span until the next report (and starts a
 * second, tiny compaction). An overflow recovery, on the contrary, replaces the surface and then
 * re-sends the request under the same header: its report counts the surface as it is now.
 * So when the surface was replaced since the header, the report is read as counting whichever
 * surface our calibrated estimate puts nearer its figure (by ratio: a compaction moves the two
 * far apart, and a small replace makes either reading nearly right). Counted at the header, it
 * is carried across the replaces as an anchor is, by what the provider counted for what left.
 * Over-high figures are as suspect as under-low ones: this is what keeps them out.
 *
 * Suspect usage (docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have). A figure is suspect when it is below our own calibrated estimate
 * of the same request by more than SUSPECT_TOLERANCE (half): proxies under-report (a prompt of
 * 6 tokens for a request we price at 117), and a figure carried across a replace that removed
 * more than the provider ever counted (usage recorded before another agent's compaction) no
 * longer describes the surface. The larger figure wins: a suspect report neither anchors nor
 * calibrates, and a measurement whose anchored total falls below the tolerance reports the
 * calibrated estimate instead (flagged `suspectUsage`). So a non-empty surface never measures
 * 0, and an under-reporting proxy cannot delay compaction until the request overflows.
 */
import type { SessionEvent } from '../../session/events';
import { CALIBRATION, type Calibration, type CalibrationState } from './calibration';
import type { ProvisionalPrices } from './provisional';
import type { MeterAnchorState } from './snapshot';
import type { Tokenizer, TokenizerName } from './tokenizer';

/** A figure more than this share below our calibrated estimate is suspect (see above). */
export const SUSPECT_TOLERANCE = 0.5;

export interface NodePrices {
  /** Number of surface nodes priced. */
  readonly length: number;
  /** Price of the surface node at `position`. */
  priceAt(position: number): number;
  /** Price of a current surface node by seq. */
  priceOf(seq: number): number;
  /**
   * Provider tokens per priced token for the current route (docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have): whole-surface budgets
   * (the retained tail) multiply prices by it. Absent = 1.
   */
  readonly providerRatio?: number;
}

export interface Measurement {
  /** The figure pressure is judged on: anchored to provider usage when possible. */
  totalTokens: number;
  /**
   * The figure a request is checked against its window by (machines/fit.ts): `totalTokens`, with
   * what no provider report has counted yet priced at the ratio the provider showed for the
   * anchored request where that is more than the calibration's. The calibration needs several clean steps to leave
   * its seed, while a provider whose tokenizer is not ours (Qwen's, Claude's) counts new text as
   * it counted the old: a step of large tool results priced at the seed was 19% under the server's
   * count, and the request went out over the window.
   */
  boundTokens: number;
  /** Our own estimate of the whole request: envelope + surface, in our tokenizer's tokens. */
  estimatedTokens: number;
  /** `estimatedTokens` in the provider's tokens: × `calibration.ratio`. */
  calibratedTokens: number;
  /** The ratio of the provider's counts to ours for the current route, and what it rests on. */
  calibration: Calibration;
  /**
   * True when the anchored figure was suspect (far below `calibratedTokens`) and the total is
   * the calibrated estimate; also true right after a suspect report was refused.
   */
  suspectUsage: boolean;
  surfaceTokens: number;
  /** Tool definitions and the per-request template cost (the system prompt is surface node 0). */
  envelopeTokens: number;
  /** `growthTokens`: growth since the anchor (or the last replace, which rebases `providerTokens`) in provider tokens (the calibration's prediction from our prices and the appended nodes). */
  anchor: { seq: number; providerTokens: number; growthTokens: number } | undefined;
  tokenizer: TokenizerName;
  /**
   * Surface nodes (the tool list counts as one) priced with the fallback's counts because the
   * tokenizer's own were not in yet (the `server` tokenizer before or without its server's
   * answer); 0 when every price is the tokenizer's own.
   */
  fallbackNodes: number;
  /** Log length the measurement reflects. */
  logLength: number;
  prices: NodePrices;
}

export interface TokenMeterOptions {
  /** Picks the tokenizer for the model a request header routes to (undefined before any header). */
  tokenizerFor: (header: SessionEvent<'request/header'> | undefined) => Tokenizer;
  /** Where the meter keeps its provisional nodes: shared with a CountPrefetch (prefetch.ts), which asks for their counts. */
  provisional?: ProvisionalPrices;
  /**
   * The writer-side meter of a session written with no engine (session/writer-snapshot.ts): its
   * claim on the session's snapshot gives way to the next meter's, which starts from its fold.
   */
  weak?: boolean;
}

/** The surface a request/header's request had, and what replaces did to it since (provider tokens). */
export interface RequestSurface {
  /** Our price of the surface when the header was folded. */
  surfaceTotal: number;
  /** A replace was folded since the header. */
  replaced: boolean;
  /** Provider tokens the replaces since the header added (negative: removed). */
  providerDelta: number;
}

/**
 * Which surface a report's prompt counts: the current one, or the one at its request's header
 * (only when a replace came between; see the file comment). `calibrated` figures are ours × ratio.
 */
export function reportedSurface(
  prompt: number,
  calibratedNow: number,
  atHeader: (RequestSurface & { calibrated: number }) | undefined,
): 'current' | 'at-header' {
  if (!atHeader?.replaced || prompt <= 0) return 'current';
  const off = (estimate: number) => Math.abs(Math.log(prompt / Math.max(1, estimate)));
  return off(atHeader.calibrated) < off(calibratedNow) ? 'at-header' : 'current';
}

/** Far below our calibrated estimate of the same request: see SUSPECT_TOLERANCE. */
export function isSuspect(providerFigure: number, calibratedEstimate: number): boolean {
  return providerFigure < calibratedEstimate * (1 - SUSPECT_TOLERANCE);
}

/**
 * What a report says the next request starts from: its prompt and completion. Reasoning is billed
 * as completion but never sent back, so it is not part of the next request (and never more than
 * the completion is subtracted).
 */
export function nextContext(u: NonNullable<SessionEvent<'assistant/message'>['data']['usage']>): number {
  return u.promptTokens + u.completionTokens - Math.min(u.reasoningTokens ?? 0, u.completionTokens);
}

/** What the meter has folded, as a measurement reads it. */
export interface FoldedFigures {
  envelope: number;
  surfaceTotal: number;
  calibration: CalibrationState;
  route: string;
  anchor: MeterAnchorState | undefined;
  /** Our price of the surface nodes no provider report has counted yet (appended since the last one). */
  unreported?: number;
  /** A report was refused as suspect since the last anchor. */
  suspect: boolean;
  tokenizer: TokenizerName;
  folded: number;
  prices: NodePrices;
  fallbackNodes?: number;
}

/** The measurement of a fold: anchored to the provider's figure unless that is suspect (see the file comment). */
export function measurementOf(f: FoldedFigures): Measurement {
  const estimated = f.envelope + f.surfaceTotal;
  const calibration = f.calibration.describe(f.route);
  const calibrated = Math.round(estimated * calibration.ratio);
  let total = calibrated;
  let bound = calibrated;
  let suspectUsage = f.suspect;
  let anchor: Measurement['anchor'];
  if (f.anchor) {
    const priced = f.surfaceTotal - f.anchor.surfaceAtAnchor;
    const growth = Math.round(f.calibration.predict(f.route, priced, f.anchor.added));
    anchor = { seq: f.anchor.seq, providerTokens: f.anchor.providerTokens, growthTokens: growth };
    const anchored = f.anchor.providerTokens + growth;
    // A report refused since this anchor says the provider's figures cannot be trusted now.
    if (isSuspect(anchored, calibrated) || f.suspect) suspectUsage = true;
    else {
      total = anchored;
      // What no report counted, at the ratio the provider showed for the anchored request where that is more than the calibration's.
      const shown = Math.min(CALIBRATION.maxRatio, f.anchor.shown);
      bound = anchored + Math.round((f.unreported ?? 0) * Math.max(0, shown - calibration.ratio));
    }
  }
  return {
    totalTokens: Math.max(0, total),
    boundTokens: Math.max(0, total, bound),
    estimatedTokens: estimated,
    calibratedTokens: calibrated,
    calibration,
    suspectUsage,
    surfaceTokens: f.surfaceTotal,
    envelopeTokens: f.envelope,
    anchor,
    tokenizer: f.tokenizer,
    fallbackNodes: f.fallbackNodes ?? 0,
    logLength: f.folded,
    prices: f.prices,
  };
}
