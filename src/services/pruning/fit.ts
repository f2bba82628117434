/**
 * The cut that makes a request fit its window (docs/spec.md#19-the-request-fits): after
 * compaction and pruning, a request still over its message budget is brought under it by
 * cutting the largest tool results on the surface — the newest step's too, which pruning
 * protects — down to one common size, each keeping its head and its tail around one marker line
 * (naming the recall handle when recall is on). Each cut is recorded as a prune is (a
 * `compaction/prune`, then a content-only replacement): the whole text stays in the log and
 * the recall tool brings it back.
 *
 * Why one common size (water-filling) and not the newest first: a step that read five files
 * needs all five; cutting the largest down to what the smaller ones take keeps the most of each
 * for the tokens that must go. Results already under that size are not touched (no needless
 * prompt-cache miss). How much to free is the fit chart's input; whether to cut at all, and
 * what happens when a cut is not enough, is the chart's decision.
 */
import { toolCallsOf, type EventData } from '../../session/events';
import type { PruneSummary, ServiceDeps } from '../core';
import { recallOn } from '../core';
import { applyPrune } from './apply';
import { prunedHandle } from '../recall';
import { codePointLength, truncateMiddle } from './text';
import type { PruneTarget, ToolResultContent } from './types';

export interface CutInput {
  /** Provider tokens the request is over its message budget by (> 0). */
  need: number;
}

/** The share of a cut result's kept characters that is its head (the rest is its tail). */
const HEAD_SHARE = 0.75;
/** Cuts aim this much past the need: a cut result is priced again only after it is written, and the marker costs tokens too. */
const OVERSHOOT = 1.1;

interface Candidate {
  seq: number;
  callId: string;
  toolName: string | undefined;
  content: ToolResultContent;
  price: number;
  chars: number;
}

/** Cuts the largest tool results to one size so the surface is `need` provider tokens smaller; what it wrote. */
export function cutToFit(deps: Pick<ServiceDeps, 'session' | 'meter' | 'config'>, { need }: CutInput): PruneSummary {
  const { session, meter, config } = deps;
  const ratio = meter.providerRatio > 0 ? meter.providerRatio : 1;
  const never = new Set(config.prune.neverPrune);
  const recall = recallOn(deps);
  const names = new Map<string, string>();
  const candidates: Candidate[] = [];
  for (const seq of session.surface.seqs()) {
    const e = session.event(seq);
    if (e.type === 'assistant/message') for (const c of toolCallsOf(e)) names.set(c.id, c.name);
    if (e.type !== 'tool/result') continue;
    const toolName = e.data.toolName ?? names.get(e.data.callId);
    if (toolName !== undefined && never.has(toolName)) continue;
    const chars = textChars(e.data.content);
    if (chars === 0) continue;
    candidates.push({ seq, callId: e.data.callId, toolName, content: e.data.content, price: meter.priceOf(seq), chars });
  }
  const cap = commonCap(
    candidates.map((c) => c.price),
    Math.ceil((need * OVERSHOOT) / ratio),
  );
  const targets: PruneTarget[] = [];
  for (const c of candidates) {
    if (c.price <= cap) continue;
    // The characters this result keeps: its share of the cap, as its own characters per token go.
    const keep = Math.floor((c.chars * cap) / c.price);
    const content = cutContent(c.content, keep / c.chars, recall ? prunedHandle(c.seq) : undefined);
    const data: EventData<'tool/result'> = { ...(session.event(c.seq).data as EventData<'tool/result'>), content };
    const tokensAfter = meter.priceEvent({ type: 'tool/result', data });
    if (tokensAfter >= c.price) continue;
    targets.push({
      seq: c.seq,
      callId: c.callId,
      ...(c.toolName !== undefined ? { toolName: c.toolName } : {}),
      contentBefore: c.content,
      content,
      charsBefore: c.chars,
      charsAfter: textChars(content),
      tokensBefore: c.price,
      tokensAfter,
    });
  }
  const freed = targets.reduce((n, t) => n + t.tokensBefore - t.tokensAfter, 0);
  const result = applyPrune(session, { targets, argumentTargets: [], tokensFreed: freed, reclaimableTokens: freed, kept: [] });
  return { count: result.pruned.length, tokensFreed: result.tokensFreed, generation: session.surface.replaceGeneration };
}

/**
 * The largest size c (in priced tokens) such that cutting every price above c down to c frees
 * at least `need`; 0 when even that is not enough (every result cut to its marker).
 */
export function commonCap(prices: readonly number[], need: number): number {
  const sorted = [...prices].sort((a, b) => b - a);
  let above = 0; // the sum of the k largest prices
  for (let k = 1; k <= sorted.length; k++) {
    above += sorted[k - 1]!;
    const next = sorted[k] ?? 0;
    // With the k largest cut to c (next ≤ c ≤ sorted[k-1]): freed = above − k × c.
    const c = Math.floor((above - need) / k);
    if (c >= next) return Math.max(0, c);
  }
  return 0;
}

function textChars(content: ToolResultContent): number {
  let n = 0;
  for (const b of content) if (b.type === 'text') n += codePointLength(b.text);
  return n;
}

/** Each text block keeps `share` of its characters, head and tail around one marker; images stay. */
function cutContent(content: ToolResultContent, share: number, recallHandle: string | undefined): ToolResultContent {
  return content.map((b) => {
    if (b.type !== 'text') return b;
    const keep = Math.max(0, Math.floor(codePointLength(b.text) * share));
    const headChars = Math.ceil(keep * HEAD_SHARE);
    return { ...b, text: truncateMiddle(b.text, { headChars, tailChars: keep - headChars, ...(recallHandle !== undefined ? { recallHandle } : {}) }) };
  });
}
