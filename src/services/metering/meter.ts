/**
 * TokenMeter: the request's size in tokens, kept up to date incrementally.
 *
 * Each surface node is priced once, from the message that is actually sent (so the
 * estimate measures what the serializer produces), and cached by seq. A measurement folds
 * only the events appended since the previous one: an append adds its node's price, a
 * replace subtracts the shadowed nodes and adds the new one. Nothing copies the surface.
 *
 * Pressure is anchored to the provider: after a response that reported usage, the total
 * is that usage plus the priced growth since (appends add, replaces subtract their signed
 * delta), in the provider's tokens (see calibration.ts: the learned ratio of the provider's
 * counts to ours, plus its framing per appended message). The anchor is dropped when the
 * request can no longer be compared with the one the provider counted: a changed system
 * prompt, tool list or tokenizer. A replace (a prune, a checkpoint) carries it by what the
 * provider counted for the nodes that left (provider-ledger.ts), not by our price of them: a
 * compaction removes most of the request, and a ratio error on what left would land whole on
 * the little that stays.
 *
 * Which request a report counts, and when a report is suspect: measurement.ts.
 */
import type { SessionEvent, SurfaceEvent } from '../../session/events';
import { isSurfaceType } from '../../session/events';
import type { Session } from '../../session/session';
import { CalibrationState, countNode, emptyCounts, modelKey } from './calibration';
import { checkMeterState, decodeMeterState, METER_SNAPSHOT_VERSION, type MeterAnchorState, type MeterState } from './snapshot';
import { ProviderLedger } from './provider-ledger';
import { priceNode, priceSurface } from './pricing';
import { ProvisionalPrices } from './provisional';
import { tokenizerId, type Tokenizer } from './tokenizer';
import {
  isSuspect,
  measurementOf,
  nextContext,
  reportedSurface,
  type Measurement,
  type NodePrices,
  type TokenMeterOptions,
  type RequestSurface,
} from './measurement';

/** The anchor (the last clean provider report); its fields are documented where the snapshot saves it. */
type Anchor = MeterAnchorState;

export class TokenMeter implements NodePrices {
  private readonly prices = new Map<number, number>();
  /** Per priced node, the count of each text in `textsOfMessage` order (for reuse by summaries). */
  private readonly textCounts = new Map<number, number[]>();
  /** Prices of nodes a replace took off the surface, with the current tokenizer (see shadowedPriceOf). */
  private readonly shadowed = new Map<number, number>();
  private folded = 0;
  private surfaceTotal = 0;
  private envelope = 0;
  private toolsJson: string | undefined;
  /** Token count of `toolsJson` with `tokenizer`, kept so an unchanged envelope is not recounted per header. */
  private toolsTokens = 0;
  private anchor: Anchor | undefined;
  private tokenizer: Tokenizer;
  private calibration = new CalibrationState();
  private ledger = new ProviderLedger();
  /** Per route: the first header routing to it and the tokenizer it resolved to (a snapshot checks them). */
  private readonly routeTokenizers = new Map<string, [number, string]>();
  /** The last folded header, if any. */
  private headerSeq: number | undefined;
  /** The saved fold is looked at once, before the first event is folded (see restore). */
  private restoreTried = false;
  /** This meter saves the fold at close (the first meter of the session to fold). */
  private producer = false;
  /** Events the restored snapshot covered: closing with nothing folded since saves nothing. */
  private restoredAt: number | undefined;
  /** provider/model of the latest request header ('' before any). */
  private route = '';
  /** Seq of the latest report refused as suspect, until a report anchors again. */
  private suspectSeq: number | undefined;
  /** Surface nodes appended since the latest report (no provider count covers them), with their prices. */
  private readonly unreported = new Map<number, number>();
  private unreportedTotal = 0;
  /** The surface the latest request/header's request had, until its report (see measurement.ts). */
  private requested: RequestSurface | undefined;
  /** Nodes priced with a stand-in count (provisional.ts; the options may share it with a prefetch). */
  private readonly provisional: ProvisionalPrices;
  /**
   * Appends folded but not yet priced: priced together before anything reads a price (a report,
   * a replace, a header that keeps the tokenizer, the end of the fold), or by a header that
   * changes the tokenizer, which prices the whole surface anyway. So the history a first call
   * records before its first request header is priced once, with that header's tokenizer, not
   * once with the default and again with the route's.
   */
  private unpriced: SurfaceEvent[] = [];

  constructor(
    private readonly session: Session,
    private readonly options: TokenMeterOptions,
  ) {
    this.tokenizer = options.tokenizerFor(undefined);
    this.provisional = options.provisional ?? new ProvisionalPrices();
    this.envelope = this.tokenizer.overhead.perRequest;
  }

  get length(): number {
    this.fold();
    return this.session.surface.length;
  }

  priceAt(position: number): number {
    return this.priceOf(this.session.surface.seqAt(position));
  }

  priceOf(seq: number): number {
    this.fold();
    const p = this.prices.get(seq);
    if (p === undefined) throw new RangeError(`seq ${seq} is not a priced surface node`);
    return p;
  }

  /**
   * Price of a node that is not (yet) on the surface, e.g. a checkpoint or a pruned result,
   * with the tokenizer of the latest request header (headers appended since the last
   * measurement are folded first).
   */
  priceEvent(event: Pick<SurfaceEvent, 'type' | 'data'>): number {
    this.fold();
    return priceNode(this.tokenizer, event);
  }

  /** Price of a text sent as one user message (what a checkpoint costs). */
  priceUserText(text: string): number {
    return this.priceEvent({ type: 'user/message', data: { content: [{ type: 'text', text }] } });
  }

  /**
   * Counts of the texts of a current surface node with the current tokenizer, as they were
   * priced: `textsOfMessage(message)[i]` has count `[i]`. A summary request reads them instead of
   * counting the span again.
   */
  textCountsOf(seq: number): readonly number[] | undefined {
    this.fold();
    return this.textCounts.get(seq);
  }

  /**
   * The price a node had when a replace took it off the surface: what pricing it again gives,
   * since a tokenizer change forgets them all. Lets a fold over the whole log (the session's
   * pace, weigh.ts) read shadowed nodes without tokenizing them again after a reopen.
   */
  shadowedPriceOf(seq: number): number | undefined {
    this.fold();
    return this.shadowed.get(seq);
  }

  /** Token count of a plain text with the current tokenizer. */
  countText(text: string): number {
    this.fold();
    return this.tokenizer.count(text);
  }

  get currentTokenizer(): Tokenizer {
    this.fold();
    return this.tokenizer;
  }

  /** Provider tokens per priced token for the current route (NodePrices). */
  get providerRatio(): number {
    this.fold();
    return this.calibration.ratio(this.route);
  }

  measure(): Measurement {
    this.fold();
    const { envelope, surfaceTotal, calibration, route, anchor, folded } = this;
    return measurementOf({
      envelope,
      surfaceTotal,
      calibration,
      route,
      anchor,
      unreported: this.unreportedTotal,
      folded,
      prices: this,
      tokenizer: this.tokenizer.name,
      suspect: this.suspectSeq !== undefined,
      fallbackNodes: this.provisional.size,
    });
  }

  /**
   * A provider's count of the request it just refused as too long (an overflow error's own
   * figure: llama.cpp's n_prompt_tokens, OpenAI's "resulted in N tokens"): anchors and
   * calibrates at once, as a report would, so recovery judges what fits in the provider's
   * tokens. Not in the log: it holds until the next report, and a reopened session forgets it.
   */
  observePromptCount(promptTokens: number): void {
    this.fold();
    if (!Number.isFinite(promptTokens) || promptTokens <= 0 || this.folded === 0) return;
    this.foldReport(this.folded - 1, { promptTokens: Math.round(promptTokens), completionTokens: 0 });
  }

  // -------------------------------------------------------------------------

  private fold(): void {
    if (!this.restoreTried) {
      this.restoreTried = true;
      this.restore();
    }
    const end = this.session.length;
    while (this.folded < end) {
      const e = this.session.event(this.folded);
      if (e.type === 'request/header') this.foldHeader(e);
      else if (isSurfaceType(e.type)) this.foldSurface(e as SurfaceEvent);
      // Counted only once folded: an event whose fold threw (tokenizerFor could not load a
      // tokenizer) is retried by the next measurement instead of being skipped for good.
      this.folded++;
    }
    this.priceUnpriced();
  }

  private priceUnpriced(): void {
    if (this.unpriced.length === 0) return;
    const appends = this.unpriced;
    this.unpriced = [];
    for (const e of appends) {
      const counts: number[] = [];
      const price = this.provisional.price(this.tokenizer, e.seq, e, counts);
      this.textCounts.set(e.seq, counts);
      this.prices.set(e.seq, price);
      this.surfaceTotal += price;
    }
  }

  /** The meter holds the session: serialising a measurement must not dump the whole log. */
  toJSON(): { nodes: number; providerRatio: number } {
    return { nodes: this.length, providerRatio: this.providerRatio };
  }

  private foldHeader(e: SessionEvent<'request/header'>): void {
    const next = this.options.tokenizerFor(e);
    const route = modelKey(e.data.provider, e.data.model);
    if (!this.routeTokenizers.has(route)) this.routeTokenizers.set(route, [e.seq, tokenizerId(next)]);
    this.headerSeq = e.seq;
    if (route !== this.route && this.route !== '') this.ledger.reset();
    this.route = route;
    const retokenized = tokenizerId(next) !== tokenizerId(this.tokenizer);
    if (retokenized) {
      this.tokenizer = next;
      // The unpriced appends are on the surface: reprice() prices them with the new tokenizer.
      this.unpriced = [];
      this.reprice();
    } else this.priceUnpriced();
    const json = e.data.tools.length === 0 ? '' : JSON.stringify(e.data.tools);
    const changed = json !== this.toolsJson;
    if (changed) {
      if (this.toolsJson !== undefined) this.anchor = undefined;
      this.ledger.interrupt();
      this.toolsJson = json;
    }
    if (changed || retokenized) {
      // The tool list is priced as one block (docs/spec.md#2-token-measurement heuristic: ceil(JSON(tools)/4) + 4).
      const t = this.tokenizer;
      this.toolsTokens = json === '' ? 0 : this.provisional.countTools(t, json) + (t.overhead.perBlock ?? 0);
    }
    this.envelope = this.tokenizer.overhead.perRequest + this.toolsTokens;
    this.requested = { surfaceTotal: this.surfaceTotal, replaced: false, providerDelta: 0 };
  }

  private foldSurface(e: SurfaceEvent): void {
    const reports = e.type === 'assistant/message' && e.data.usage !== undefined && e.data.usage.promptTokens > 0;
    if (e.surfaceOp === 'append' && !reports && !this.anchor) {
      // With no anchor, an append only adds its price: priced later, once (see `unpriced`).
      this.unpriced.push(e);
      this.ledger.appended(e.seq);
      return;
    }
    this.priceUnpriced();
    const counts: number[] = [];
    const price = this.provisional.price(this.tokenizer, e.seq, e, counts);
    this.textCounts.set(e.seq, counts);
    if (e.surfaceOp === 'append') {
      // A prompt of 0 tokens is no measurement: agents record all-zero usage on an aborted
      // response (pi does), and anchoring on it would report the context as nearly empty. The
      // previous anchor stays valid: this message's price is part of the growth since.
      const reports = e.type === 'assistant/message' && e.data.usage !== undefined && e.data.usage.promptTokens > 0;
      if (reports) this.foldReport(e.seq, e.data.usage!);
      // The reply itself is counted too (its completion): only what comes after it is unreported.
      else this.addUnreported(e.seq, price);
      this.prices.set(e.seq, price);
      this.surfaceTotal += price;
      this.ledger.appended(e.seq);
      if (this.anchor?.seq === e.seq) this.anchor.surfaceAtAnchor = this.surfaceTotal;
      else if (this.anchor) countNode(this.anchor.added, e);
      return;
    }
    // A replace: the session recorded which nodes it shadowed. The anchor survives a prune or
    // a checkpoint, rebased on the figure just before it minus what the provider counted for
    // the nodes that left (nodes since the last report: our price × the growth ratio, as they
    // were added) plus the new node at the same provider/priced ratio as what it replaces (a
    // pruned result, or a summary of them), so a replace that shrinks the request in our
    // prices shrinks the figure too.
    const a = this.anchor;
    const sinceAnchor = a ? this.surfaceTotal - a.surfaceAtAnchor : 0;
    const grown = a ? this.calibration.predict(this.route, sinceAnchor, a.added) : 0;
    const ratio = this.calibration.ratio(this.route);
    let removed = 0;
    let removedPriced = 0;
    for (const s of this.session.surface.shadowedBy(e.seq) ?? []) {
      const p = this.prices.get(s) ?? 0;
      this.dropUnreported(s);
      removed += this.ledger.take(s) ?? p * ratio;
      removedPriced += p;
      this.surfaceTotal -= p;
      if (this.prices.has(s)) this.shadowed.set(s, p);
      this.prices.delete(s);
      this.textCounts.delete(s);
      this.provisional.forget(s);
    }
    this.prices.set(e.seq, price);
    this.surfaceTotal += price;
    this.ledger.interrupt();
    const entered = price * (removedPriced > 0 ? removed / removedPriced : ratio);
    if (this.requested) {
      // A replace while a request is open (a background commit): its report counts what left.
      this.requested.replaced = true;
      this.requested.providerDelta += entered - removed;
    }
    if (a) {
      a.providerTokens = Math.round(a.providerTokens + grown - removed + entered);
      a.surfaceAtAnchor = this.surfaceTotal;
      a.added = emptyCounts();
      a.clean = false;
      this.provisional.rebasedAt = e.seq;
    }
    // A new system prompt is an envelope change: the provider's figure no longer applies.
    if (e.type === 'system/message') this.anchor = undefined;
  }

  private addUnreported(seq: number, price: number): void {
    this.unreported.set(seq, price);
    this.unreportedTotal += price;
  }

  private dropUnreported(seq: number): void {
    const p = this.unreported.get(seq);
    if (p === undefined) return;
    this.unreported.delete(seq);
    this.unreportedTotal -= p;
  }

  /**
   * A provider report, folded before its own message is priced (the prompt it counts is the
   * surface as it is now). A clean growth since the previous anchor on the same route is a
   * calibration sample; a suspect report is refused (see the file comment).
   */
  private foldReport(seq: number, u: NonNullable<SessionEvent<'assistant/message'>['data']['usage']>): void {
    const ratio = this.calibration.ratio(this.route);
    const calibrated = Math.round((this.envelope + this.surfaceTotal) * ratio);
    const requested = this.requested;
    this.requested = undefined;
    const counted = reportedSurface(
      u.promptTokens,
      calibrated,
      requested && { ...requested, calibrated: Math.round((this.envelope + requested.surfaceTotal) * ratio) },
    );
    if (isSuspect(u.promptTokens, counted === 'current' ? calibrated : Math.round((this.envelope + requested!.surfaceTotal) * ratio))) {
      this.suspectSeq = seq;
      return;
    }
    // The prompt counts every node on the surface now (or at the header, which holds them too).
    const shown = u.promptTokens / Math.max(1, this.envelope + (counted === 'current' ? this.surfaceTotal : requested!.surfaceTotal));
    this.unreported.clear();
    this.unreportedTotal = 0;
    // Counted at the request's header, before a background commit: carried across it like an
    // anchor; no calibration sample, nothing for the ledger.
    if (counted === 'at-header') {
      this.ledger.interrupt();
      this.anchor = {
        seq,
        providerTokens: Math.round(nextContext(u) + requested!.providerDelta),
        surfaceAtAnchor: this.surfaceTotal,
        route: this.route,
        clean: false,
        added: emptyCounts(),
        shown,
      };
      this.suspectSeq = undefined;
      return;
    }
    const a = this.anchor;
    if (a && a.clean && a.route === this.route)
      this.calibration.add(this.route, u.promptTokens - a.providerTokens, this.surfaceTotal - a.surfaceAtAnchor, a.added);
    this.ledger.report(this.route, u.promptTokens, this.envelope + this.surfaceTotal, (s) => this.prices.get(s));
    this.anchor = { seq, providerTokens: nextContext(u), surfaceAtAnchor: this.surfaceTotal, route: this.route, clean: true, added: emptyCounts(), shown };
    this.suspectSeq = undefined;
  }

  /** The fold as a snapshot payload, when there is something new to save (see meter-snapshot.ts). */
  private snapshot(): string | undefined {
    // A meter that never measured leaves the log as it found it: pricing it all at close would only move the cost.
    if (!this.producer) return undefined;
    this.fold();
    if (this.restoredAt === this.folded) return undefined;
    return this.state();
  }

  /** The fold so far, as a snapshot payload (meter-snapshot.ts). */
  private state(): string {
    const seqs = [...this.prices.keys()];
    const a = this.anchor;
    const state: MeterState = {
      format: 'xcompact-meter',
      version: METER_SNAPSHOT_VERSION,
      folded: this.folded,
      initial: tokenizerId(this.options.tokenizerFor(undefined)),
      routes: [...this.routeTokenizers].map(([route, [seq, name]]) => [route, seq, name]),
      headerSeq: this.headerSeq ?? null,
      tokenizer: tokenizerId(this.tokenizer),
      overhead: JSON.stringify(this.tokenizer.overhead),
      seqs,
      prices: seqs.map((q) => this.prices.get(q)!),
      counts: seqs.map((q) => this.textCounts.get(q) ?? []),
      shadowed: [...this.shadowed].flat(),
      surfaceTotal: this.surfaceTotal,
      envelope: this.envelope,
      toolsJson: this.toolsJson ?? null,
      toolsTokens: this.toolsTokens,
      anchor: a ? { ...a, added: [...a.added] } : null,
      unreported: [...this.unreported.keys()],
      route: this.route,
      suspectSeq: this.suspectSeq ?? null,
      calibration: this.calibration.toState(),
      ledger: this.ledger.toState(),
    };
    return JSON.stringify(state);
  }

  /**
   * Takes over the fold saved with the log, if it checks out against the log and this
   * process's tokenizers (see meter-snapshot.ts); otherwise leaves the meter as it is, to fold
   * from the first event.
   */
  private restore(): void {
    const claim = this.session.claimSnapshot(
      () => this.snapshot(),
      this.options.weak
        ? {
            handover: () => {
              this.fold();
              return { events: this.folded, payload: this.state() };
            },
          }
        : {},
    );
    if (!claim) return;
    this.producer = true;
    const stored = claim.stored;
    if (!stored || stored.events > this.session.length) return;
    const s = decodeMeterState(stored.payload, stored.events);
    if (!s) return;
    const calibration = new CalibrationState();
    const ledger = new ProviderLedger();
    if (!calibration.fromState(s.calibration) || !ledger.fromState(s.ledger)) return;
    const tokenizer = checkMeterState(s, this.session, this.options.tokenizerFor);
    if (!tokenizer) return;
    this.restoredAt = s.folded;
    this.applyState(s, tokenizer, calibration, ledger);
  }

  private applyState(s: MeterState, tokenizer: Tokenizer, calibration: CalibrationState, ledger: ProviderLedger): void {
    for (let i = 0; i < s.seqs.length; i++) {
      this.prices.set(s.seqs[i]!, s.prices[i]!);
      this.textCounts.set(s.seqs[i]!, s.counts[i]!);
    }
    for (let i = 0; i < s.shadowed.length; i += 2) this.shadowed.set(s.shadowed[i]!, s.shadowed[i + 1]!);
    for (const [route, seq, name] of s.routes) this.routeTokenizers.set(route, [seq, name]);
    this.tokenizer = tokenizer;
    this.folded = s.folded;
    this.headerSeq = s.headerSeq ?? undefined;
    this.surfaceTotal = s.surfaceTotal;
    this.envelope = s.envelope;
    this.toolsJson = s.toolsJson ?? undefined;
    this.toolsTokens = s.toolsTokens;
    this.anchor = s.anchor ? { ...s.anchor, added: [...s.anchor.added] } : undefined;
    for (const q of s.unreported) this.addUnreported(q, this.prices.get(q) ?? 0);
    this.route = s.route;
    this.suspectSeq = s.suspectSeq ?? undefined;
    this.calibration = calibration;
    this.ledger = ledger;
  }

  private reprice(): void {
    this.shadowed.clear();
    this.anchor = undefined;
    this.ledger.interrupt();
    const before = this.tokenizer.fallbacks?.();
    this.surfaceTotal = priceSurface(this.session, this.tokenizer, this.folded, this.prices, this.textCounts);
    this.provisional.markAll(this.tokenizer, before, this.prices.keys());
  }

  /** Prices again what a stand-in count priced (provisional.ts), e.g. after the server's counts came in. */
  refreshPrices(): number {
    this.fold();
    const t = this.tokenizer;
    const r = this.provisional.refresh(t, this.session, this.prices, this.textCounts, {
      anchor: this.anchor,
      requested: this.requested,
      headerSeq: this.headerSeq ?? -1,
    });
    this.surfaceTotal += r.delta;
    if (this.provisional.tools && this.toolsJson) this.toolsTokens = this.provisional.countTools(t, this.toolsJson) + (t.overhead.perBlock ?? 0);
    this.envelope = t.overhead.perRequest + this.toolsTokens;
    return r.changed;
  }
}
