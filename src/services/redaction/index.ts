/**
 * Secret redaction (docs/reliability.md): where text leaves the log — a checkpoint (and the ledger
 * inside it), a summary request, a recall answer, the eval report, `inspect --recall` — the
 * common shapes of credentials are replaced by `[REDACTED:<kind>]`. The log itself is never
 * changed (nothing is deleted: the originals stay where the session stored them); what a
 * compaction redacted is counted in its `compaction/summary` (`redacted`).
 *
 * The default rules are in rules.ts (provider, cloud and chat tokens, JWTs, private key blocks
 * of every label, values given a credential's name), the judgments about names and values in
 * values.ts. Config `redaction: { enabled, patterns }` adds patterns (JavaScript regular
 * expressions; a capture group named `secret` limits the replacement to it) or turns it off.
 * Code that shows a window of a text redacts the whole text first (redactForExcerpt): a secret
 * is redacted whole or not shown, never cut.
 */
import { DEFAULT_RULES, type Rule } from './rules';

export interface RedactionSettings {
  /** Default true. false: text leaves the log as it is. */
  enabled?: boolean;
  /** Extra patterns (regular-expression sources, matched with flags `gd`): the whole match, or its group `secret`, is redacted. */
  patterns?: readonly string[];
}

export { DEFAULT_RULES, type Rule } from './rules';
export { looksGenerated, nameWeight, type NameWeight } from './values';

export interface Redacted {
  text: string;
  /** Secrets replaced. */
  count: number;
}

/** One secret in a text: `[start, end)` is replaced by `[REDACTED:<kind>]`. */
export interface SecretSpan {
  start: number;
  end: number;
  kind: string;
}

const CACHE = new Map<string, Rule[]>();

function rulesFor(settings: RedactionSettings): Rule[] {
  const extra = settings.patterns ?? [];
  const key = extra.join('\u0000');
  let rules = CACHE.get(key);
  if (!rules) {
    rules = [...DEFAULT_RULES, ...extra.map((source, i) => ({ kind: `pattern-${i + 1}`, re: new RegExp(source, 'gd') }))];
    CACHE.set(key, rules);
  }
  return rules;
}

/**
 * Where the secrets of `text` are, in order, none overlapping. Every rule reads the original
 * text (a rule never sees another's mark); where two rules find overlapping secrets the span
 * is their union, named by the earlier rule: whatever any rule took for a secret is covered.
 */
export function findSecrets(text: string, settings: RedactionSettings = {}): SecretSpan[] {
  if (settings.enabled === false || text.length === 0) return [];
  const spans: SecretSpan[] = [];
  const add = (start: number, end: number, kind: string) => {
    if (end <= start) return;
    let merged: SecretSpan = { start, end, kind };
    for (let i = spans.length - 1; i >= 0; i--) {
      const s = spans[i]!;
      if (s.end <= merged.start || s.start >= merged.end) continue;
      merged = { start: Math.min(s.start, merged.start), end: Math.max(s.end, merged.end), kind: s.kind };
      spans.splice(i, 1);
    }
    spans.push(merged);
  };
  for (const rule of rulesFor(settings)) {
    if (rule.find) {
      for (const [a, b] of rule.find(text)) add(a, b, rule.kind);
      continue;
    }
    const re = rule.re!;
    re.lastIndex = 0;
    if (!re.test(text)) continue;
    re.lastIndex = 0;
    for (const m of text.matchAll(re)) {
      const group = m.indices?.groups?.['secret'];
      const secret = group ? m.groups!['secret']! : m[0];
      if (secret.length === 0 || rule.keep?.(secret, m[0], m.index, text)) continue;
      let [a, b] = group ?? [m.index, m.index + m[0].length];
      // A quoted value keeps its quotes: the reader still sees where it was.
      if (secret.length >= 2 && /^(["'])[\s\S]*\1$/.test(secret)) [a, b] = [a + 1, b - 1];
      add(a, b, rule.kind);
    }
  }
  return spans.sort((x, y) => x.start - y.start);
}

const mark = (kind: string) => `[REDACTED:${kind}]`;

function apply(text: string, spans: readonly SecretSpan[]): string {
  let out = '';
  let at = 0;
  for (const s of spans) {
    out += text.slice(at, s.start) + mark(s.kind);
    at = s.end;
  }
  return out + text.slice(at);
}

/**
 * `text` with its secrets replaced by `[REDACTED:<kind>]` and how many there were. With
 * `enabled: false` the text comes back as it is (count 0).
 */
export function redactSecrets(text: string, settings: RedactionSettings = {}): Redacted {
  const spans = findSecrets(text, settings);
  return spans.length === 0 ? { text, count: 0 } : { text: apply(text, spans), count: spans.length };
}

/** A redacted text that can say where an offset of the original went. */
export interface RedactedMap extends Redacted {
  /**
   * The offset in `text` of the original's `offset`. One inside a secret goes to the start of
   * its mark (`side: 'start'`) or past its end (`'end'`): a window cut there holds all of the
   * mark or none of it, and never a piece of the secret.
   */
  at(offset: number, side: 'start' | 'end'): number;
}

/**
 * Redacts the whole of `text` first, for code that then shows a window of it (an excerpt):
 * a secret that the window's edge would cut is already gone, so no `…` can turn part of one
 * into something that passes for a placeholder.
 */
export function redactForExcerpt(text: string, settings: RedactionSettings = {}): RedactedMap {
  const spans = findSecrets(text, settings);
  if (spans.length === 0) return { text, count: 0, at: (offset) => offset };
  return {
    text: apply(text, spans),
    count: spans.length,
    at(offset, side) {
      let shift = 0;
      for (const s of spans) {
        if (offset <= s.start) break;
        const len = mark(s.kind).length;
        if (offset < s.end) return s.start + shift + (side === 'start' ? 0 : len);
        shift += len - (s.end - s.start);
      }
      return offset + shift;
    },
  };
}

/** True when `source` compiles as a redaction pattern (for the config's validation). */
export function isRedactionPattern(source: string): boolean {
  try {
    new RegExp(source, 'g');
    return true;
  } catch {
    return false;
  }
}

/**
 * A copy of `value` with every string in it redacted (objects and arrays copied where a string
 * inside changed; the rest shared): for messages and events on their way to a summarizer.
 */
export function redactDeep<T>(value: T, settings: RedactionSettings = {}): { value: T; count: number } {
  if (settings.enabled === false) return { value, count: 0 };
  let count = 0;
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') {
      const r = redactSecrets(v, settings);
      count += r.count;
      return r.count > 0 ? r.text : v;
    }
    if (Array.isArray(v)) {
      let changed = false;
      const out = v.map((x) => {
        const y = walk(x);
        if (y !== x) changed = true;
        return y;
      });
      return changed ? out : v;
    }
    if (v !== null && typeof v === 'object') {
      let changed = false;
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        const y = walk(x);
        if (y !== x) changed = true;
        out[k] = y;
      }
      return changed ? out : v;
    }
    return v;
  };
  const out = walk(value) as T;
  return { value: out, count };
}
