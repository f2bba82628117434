/**
 * The token meter's fold, saved with the log so a reopen does not tokenize it again (docs/sessions-and-stores.md#reopening-a-long-session).
 *
 * Why a snapshot and not lazy pricing: the figure is not only "the last report + what was
 * appended since". Every report is checked against our calibrated estimate of the whole request
 * (docs/spec.md#12-measuring-for-a-provider-whose-tokenizer-we-do-not-have: suspect usage) and feeds the calibration fold and the provider ledger, and a
 * measurement checks the anchored figure against the whole-surface estimate again; so every
 * node's price is needed as of every report, and replaying the fold needs all of them. Prices
 * are a pure function of (tokenizer, content), and the rest of the fold is a pure function of
 * the prices and the log, so the fold's state after N events is a pure function of the first N
 * events and of which tokenizer each route resolves to. Saved with those N events' bytes (the
 * store checks them: stores/jsonl-snapshot.ts) and checked here against this process's
 * tokenizers, restoring it gives exactly the figures a fold from the first event gives; anything
 * that does not check out is ignored and the log is folded from its first event as before.
 *
 * What is checked before it is trusted: the format, the shape of every field, that each route
 * (and the start, before any header) resolves to the tokenizer it resolved to then, the current
 * tokenizer's name and overhead, the tool list of the last header, that the prices add up to
 * the saved total, and a spread sample of node prices and text counts (and of shadowed nodes'
 * prices) priced again (so a tokenizer whose counts changed under the same name
 * is caught). A reader that cannot load a tokenizer ignores the snapshot.
 */
import type { SessionEvent, SurfaceEvent } from '../../session/events';
import { isSurfaceType } from '../../session/events';
import type { Session } from '../../session/session';
import type { NodeCounts } from './calibration';
import { priceNode } from './pricing';
import { tokenizerId, type Tokenizer } from './tokenizer';

/** Bump when pricing or the fold changes: an older snapshot is then ignored, never misread. */
export const METER_SNAPSHOT_VERSION = 2;

/** Nodes priced again to check a snapshot (spread over the surface, the newest included). */
export const SPOT_CHECKS = 24;

/** The meter's anchor: the last provider report its figure starts from. */
export interface MeterAnchorState {
  seq: number;
  providerTokens: number;
  /** Surface total right after the anchoring assistant message was folded. */
  surfaceAtAnchor: number;
  /** The route that counted it: growth to the next report calibrates only that route. */
  route: string;
  /** False once a replace moved the surface: the growth to the next report is no clean sample. */
  clean: boolean;
  /** Nodes appended since, by kind: the provider frames each message its own way. */
  added: NodeCounts;
  /**
   * Provider tokens per priced token of the request the report counted (its prompt ÷ our price of
   * that request): how the provider counts this conversation's text, before any calibration.
   */
  shown: number;
}

export interface MeterState {
  format: 'xcompact-meter';
  version: number;
  /** Events folded: the snapshot describes the log's first `folded` events. */
  folded: number;
  /** Tokenizer before any header: its id (tokenizerId; the `server` tokenizer's names its endpoint and model). */
  initial: string;
  /** Per route seen: the first header routing to it and the tokenizer it resolved to. */
  routes: Array<[string, number, string]>;
  /** The last folded header (its tokenizer and tool list are current), null before any. */
  headerSeq: number | null;
  tokenizer: string;
  /** JSON of the current tokenizer's overhead: framing constants are part of every price. */
  overhead: string;
  /** Current surface nodes: seq, price, counts of its texts. */
  seqs: number[];
  prices: number[];
  counts: number[][];
  /** Shadowed nodes' prices, flat: seq, price, seq, price … */
  shadowed: number[];
  surfaceTotal: number;
  envelope: number;
  toolsJson: string | null;
  toolsTokens: number;
  anchor: MeterAnchorState | null;
  /** Surface nodes no provider report has counted yet (appended since the last one), by seq. */
  unreported: number[];
  route: string;
  suspectSeq: number | null;
  calibration: unknown;
  ledger: unknown;
}

const isInt = (v: unknown): v is number => Number.isSafeInteger(v);
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** The state in `payload` if it has the right shape for `events` events; undefined otherwise. */
export function decodeMeterState(payload: string, events: number): MeterState | undefined {
  let s: MeterState;
  try {
    s = JSON.parse(payload) as MeterState;
  } catch {
    return undefined;
  }
  if (s === null || typeof s !== 'object' || s.format !== 'xcompact-meter' || s.version !== METER_SNAPSHOT_VERSION) return undefined;
  if (s.folded !== events || !isInt(s.folded) || typeof s.initial !== 'string' || typeof s.tokenizer !== 'string' || typeof s.overhead !== 'string')
    return undefined;
  if (
    !Array.isArray(s.routes) ||
    !s.routes.every((r) => Array.isArray(r) && typeof r[0] === 'string' && isInt(r[1]) && r[1] < events && typeof r[2] === 'string')
  )
    return undefined;
  if (s.headerSeq !== null && !(isInt(s.headerSeq) && s.headerSeq < events)) return undefined;
  const n = Array.isArray(s.seqs) ? s.seqs.length : -1;
  if (n < 0 || !Array.isArray(s.prices) || s.prices.length !== n || !Array.isArray(s.counts) || s.counts.length !== n) return undefined;
  for (let i = 0; i < n; i++) {
    const c = s.counts[i];
    if (!isInt(s.seqs[i]) || s.seqs[i]! >= events || s.seqs[i]! < 0 || !isNum(s.prices[i]) || !Array.isArray(c) || !c.every(isNum)) return undefined;
  }
  if (!Array.isArray(s.shadowed) || s.shadowed.length % 2 !== 0) return undefined;
  for (let i = 0; i < s.shadowed.length; i += 2) if (!isInt(s.shadowed[i]) || s.shadowed[i]! >= events || !isNum(s.shadowed[i + 1])) return undefined;
  if (!isNum(s.surfaceTotal) || !isNum(s.envelope) || !isNum(s.toolsTokens) || (s.toolsJson !== null && typeof s.toolsJson !== 'string')) return undefined;
  if (typeof s.route !== 'string' || (s.suspectSeq !== null && !isInt(s.suspectSeq))) return undefined;
  const a = s.anchor;
  if (a !== null) {
    if (typeof a !== 'object' || !isInt(a.seq) || !isNum(a.providerTokens) || !isNum(a.surfaceAtAnchor) || typeof a.route !== 'string') return undefined;
    if (typeof a.clean !== 'boolean' || !Array.isArray(a.added) || !a.added.every(isInt) || !isNum(a.shown)) return undefined;
  }
  if (!Array.isArray(s.unreported) || !s.unreported.every((q) => isInt(q) && q < events)) return undefined;
  return s;
}

/** Indices of `n` entries to price again: spread evenly, the last one included. */
export function spotCheckIndices(n: number): number[] {
  if (n <= SPOT_CHECKS) return Array.from({ length: n }, (_, i) => i);
  const out = new Set<number>();
  for (let k = 0; k < SPOT_CHECKS; k++) out.add(Math.round((k * (n - 1)) / (SPOT_CHECKS - 1)));
  return [...out];
}

type Header = SessionEvent<'request/header'>;

/**
 * Does `s` describe this log as this process would fold it? The tokenizer to continue with
 * if so; undefined if anything differs or cannot be checked (a tokenizer that does not load).
 */
export function checkMeterState(s: MeterState, session: Session, tokenizerFor: (h: Header | undefined) => Tokenizer): Tokenizer | undefined {
  try {
    const headerAt = (seq: number): Header | undefined => {
      const e = session.event(seq);
      return e.type === 'request/header' ? e : undefined;
    };
    if (tokenizerId(tokenizerFor(undefined)) !== s.initial) return undefined;
    for (const [route, seq, name] of s.routes) {
      const h = headerAt(seq);
      if (!h || `${h.data.provider}/${h.data.model}` !== route || tokenizerId(tokenizerFor(h)) !== name) return undefined;
    }
    const header = s.headerSeq === null ? undefined : headerAt(s.headerSeq);
    if (s.headerSeq !== null && !header) return undefined;
    const t = tokenizerFor(header);
    if (tokenizerId(t) !== s.tokenizer || JSON.stringify(t.overhead) !== s.overhead) return undefined;
    const json = header === undefined ? null : header.data.tools.length === 0 ? '' : JSON.stringify(header.data.tools);
    if (json !== s.toolsJson) return undefined;
    if (json && t.count(json) + (t.overhead.perBlock ?? 0) !== s.toolsTokens) return undefined;
    let sum = 0;
    for (const p of s.prices) sum += p;
    if (sum !== s.surfaceTotal) return undefined;
    // With nothing appended since, the surface it priced is the surface now.
    if (s.folded === session.length) {
      const surface = session.surface;
      if (surface.length !== s.seqs.length || !s.seqs.every((q) => surface.positionOf(q) !== undefined)) return undefined;
    }
    for (const i of spotCheckIndices(s.seqs.length)) {
      const e = session.event(s.seqs[i]!);
      if (!isSurfaceType(e.type)) return undefined;
      const counts: number[] = [];
      if (priceNode(t, e as SurfaceEvent, counts) !== s.prices[i] || counts.join() !== s.counts[i]!.join()) return undefined;
    }
    for (const i of spotCheckIndices(s.shadowed.length / 2)) {
      const e = session.event(s.shadowed[2 * i]!);
      if (!isSurfaceType(e.type) || priceNode(t, e as SurfaceEvent) !== s.shadowed[2 * i + 1]) return undefined;
    }
    return t;
  } catch {
    return undefined;
  }
}
