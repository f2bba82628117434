/**
 * Secret redaction on the shared transcripts (docs/reliability.md): every string value of
 * /work/shared/data/*.jsonl and of every file under its corpus/ (test/helpers/shared-data.ts) through redactSecrets(), counted as kept
 * (unchanged) or redacted, and each redaction checked for what must never be redacted: a hash
 * (≥ 32 hex digits), a UUID, a path. Those are the false positives; the other redactions are
 * printed (kind and a masked sample) for a reader to judge.
 *
 *   npx tsx bench/redaction.ts [dir]        (default /work/shared/data)
 */
import { redactSecrets } from '../src/services/redaction/index';
import { SHARED_DATA, sharedDataFiles, stringsOf } from '../test/helpers/shared-data';

const root = process.argv[2] ?? SHARED_DATA;

const HASH = /^[0-9a-f]{32,}$/i;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PATH = /^(?:~|\.{1,2})?\/[\w./@+-]+$|^[\w.-]+\/[\w./-]+\.\w+$/;

/** The redacted pieces of `before` (what `after` replaced), by aligning on the text around each mark. */
function removed(before: string, after: string): Array<{ kind: string; secret: string }> {
  const out: Array<{ kind: string; secret: string }> = [];
  const re = /\[REDACTED:([\w-]+)\]/g;
  let from = 0; // position in before
  let last = 0; // position in after
  for (let m = re.exec(after); m !== null; m = re.exec(after)) {
    const lead = after.slice(last, m.index);
    from += lead.length;
    const next = after.indexOf('[REDACTED:', m.index + m[0].length);
    const tail = after.slice(m.index + m[0].length, next < 0 ? undefined : next);
    const probe = tail.slice(0, 12);
    const end = probe === '' ? before.length : before.indexOf(probe, from);
    out.push({ kind: m[1]!, secret: before.slice(from, end < 0 ? from : end) });
    from = end < 0 ? from : end;
    last = m.index + m[0].length;
  }
  return out;
}

const mask = (s: string) => (s.length <= 8 ? '*'.repeat(s.length) : `${s.slice(0, 4)}…${s.slice(-2)} (${s.length} chars)`);

let totalStrings = 0;
let totalChars = 0;
let keptStrings = 0;
let redactedStrings = 0;
let redactions = 0;
let falsePositives = 0;
const byKind = new Map<string, { n: number; samples: string[] }>();
const rows: string[] = [];
const started = performance.now();
for (const file of sharedDataFiles(root)) {
  let fStrings = 0;
  let fRedacted = 0;
  let fCount = 0;
  let fFalse = 0;
  {
    const texts = stringsOf(file);
    for (const t of texts) {
      fStrings++;
      totalChars += t.length;
      const r = redactSecrets(t);
      if (r.count === 0) continue;
      fRedacted++;
      fCount += r.count;
      for (const { kind, secret } of removed(t, r.text)) {
        const bare = secret.replace(/^["']|["']$/g, '');
        const isFalse = HASH.test(bare) || UUID.test(bare) || PATH.test(bare);
        if (isFalse) fFalse++;
        const k = byKind.get(kind) ?? { n: 0, samples: [] };
        k.n++;
        if (k.samples.length < 6) k.samples.push(`${isFalse ? 'FALSE POSITIVE ' : ''}${mask(bare)}`);
        byKind.set(kind, k);
      }
    }
  }
  totalStrings += fStrings;
  keptStrings += fStrings - fRedacted;
  redactedStrings += fRedacted;
  redactions += fCount;
  falsePositives += fFalse;
  rows.push(`| ${file.replace(`${root}/`, '')} | ${fStrings} | ${fStrings - fRedacted} | ${fRedacted} (${fCount} secrets) | ${fFalse} |`);
}
console.log('| file | strings | kept | redacted | false positives (hash, UUID, path) |');
console.log('|---|---|---|---|---|');
for (const r of rows) console.log(r);
console.log(`| **all** | ${totalStrings} | ${keptStrings} | ${redactedStrings} (${redactions} secrets) | ${falsePositives} |`);
console.log(`\n${(totalChars / 1e6).toFixed(1)} M characters in ${((performance.now() - started) / 1000).toFixed(1)} s`);
for (const [kind, k] of [...byKind].sort()) console.log(`${kind}: ${k.n} — ${k.samples.join('; ')}`);
