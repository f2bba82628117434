/**
 * The snapshot sidecar of a JsonlStore session: `<file>.prices` holds derived state the writer
 * saved (the token meter's fold, see services/metering/snapshot.ts) and the log prefix it was
 * taken on: how many lines, how many bytes, and their SHA-256 (and the payload's own SHA-256,
 * so a sidecar damaged on disk is no snapshot either). It is handed to a reader only
 * when the file still starts with exactly those bytes, so a log that was cut, repaired,
 * replaced or rewritten since makes it stale, never wrong. Anything unexpected (missing,
 * unreadable, truncated, another format) means "no snapshot": it only ever saves time.
 *
 * Only the writer (the lock holder) writes it, through a temporary file and a rename, so a
 * reader sees an old sidecar or a new one, never half of one.
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import type { StoredSnapshot } from '../store';
import { LOG_RULES_VERSION } from '../validate';

const FORMAT = 'xcompact-snapshot';
const VERSION = 1;

interface Header {
  format: string;
  version: number;
  events: number;
  bytes: number;
  sha256: string;
  /** Of the payload: a sidecar damaged on disk (cut short, a flipped bit) is no snapshot. */
  payloadSha256: string;
  /**
   * The log rules (LOG_RULES_VERSION) the covered lines were checked by before they were
   * stored: a reader with the same rules need not check their shape again. Absent in older
   * sidecars (their lines are checked).
   */
  rules?: number;
}

export function snapshotPath(file: string): string {
  return `${file}.prices`;
}

function sha256(bytes: Buffer | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

function newlines(buf: Buffer, end: number): number {
  let n = 0;
  for (let at = buf.indexOf(0x0a); at >= 0 && at < end; at = buf.indexOf(0x0a, at + 1)) n++;
  return n;
}

/**
 * The sidecar of `file` if it describes a prefix of `log` (the bytes read on open, of which the
 * first `validLength` are committed lines, `records` of them kept); otherwise undefined.
 */
export async function readSnapshot(file: string, log: Buffer, validLength: number, records: number): Promise<StoredSnapshot | undefined> {
  let text: string;
  try {
    text = await fs.readFile(snapshotPath(file), 'utf8');
  } catch {
    return undefined;
  }
  const end = text.indexOf('\n');
  if (end < 0) return undefined;
  let h: Partial<Header>;
  try {
    h = JSON.parse(text.slice(0, end)) as Partial<Header>;
  } catch {
    return undefined;
  }
  if (h === null || typeof h !== 'object' || h.format !== FORMAT || h.version !== VERSION) return undefined;
  const { events, bytes } = h;
  if (!Number.isSafeInteger(events) || !Number.isSafeInteger(bytes) || typeof h.sha256 !== 'string') return undefined;
  const payload = text.slice(end + 1);
  if (sha256(payload) !== h.payloadSha256) return undefined;
  if (events! < 0 || events! > records || bytes! < 0 || bytes! > validLength) return undefined;
  if (bytes! > 0 && log[bytes! - 1] !== 0x0a) return undefined;
  if (newlines(log, bytes!) !== events) return undefined;
  if (sha256(log.subarray(0, bytes)) !== h.sha256) return undefined;
  return { events: events, payload, checked: h.rules === LOG_RULES_VERSION };
}

let temps = 0;

/**
 * Writes the sidecar for the first `events` lines of `file`, of which the writer knows the
 * first `known` bytes are committed (lines appended since the payload was taken may follow
 * them; they are not covered). Writes nothing if the file holds fewer lines.
 */
export async function writeSnapshot(file: string, events: number, known: number, payload: string): Promise<void> {
  const handle = await fs.open(file, 'r');
  let prefix: Buffer;
  try {
    prefix = Buffer.alloc(known);
    let read = 0;
    while (read < known) {
      const r = await handle.read(prefix, read, known - read, read);
      if (r.bytesRead === 0) return;
      read += r.bytesRead;
    }
  } finally {
    await handle.close();
  }
  let bytes = 0;
  for (let n = 0; n < events; n++) {
    const at = prefix.indexOf(0x0a, bytes);
    if (at < 0) return;
    bytes = at + 1;
  }
  const covered = prefix.subarray(0, bytes);
  const header: Header = { format: FORMAT, version: VERSION, events, bytes, sha256: sha256(covered), payloadSha256: sha256(payload), rules: LOG_RULES_VERSION };
  const target = snapshotPath(file);
  const temp = `${target}.tmp-${process.pid}-${++temps}`;
  try {
    await fs.writeFile(temp, `${JSON.stringify(header)}\n${payload}`);
    await fs.rename(temp, target);
  } finally {
    await fs.rm(temp, { force: true }).catch(() => undefined);
  }
}
