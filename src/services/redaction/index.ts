/**
 * Secret redaction (docs/reliability.md): where text leaves the log — a checkpoint (and the ledger
 * inside it), a summary request, a recall answer, the eval report, `inspect --recall` — the
 * common shapes of credentials are replaced by `[REDACTED:<kind>]`. The log itself is never
 * changed (nothing is deleted: the originals stay where the session stored them); what a
 * compaction redacted is counted in its `compaction/summary` (`redacted`).
 *
 * Default patterns: provider keys (OpenAI `sk-…`, Anthropic `sk-ant-…`, GitHub `ghp_…`/
 * `github_pat_…`, AWS `AKIA…`/`ASIA…`, Slack `xox…`, Google `AIza…`), bearer/basic
 * authorization values, `*_KEY=` / `*_TOKEN=` / `*PASSWORD=` / `*SECRET=` assignments (shell,
 * env files, JSON, YAML), URL credentials (`postgres://user:pw@`), and private key blocks.
 * Each is written so that it cannot backtrack badly (bounded classes, no nested repetition).
 * Config `redaction: { enabled, patterns }` adds patterns (JavaScript regular expressions; a
 * capture group named `secret` limits the replacement to it) or turns it off.
 */

export interface RedactionSettings {
  /** Default true. false: text leaves the log as it is. */
  enabled?: boolean;
  /** Extra patterns (regular-expression sources, matched with flag `g`): the whole match, or its group `secret`, is redacted. */
  patterns?: readonly string[];
}

export interface Redacted {
  text: string;
  /** Secrets replaced. */
  count: number;
}

interface Rule {
  kind: string;
  re: RegExp;
  /** A match that is a name, a placeholder or a reference, not a secret, is kept (`at`: the match's offset in `text`). */
  keep?: (secret: string, match: string, at: number, text: string) => boolean;
}

/** Values an assignment names without holding a secret: references, placeholders, empties. */
function isReference(v: string): boolean {
  const s = v.replace(/^["'`]|["'`,;]$/g, '');
  if (s.length < 6) return true;
  if (/^[$%]|^\$\{|^<.*>$|^\{\{|^process\.env|^os\.environ|^env\(|^getenv|^\*+$|^x{4,}$|^\.\.\.|…$/i.test(s)) return true;
  if (/^(?:true|false|null|none|undefined|redacted|changeme|example|your[_-]?\w*|placeholder|secret|password|token)$/i.test(s)) return true;
  // Code, not a value: a call, a member access, an identifier in camelCase without digits.
  if (/[()]/.test(s) || /^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+$/.test(s)) return true;
  if (/^\[REDACTED/.test(s)) return true;
  // A path (a key file, a socket), not the secret itself.
  if (/^(?:~|\.{1,2})?\/[\w./@+-]*$/.test(s)) return true;
  // A secret mixes letters and digits (or is long): a plain word is a name.
  return !/\d/.test(s) && s.length < 16;
}

/** The match starts inside a word (`task-ant-…`, `xsk-…`): not a key's beginning. */
const inWord = (text: string, at: number) => at > 0 && /[A-Za-z0-9_]/.test(text[at - 1]!);

/** Needs both a letter and a digit: real keys have them; prose and identifiers mostly not. */
const mixed = (s: string) => !(/[A-Za-z]/.test(s) && /\d/.test(s));

/**
 * The name before an assignment's `KEY`/`TOKEN`/`PASSWORD`/`SECRET` (found by the suffix, then
 * read backwards: a pattern that scanned for names would try every word of the text).
 */
function nameBefore(text: string, at: number): string {
  let i = at;
  while (i > 0 && /[A-Za-z0-9_.-]/.test(text[i - 1]!) && at - i < 80) i--;
  return text.slice(i, at);
}

/** A name that holds a credential: API_KEY, APIKEY, AUTH_TOKEN, token, PGPASSWORD, CLIENT_SECRET; not monkey, key, PWD. */
function credentialName(prefix: string, suffix: string): boolean {
  const p = prefix.toUpperCase();
  const s = suffix.toUpperCase();
  if (s === 'PASSWORD' || s === 'PASSWD' || s === 'SECRET') return true;
  if (s === 'PWD') return /[_.-]$/.test(p) && !/^OLD[_.-]?$/.test(p);
  if (s === 'TOKEN') return p === '' || /[_.-]$|(?:AUTH|ACCESS|REFRESH|BEARER|API|ID|SESSION|GH|NPM)$/.test(p);
  return /[_.-]$|(?:API|ACCESS|SECRET|PRIVATE|AUTH|MASTER|SIGNING|ENCRYPTION|LICENSE)$/.test(p);
}

export const DEFAULT_RULES: readonly Rule[] = [
  {
    kind: 'private-key',
    re: /-----BEGIN ((?:[A-Z0-9]+ ){0,3})PRIVATE KEY-----[\s\S]{0,20000}?(?:-----END \1PRIVATE KEY-----|$)/g,
  },
  // A literal first, the word boundary checked after (a leading \b keeps the engine from scanning for the literal).
  { kind: 'anthropic-key', re: /sk-ant-[A-Za-z0-9_-]{20,}/g, keep: (_s, _m, at, text) => inWord(text, at) },
  { kind: 'openai-key', re: /sk-(?:proj-|live-|test-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}/g, keep: (s, _m, at, text) => inWord(text, at) || mixed(s) },
  { kind: 'github-token', re: /(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})/g, keep: (_s, _m, at, text) => inWord(text, at) },
  { kind: 'aws-access-key', re: /(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, keep: (_s, _m, at, text) => inWord(text, at) },
  { kind: 'slack-token', re: /xox[abposre]-[A-Za-z0-9-]{10,}/g, keep: (_s, _m, at, text) => inWord(text, at) },
  { kind: 'google-api-key', re: /AIza[0-9A-Za-z_-]{35}\b/g, keep: (_s, _m, at, text) => inWord(text, at) },
  { kind: 'bearer', re: /(?:Bearer|Basic|Token)\s+(?<secret>[A-Za-z0-9._~+/=-]{16,})/g, keep: (s, _m, at, text) => inWord(text, at) || !/\d/.test(s) },
  // NAME=value, NAME: value, "name": "value", export NAME='value' (the value up to a quote, space or separator).
  {
    kind: 'assignment',
    re: /(?:KEY|TOKEN|PASSWORD|PASSWD|PWD|SECRET)["']?[ \t]{0,3}(?:=|:(?!:))[ \t]{0,3}(?<secret>"[^"\s]{1,500}"|'[^'\s]{1,500}'|[^\s"'&;,)}\]]{1,500})/gi,
    keep: (secret, match, at, text) => {
      const suffix = /^(?:KEY|TOKEN|PASSWORD|PASSWD|PWD|SECRET)/i.exec(match)![0];
      return !credentialName(nameBefore(text, at), suffix) || isReference(secret);
    },
  },
  { kind: 'url-credentials', re: /:\/\/[^\s:/@]{1,100}:(?<secret>[^\s:/@]{3,200})@/gi, keep: (s) => /^\$|^\{|^\*+$|^<.*>$|^(?:password|pass|pw)$/i.test(s) },
];

const CACHE = new Map<string, Rule[]>();

function rulesFor(settings: RedactionSettings): Rule[] {
  const extra = settings.patterns ?? [];
  const key = extra.join('\u0000');
  let rules = CACHE.get(key);
  if (!rules) {
    rules = [...DEFAULT_RULES, ...extra.map((source, i) => ({ kind: `pattern-${i + 1}`, re: new RegExp(source, 'g') }))];
    CACHE.set(key, rules);
  }
  return rules;
}

/**
 * `text` with its secrets replaced by `[REDACTED:<kind>]` and how many there were. With
 * `enabled: false` the text comes back as it is (count 0).
 */
export function redactSecrets(text: string, settings: RedactionSettings = {}): Redacted {
  if (settings.enabled === false || text.length === 0) return { text, count: 0 };
  let count = 0;
  let out = text;
  for (const rule of rulesFor(settings)) {
    rule.re.lastIndex = 0;
    if (!rule.re.test(out)) continue;
    rule.re.lastIndex = 0;
    const source = out;
    out = out.replace(rule.re, (...args: unknown[]) => {
      const match = args[0] as string;
      const last = args[args.length - 1];
      const groups = typeof last === 'object' && last !== null ? (last as Record<string, string | undefined>) : undefined;
      const offset = args[groups ? args.length - 3 : args.length - 2] as number;
      const secret = groups?.secret !== undefined ? groups.secret : match;
      if (secret.length === 0 || rule.keep?.(secret, match, offset, source)) return match;
      count++;
      const mark = `[REDACTED:${rule.kind}]`;
      if (secret === match) return mark;
      // Keep what names the secret (NAME=, Bearer ), and the quotes around a quoted value.
      const at = match.lastIndexOf(secret);
      const quoted = /^(["'])[\s\S]*\1$/.test(secret) && secret.length >= 2;
      return match.slice(0, at) + (quoted ? `${secret[0]}${mark}${secret[0]}` : mark) + match.slice(at + secret.length);
    });
  }
  return { text: out, count };
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
