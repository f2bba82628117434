/**
 * Model-free pruning of oversized tool results (docs/spec.md#7-pruning-tool-results): keep the head and the tail of an
 * oversized text, replace the middle with one marker line, and record each rewrite as a
 * `compaction/prune` event followed by a content-only `tool/result` replacement. Oversized
 * tool-call arguments of older assistant messages are cut the same way, in the same pass and
 * under the same protections (docs/spec.md#15-pruning-what-the-agent-wrote, pruner-arguments.ts).
 *
 * A service, not a policy: `planPrune` only reads and says what a pass would do (and why it
 * would do nothing); `applyPrune` writes a plan. When to prune is the charts' decision.
 *
 * Decisions (each one is tested in test/services/pruning/pruner.test.ts):
 *
 * - **Per text block.** A result is oversized when one of its text blocks has more than
 *   `thresholdChars` code points, and each such block is cut on its own (one marker per cut
 *   block). Non-text blocks (images) and small text blocks are never touched, so the order of
 *   blocks is kept without any bookkeeping, a marker never straddles a block boundary, and
 *   idempotence is a local fact: every block of a pruned result is ≤ thresholdChars. The
 *   price: a result split into many blocks that are each under the threshold is not pruned.
 *   Tool output arrives as one text block in practice (the OpenAI tool message is a string),
 *   so that case is rare; cutting across blocks would have to drop whole blocks and decide
 *   where images between head and tail go, which "keep non-text blocks in order" forbids.
 *   `charsBefore`/`charsAfter` report the whole result (all its text blocks).
 *
 * - **Code points.** Lengths are Unicode code points (a surrogate pair is one), and cuts
 *   fall on code-point boundaries, so an emoji or a supplementary-plane CJK character is kept
 *   whole or dropped whole, never split into a lone surrogate. Grapheme clusters made of
 *   several code points (ZWJ emoji, flags, combining marks) may be cut between code points:
 *   the result is still valid UTF-16, and the spec counts code points.
 *
 * - **Protected recent budget.** Walking from the surface tail over every node and summing
 *   `pricing.priceOf` × `pricing.providerRatio`, a node is protected when the running total
 *   *including* it is ≤ protectRecentTokens (it lies wholly inside the budget). A node that straddles the
 *   budget's edge is not protected: otherwise one gigantic newest output (bigger than the
 *   whole budget) could never be pruned, and overflow recovery would lose its cheapest step
 *   exactly when it needs it.
 *
 * - **All eligible results, oldest first, in one pass.** A prune rewrites history: the
 *   provider's prompt cache misses from the first rewritten node on, whatever is rewritten
 *   after it. So a pass takes every eligible oversized result at once (a later second pass
 *   would cost a second miss), and the minimum-reclaim check is made on the pass as a whole.
 *   Pairs are appended in surface order (oldest first) so the log reads in prompt order and
 *   a process that dies mid-pass leaves a prefix of the pass: the oldest rewrites, which
 *   already paid for the cache miss. A result whose rewrite would not free tokens is left
 *   alone: it would cost a miss for nothing.
 *
 * - **Worth it, or nothing.** A pass that frees fewer than `minReclaimTokens` tokens (or none)
 *   writes nothing and says `below-min-reclaim`.
 *
 * - **Budgets in the provider's tokens.** protectRecentTokens and minReclaimTokens are shares
 *   of the window, which the provider counts (docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have), so they are compared with our prices
 *   × the calibrated `providerRatio`, as range selection does with the retained tail. The
 *   figures a plan and the log report (tokensBefore/After, tokensFreed) stay our prices, the
 *   unit every node price and `shadowedTokens` is logged in.
 */
import { toolCallsOf } from '../../session/events';
import type { Session } from '../../session/session';
import { PruneSettingsError, checkCount, codePointLength, cutSettings, markerReserve, truncateMiddle } from './text';
import { planArgumentPrunes } from './arguments';
import { PrunePricingError, type Pricing, type PruneKeepReason, type PrunePlan, type PruneSettings, type PruneTarget, type ToolResultContent } from './types';

export { PRUNE_MARKER_MAX_CHARS, PruneSettingsError, codePointLength, cutSettings, markerReserve, pruneMarker, truncateMiddle } from './text';

export type { ArgumentPruneTarget } from './arguments';
export { PrunePlanStaleError, PrunePricingError } from './types';
export type { Pricing, PruneKeepReason, PrunePlan, PruneResult, PruneSettings, PruneSkip, PruneTarget } from './types';
export { applyPrune } from './apply';

function checkSettings(s: PruneSettings): void {
  for (const key of ['thresholdChars', 'headChars', 'tailChars', 'protectRecentTokens', 'minReclaimTokens'] as const) {
    checkCount(key, s[key]);
  }
  const reserve = markerReserve(s.recall === true);
  if (s.headChars + reserve + s.tailChars > s.thresholdChars) {
    throw new PruneSettingsError(
      `headChars (${s.headChars}) + marker reserve (${reserve}) + tailChars (${s.tailChars}) exceeds thresholdChars (${s.thresholdChars}): a pruned text would still be oversized and every pass would prune it again. Lower headChars/tailChars or raise thresholdChars.`,
    );
  }
}

function price(what: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new PrunePricingError(`pricing returned ${String(value)} for ${what}: a price must be an integer token count ≥ 0.`);
  }
  return value;
}

/** The pricing's provider ratio: absent is 1; anything but a positive finite number is a pricing error. */
function providerRatioOf(pricing: Pricing): number {
  const r = pricing.providerRatio ?? 1;
  if (!Number.isFinite(r) || r <= 0)
    throw new PrunePricingError(`pricing returned providerRatio ${String(r)}: it must be a positive number of provider tokens per priced token.`);
  return r;
}

function textChars(content: ToolResultContent): number {
  let n = 0;
  for (const b of content) if (b.type === 'text') n += codePointLength(b.text);
  return n;
}

/** A block is oversized by its code points; its UTF-16 length bounds them, so short blocks skip the count. */
function oversized(text: string, threshold: number): boolean {
  return text.length > threshold && codePointLength(text) > threshold;
}

/** Seqs of the surface nodes that lie wholly within the newest `budget` provider tokens. */
function protectedSeqs(session: Session, budget: number, pricing: Pricing, ratio: number): Set<number> {
  const out = new Set<number>();
  const surface = session.surface;
  let total = 0;
  for (let p = surface.length - 1; p >= 0; p--) {
    const seq = surface.seqAt(p);
    total += price(`surface node ${seq}`, pricing.priceOf(seq)) * ratio;
    if (total > budget) break;
    out.add(seq);
  }
  return out;
}

/** Reads the session and says what a prune pass would do. Writes nothing. */
export function planPrune(session: Session, settings: PruneSettings, pricing: Pricing): PrunePlan {
  checkSettings(settings);
  const never = new Set(settings.neverPrune);
  const ratio = providerRatioOf(pricing);
  const recent = protectedSeqs(session, settings.protectRecentTokens, pricing, ratio);
  const callNames = new Map<string, string>();
  const targets: PruneTarget[] = [];
  const kept: Array<{ seq: number; callId: string; reason: PruneKeepReason }> = [];
  let reclaimable = 0;

  for (const seq of session.surface.seqs()) {
    const event = session.event(seq);
    if (event.type === 'assistant/message') {
      for (const call of toolCallsOf(event)) callNames.set(call.id, call.name);
      continue;
    }
    if (event.type !== 'tool/result') continue;
    const data = event.data;
    if (!data.content.some((b) => b.type === 'text' && oversized(b.text, settings.thresholdChars))) continue;

    const toolName = data.toolName ?? callNames.get(data.callId);
    if (toolName !== undefined && never.has(toolName)) {
      kept.push({ seq, callId: data.callId, reason: 'never-prune' });
      continue;
    }
    if (recent.has(seq)) {
      kept.push({ seq, callId: data.callId, reason: 'protected-recent' });
      continue;
    }

    const content = data.content.map((b) =>
      b.type === 'text' && oversized(b.text, settings.thresholdChars) ? { type: 'text' as const, text: truncateMiddle(b.text, cutSettings(settings, seq)) } : b,
    );
    const tokensBefore = price(`surface node ${seq}`, pricing.priceOf(seq));
    const tokensAfter = price(`the pruned replacement of ${seq}`, pricing.priceEvent({ type: 'tool/result', data: { ...data, content } }));
    if (tokensAfter >= tokensBefore) {
      kept.push({ seq, callId: data.callId, reason: 'no-gain' });
      continue;
    }
    reclaimable += tokensBefore - tokensAfter;
    const target: PruneTarget = {
      seq,
      callId: data.callId,
      ...(toolName !== undefined ? { toolName } : {}),
      contentBefore: data.content,
      content: Object.freeze(content.map((b) => Object.freeze(b))) as ToolResultContent,
      charsBefore: textChars(data.content),
      charsAfter: textChars(content),
      tokensBefore,
      tokensAfter,
    };
    targets.push(Object.freeze(target));
  }

  const args = planArgumentPrunes(session, settings, recent, never, {
    codePointLength,
    truncateMiddle,
    priceOf: (seq) => price(`surface node ${seq}`, pricing.priceOf(seq)),
    priceAssistant: (data) => price('an assistant message with pruned arguments', pricing.priceEvent({ type: 'assistant/message', data })),
  });
  kept.push(...args.kept);
  for (const t of args.targets) reclaimable += t.tokensBefore - t.tokensAfter;

  const keptFrozen = Object.freeze(kept.map((k) => Object.freeze(k)));
  const none = Object.freeze([]) as readonly never[];
  if (targets.length === 0 && args.targets.length === 0 && kept.every((k) => k.reason !== 'no-gain')) {
    return Object.freeze({
      targets: none,
      argumentTargets: none,
      tokensFreed: 0,
      reclaimableTokens: 0,
      kept: keptFrozen,
      skipped: 'nothing-oversized' as const,
    });
  }
  if (reclaimable === 0 || reclaimable * ratio < settings.minReclaimTokens) {
    return Object.freeze({
      targets: none,
      argumentTargets: none,
      tokensFreed: 0,
      reclaimableTokens: reclaimable,
      kept: keptFrozen,
      skipped: 'below-min-reclaim' as const,
    });
  }
  return Object.freeze({
    targets: Object.freeze(targets),
    argumentTargets: Object.freeze(args.targets),
    tokensFreed: reclaimable,
    reclaimableTokens: reclaimable,
    kept: keptFrozen,
  });
}
