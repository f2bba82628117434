/**
 * The default redaction rules: what a credential looks like. Three families:
 *
 * - tokens a provider marks with a prefix (OpenAI `sk-…`, Anthropic `sk-ant-…`, GitHub `ghp_…`,
 *   GitLab `glpat-…`, Slack `xoxb-…`, Stripe `sk_live_…`, AWS `AKIA…`, Google `AIza…`,
 *   HuggingFace `hf_…`, npm `npm_…`, JWTs `eyJ….eyJ….…`, and the others below): redacted
 *   wherever they stand, unless they start inside a word;
 * - blocks: private keys of every label (PEM `-----BEGIN … PRIVATE KEY-----`, PGP `… PRIVATE KEY
 *   BLOCK-----`, OpenSSH, SSH2, PuTTY), whole or cut (a block whose start or end is missing);
 * - values given a credential's name: `NAME=value`, `"name": "value"`, `--password value`,
 *   `Authorization: Bearer value`, `scheme://user:password@`, an AWS secret key beside its id.
 *   The name decides how sure we are (values.ts): API_KEY takes any value that is not a
 *   reference; cache_key or a bare `secret:` only a value that looks generated; PUBLIC_KEY none.
 *
 * Every pattern starts with a literal or a short class and has bounded repetitions, so it
 * cannot backtrack badly; a rule either matches (`re`, flags `gd`) or scans (`find`).
 */
import { inWord, isReference, keepAssigned, nameBefore, notMixed } from './values';

export interface Rule {
  kind: string;
  /** Matches; the group `secret`, when it took part, is what is redacted (else the whole match). */
  re?: RegExp;
  /** Or: the spans [start, end) of `text` to redact, found by a scan. */
  find?: (text: string) => Iterable<[number, number]>;
  /** A match that is a name, a placeholder or a reference, not a secret, is kept (`at`: the match's offset in `text`). */
  keep?: (secret: string, match: string, at: number, text: string) => boolean;
}

const startsInWord = (_s: string, _m: string, at: number, text: string) => inWord(text, at);
const startsInWordOrPlain = (s: string, _m: string, at: number, text: string) => inWord(text, at) || notMixed(s);

/** A token marked by its prefix: redacted where it starts a word. */
function prefixed(kind: string, source: string, keep = startsInWord): Rule {
  return { kind, re: new RegExp(source, 'gd'), keep };
}

// ── Private key blocks ────────────────────────────────────────────────────────────────────
const BEGIN = /-{4,5} ?BEGIN ((?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?) ?-{4,5}/g;
const ORPHAN_END = /-{4,5} ?END ((?:[A-Z0-9]+ ){0,4}PRIVATE KEY(?: BLOCK)?) ?-{4,5}/g;
/** A line of a key's body: base64 (perhaps cut, `…`), an armor header (`Proc-Type: 4,ENCRYPTED`, `Version: …`), or empty. */
const BODY_LINE = /^(?:[A-Za-z0-9+/=]*(?:…|\.{3})?|[A-Za-z][\w-]{0,40}: [^\n]{0,200})\r?$/;
const MAX_BLOCK = 40_000;

/** Lines of `text` from `from` on (split at real line ends and at `\n` escapes, as in JSON). */
function bodyEnd(text: string, from: number): number {
  let at = from;
  while (at < text.length && at - from < MAX_BLOCK) {
    const nl = /\r?\n|\\n/g;
    nl.lastIndex = at;
    const m = nl.exec(text);
    const lineEnd = m ? m.index : text.length;
    if (!BODY_LINE.test(text.slice(at, lineEnd))) return at;
    if (!m) return text.length;
    at = m.index + m[0].length;
  }
  return at;
}

/** Where the base64 before an END line starts (the block's beginning was cut away). */
function bodyStart(text: string, end: number): number {
  let i = end;
  while (i > 0 && end - i < MAX_BLOCK && /[A-Za-z0-9+/=\r\n\\]/.test(text[i - 1]!)) i--;
  return i;
}

function* privateKeyBlocks(text: string): Iterable<[number, number]> {
  if (!text.includes('PRIVATE KEY')) return;
  const blocks: Array<[number, number]> = [];
  let covered = 0;
  for (const m of text.matchAll(BEGIN)) {
    if (m.index < covered) continue;
    const after = m.index + m[0].length;
    const endRe = new RegExp(`-{4,5} ?END ${m[1]!} ?-{4,5}`, 'g');
    endRe.lastIndex = after;
    const end = endRe.exec(text);
    // With its END: the whole block. Cut short (an excerpt, a pruned output): the body that follows.
    covered = end && end.index - after <= MAX_BLOCK ? end.index + end[0].length : Math.max(after, bodyEnd(text, after));
    blocks.push([m.index, covered]);
  }
  yield* blocks;
  for (const m of text.matchAll(ORPHAN_END)) {
    if (blocks.some(([a, b]) => m.index >= a && m.index < b)) continue;
    yield [bodyStart(text, m.index), m.index + m[0].length];
  }
}

/** A PuTTY key file's private part: the lines after `Private-Lines: N`. */
const PUTTY = /Private-Lines: \d{1,4}\r?\n(?<secret>(?:[A-Za-z0-9+/=]{1,200}(?:…|\.{3})?(?:\r?\n|$)){1,400})/dg;

// ── Assignments ───────────────────────────────────────────────────────────────────────────
const SUFFIX = /^(?:KEY|TOKEN|PASSWORD|PASSWD|PASS|PWD|SECRET)/i;

/** NAME=value, NAME: value, "name": "value", export NAME='value' (the value up to a quote, space or separator). */
const ASSIGNMENT =
  /(?:KEY|TOKEN|PASSWORD|PASSWD|PASS|PWD|SECRET)["']?[ \t]{0,3}(?:=|:(?!:))[ \t]{0,3}(?<secret>"[^"\s]{1,500}"|'[^'\s]{1,500}'|[^\s"'&;,)}\]]{1,500})/dgi;

function keepAssignment(secret: string, match: string, at: number, text: string): boolean {
  return keepAssigned(nameBefore(text, at), SUFFIX.exec(match)![0], secret);
}

/** An AWS secret access key: 40 characters of base64 beside an access key id or the word aws. */
function keepAwsSecret(secret: string, _m: string, at: number, text: string): boolean {
  if (!/[a-z]/.test(secret) || !/[A-Z]/.test(secret) || !/\d/.test(secret)) return true;
  const around = text.slice(Math.max(0, at - 300), at + secret.length + 100);
  return !/aws|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/i.test(around);
}

export const DEFAULT_RULES: readonly Rule[] = [
  { kind: 'private-key', find: privateKeyBlocks },
  { kind: 'private-key', re: PUTTY },
  prefixed('age-secret-key', 'AGE-SECRET-KEY-1[0-9A-Z]{58}'),
  // A JWT: header and payload are base64url JSON objects (`{"` is `eyJ`), then the signature (empty when unsigned).
  prefixed('jwt', 'eyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]*'),
  // Model providers. A literal first, the word boundary checked after (a leading \b keeps the engine from scanning for the literal).
  prefixed('anthropic-key', 'sk-ant-[A-Za-z0-9_-]{20,}'),
  prefixed('openai-key', 'sk-(?:proj-|live-|test-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_-]{16,}', startsInWordOrPlain),
  prefixed('huggingface-token', '(?:hf_|api_org_)[A-Za-z0-9]{30,}', startsInWordOrPlain),
  prefixed('groq-key', 'gsk_[A-Za-z0-9]{40,}'),
  prefixed('xai-key', 'xai-[A-Za-z0-9]{60,}'),
  prefixed('replicate-token', 'r8_[A-Za-z0-9]{30,}', startsInWordOrPlain),
  prefixed('perplexity-key', 'pplx-[A-Za-z0-9]{40,}'),
  // Code hosts and package registries.
  prefixed('github-token', '(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})'),
  prefixed('gitlab-token', '(?:gl(?:pat|dt|ptt|rt|oas|cbt|imt|ft|soat|agent|ffct|wt)-[A-Za-z0-9_-]{20,}|GR1348941[A-Za-z0-9_-]{20,})'),
  prefixed('npm-token', 'npm_[A-Za-z0-9]{36}'),
  prefixed('pypi-token', 'pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}'),
  // Clouds.
  prefixed('aws-access-key', '(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])'),
  { kind: 'aws-secret-key', re: /(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])/dg, keep: keepAwsSecret },
  prefixed('google-api-key', 'AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])'),
  prefixed('google-oauth', '(?:GOCSPX-[A-Za-z0-9_-]{28}|ya29\\.[A-Za-z0-9_-]{30,}|1//0[A-Za-z0-9_-]{40,})'),
  { kind: 'azure-key', re: /(?:AccountKey|SharedAccessKey|SharedAccessSignature)=(?<secret>[A-Za-z0-9+/=%]{20,})/dg },
  { kind: 'azure-sas', re: /[?&]sig=(?<secret>[A-Za-z0-9%+/=]{20,})/dg },
  prefixed('digitalocean-token', 'do[opr]_v1_[a-f0-9]{64}'),
  prefixed('heroku-key', 'HRKU-[A-Za-z0-9_-]{30,}'),
  prefixed('fly-token', '(?:fo1_[A-Za-z0-9_-]{40,}|fm[12][ar]?_[A-Za-z0-9+/=_-]{50,})'),
  prefixed('vault-token', 'hv[sbr]\\.[A-Za-z0-9_-]{24,}'),
  prefixed('terraform-token', '[A-Za-z0-9]{14}\\.atlasv1\\.[A-Za-z0-9_-]{60,}'),
  prefixed('doppler-token', 'dp\\.(?:pt|st|sa|ct|scim|audit)\\.[A-Za-z0-9]{40,}'),
  prefixed('pulumi-token', 'pul-[a-f0-9]{40}'),
  prefixed('databricks-token', 'dapi[a-f0-9]{32}(?:-\\d)?'),
  prefixed('supabase-key', '(?:sbp_[a-f0-9]{40}|sb_secret_[A-Za-z0-9_-]{20,})'),
  // Chat, payments, mail and the rest of a project's services.
  prefixed('slack-token', '(?:xox[abposre]-[A-Za-z0-9-]{10,}|xoxe\\.xox[bp]-\\d-[A-Za-z0-9-]{20,}|xapp-\\d-[A-Za-z0-9-]{20,})'),
  prefixed('slack-webhook', 'https://hooks\\.slack\\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{20,}'),
  prefixed('discord-webhook', 'https://(?:ptb\\.|canary\\.)?discord(?:app)?\\.com/api/webhooks/\\d{5,30}/[A-Za-z0-9_-]{30,}'),
  prefixed('discord-token', '[MNO][A-Za-z0-9_-]{23,27}\\.[A-Za-z0-9_-]{6}\\.[A-Za-z0-9_-]{27,40}', startsInWordOrPlain),
  prefixed('telegram-token', '\\d{8,10}:AA[A-Za-z0-9_-]{32,34}'),
  prefixed('stripe-key', '(?:[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})'),
  prefixed('square-token', 'sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}'),
  prefixed('shopify-token', 'shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}'),
  prefixed('sendgrid-key', 'SG\\.[A-Za-z0-9_-]{16,32}\\.[A-Za-z0-9_-]{16,64}'),
  prefixed('linear-key', 'lin_(?:api|oauth)_[A-Za-z0-9]{40}'),
  prefixed('notion-token', '(?:ntn_[A-Za-z0-9]{40,}|secret_[A-Za-z0-9]{43}(?![A-Za-z0-9]))', startsInWordOrPlain),
  prefixed('atlassian-token', 'ATATT3[A-Za-z0-9_=-]{150,}'),
  prefixed('postman-key', 'PMAK-[a-f0-9]{24}-[a-f0-9]{34}'),
  prefixed('sentry-token', 'sntr[ysu]_[A-Za-z0-9+/=_-]{40,}'),
  prefixed('grafana-token', '(?:glc_[A-Za-z0-9+/=]{32,}|glsa_[A-Za-z0-9]{32}_[a-f0-9]{8})'),
  prefixed('newrelic-key', 'NR(?:AK|JS|II)-[A-Z0-9]{27}'),
  // Values by where they stand.
  { kind: 'bearer', re: /(?:Bearer|Basic|Token)\s+(?<secret>[A-Za-z0-9._~+/=-]{16,})/dg, keep: (s, _m, at, text) => inWord(text, at) || !/\d/.test(s) },
  {
    kind: 'cli-flag',
    re: /--(?:[a-z]+-)*(?:password|passwd|token|api-key|apikey|secret|access-key|secret-key)(?:=|[ \t]+)(?<secret>"[^"\n]{1,200}"|'[^'\n]{1,200}'|[^\s"'`]{1,200})/dg,
    keep: (s) => isReference(s),
  },
  { kind: 'assignment', re: ASSIGNMENT, keep: keepAssignment },
  { kind: 'url-credentials', re: /:\/\/[^\s:/@]{1,100}:(?<secret>[^\s:/@]{3,200})@/dgi, keep: (s) => /^\$|^\{|^\*+$|^<.*>$|^(?:password|pass|pw)$/i.test(s) },
];
