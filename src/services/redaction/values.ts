/**
 * Is this a secret? The judgments the assignment rules make about a name (`OPENAI_API_KEY`,
 * `foreign_key`, `PUBLIC_KEY`) and about the value given to it (`sk-…`, `account_id42`,
 * `${TOKEN}`), kept apart from the patterns so each can be read and tested as a rule.
 */

/** How much a name says its value is a credential. */
export type NameWeight = 'credential' | 'ambiguous' | 'not-a-secret';

/** Words right before `KEY` that make it a credential: API_KEY, SECRET_ACCESS_KEY, AccountKey, x-api-key. */
const CREDENTIAL_KEY_WORDS = new Set([
  'API',
  'APIKEY',
  'ACCESS',
  'SECRET',
  'PRIVATE',
  'AUTH',
  'MASTER',
  'SIGNING',
  'SIGN',
  'ENCRYPTION',
  'ENCRYPT',
  'DECRYPTION',
  'DECRYPT',
  'CRYPTO',
  'CIPHER',
  'AES',
  'HMAC',
  'JWT',
  'LICENSE',
  'LICENCE',
  'CLIENT',
  'APP',
  'SERVICE',
  'ACCOUNT',
  'SUBSCRIPTION',
  'DEVELOPER',
  'CONSUMER',
  'ADMIN',
  'ROOT',
  'SECURITY',
  'WEBHOOK',
  'INGEST',
  'INGESTION',
  'WRITE',
  'DEPLOY',
  'SESSION',
]);

/** Words right before `KEY` (or `SECRET`) that name something public: a public key is meant to be shown. */
const PUBLIC_WORDS = new Set(['PUBLIC', 'PUB', 'PUBLISHABLE', 'VERIFY', 'VERIFYING', 'VERIFICATION', 'HOST']);

/** Words right before `TOKEN` that are not credentials: pagination cursors, a tokenizer's special tokens. */
const NOT_CREDENTIAL_TOKEN_WORDS = new Set([
  'PAGE',
  'NEXT',
  'PREV',
  'PREVIOUS',
  'CONTINUATION',
  'CURSOR',
  'SYNC',
  'CANCEL',
  'CANCELLATION',
  'RESUME',
  'START',
  'END',
  'STOP',
  'EOS',
  'BOS',
  'PAD',
  'UNK',
  'SEP',
  'CLS',
  'MASK',
  'SPECIAL',
  'INPUT',
  'OUTPUT',
  'MAX',
  'MIN',
  'TOTAL',
  'FIRST',
  'LAST',
]);

/** The last word of a name: `OPENAI_API_` → API, `apiKey`'s `api` → API, `x-api-` → API, `SharedAccess` → ACCESS. */
function lastWord(prefix: string): string {
  const words = prefix.match(/[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+/g);
  return words ? words[words.length - 1]!.toUpperCase() : '';
}

/**
 * What a name before an assignment's `KEY`/`TOKEN`/`PASSWORD`/`SECRET` says (`suffix` as
 * written: its case tells `monkey` from `cacheKey`). `credential`: any value that is not a
 * reference is redacted (API_KEY, apiKey, CLIENT_SECRET, PGPASSWORD, token). `ambiguous`: only
 * a value that looks machine-generated is (cache_key, sort_key, OPENAI_KEY, a bare `secret:`
 * that names a Kubernetes secret). `not-a-secret`: never (PUBLIC_KEY, next_page_token, monkey, PWD).
 */
export function nameWeight(prefix: string, suffix: string): NameWeight {
  const s = suffix.toUpperCase();
  const word = lastWord(prefix);
  const separated = /[_.-]$/.test(prefix);
  if (s === 'PASSWORD' || s === 'PASSWD') return 'credential';
  if (s === 'PASS') return separated ? 'credential' : 'not-a-secret';
  if (s === 'PWD') return separated && word !== 'OLD' ? 'credential' : 'not-a-secret';
  if (PUBLIC_WORDS.has(word)) return 'not-a-secret';
  if (s === 'SECRET') return prefix === '' ? 'ambiguous' : 'credential';
  if (s === 'TOKEN') return NOT_CREDENTIAL_TOKEN_WORDS.has(word) ? 'not-a-secret' : 'credential';
  if (CREDENTIAL_KEY_WORDS.has(word)) return 'credential';
  // One lower-case word that happens to end in "key" (monkey, hotkey) is no name of a key.
  if (/[a-z]$/.test(prefix) && /^[a-z]/.test(suffix)) return 'not-a-secret';
  return 'ambiguous';
}

/** Keep an assignment's value? By what its name says, then by what the value looks like. */
export function keepAssigned(prefix: string, suffix: string, value: string): boolean {
  const weight = nameWeight(prefix, suffix);
  if (weight === 'not-a-secret' || isReference(value)) return true;
  const bare = value.replace(/^["'`]|["'`]$/g, '');
  // A number is a count or an id under any name but a password's (a PIN is a password).
  if (/^\d+$/.test(bare)) return !/^(?:PASSWORD|PASSWD|PASS|PWD)$/i.test(suffix);
  return weight === 'ambiguous' && !looksGenerated(value);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Does `value` look machine-generated (a key, not a name)? Some separator-free run of 12 or
 * more characters mixes letters and digits in short pieces, as random text does:
 * `Xk7pL2mQ9rT4vW8y` is 16 pieces, `account_id42` 3, `getElementById2` 5, `my-k8s-secret-name-01`
 * never more than 6 characters long. Hex (hashes, UUIDs) is left alone: under an ordinary name
 * it is a digest or an id far more often than a key.
 */
export function looksGenerated(raw: string): boolean {
  const v = raw.replace(/^["'`]|["'`]$/g, '');
  if (v.length < 16 || !/^[A-Za-z0-9+/=_.~-]+$/.test(v) || UUID.test(v)) return false;
  for (const run of v.split(/[^A-Za-z0-9]/)) {
    if (run.length < 12 || /^[0-9a-f]+$/i.test(run) || !/\d/.test(run) || !/[A-Za-z]/.test(run)) continue;
    const pieces = run.match(/[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+/g)?.length ?? 0;
    if (pieces * 2.5 >= run.length) return true;
  }
  return false;
}

/** A trailing `…` or `...`: an excerpt or a display cut the value, which says nothing about what came before it. */
const CUT = /(?:…|\.{3})$/;

/**
 * Values an assignment names without holding a secret: references, placeholders, empties. A
 * value cut short (`sk-abc123…`) is judged by what is left of it: a cut secret is still part
 * of a secret, so `…` alone never makes a value a placeholder.
 */
export function isReference(v: string): boolean {
  let s = v.replace(/^["'`]|["'`,;]$/g, '');
  if (CUT.test(s)) s = s.replace(CUT, '');
  if (s.length < 6) return true;
  if (/^[$%]|^\$\{|^<.*>$|^\{\{|^process\.env|^os\.environ|^env\(|^getenv|^\*+$|^x{4,}$|^\.\.\.|^…/i.test(s)) return true;
  if (/^(?:true|false|null|none|undefined|redacted|changeme|example|your[_-]?\w*|placeholder|secret|password|token)$/i.test(s)) return true;
  // Code, not a value: a call, a member access (`config.apiKey`; not a generated run with a suffix).
  if (/[()]/.test(s) || (/^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+$/.test(s) && !looksGenerated(s))) return true;
  if (/^\[REDACTED/.test(s)) return true;
  // A path (a key file, a socket), not the secret itself.
  if (/^(?:~|\.{1,2})?\/[\w./@+-]*$/.test(s)) return true;
  // A secret mixes letters and digits (or is long): a plain word is a name.
  return !/\d/.test(s) && s.length < 16;
}

/** The match starts inside a word (`task-ant-…`, `xsk-…`): not a key's beginning. */
export const inWord = (text: string, at: number): boolean => at > 0 && /[A-Za-z0-9_]/.test(text[at - 1]!);

/** Needs both a letter and a digit: real keys have them; prose and identifiers mostly not. */
export const notMixed = (s: string): boolean => !(/[A-Za-z]/.test(s) && /\d/.test(s));

/**
 * The name before an assignment's `KEY`/`TOKEN`/`PASSWORD`/`SECRET` (found by the suffix, then
 * read backwards: a pattern that scanned for names would try every word of the text).
 */
export function nameBefore(text: string, at: number): string {
  let i = at;
  while (i > 0 && /[A-Za-z0-9_.-]/.test(text[i - 1]!) && at - i < 80) i--;
  return text.slice(i, at);
}
