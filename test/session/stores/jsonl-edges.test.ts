/**
 * JsonlStore at the edges of the file system (docs/reliability.md#the-stores-at-their-edges), on real file systems: a tmpfs
 * that fills up or is remounted read-only (mounted by the test; those tests need root and are
 * skipped without it), invalid UTF-8 in a stored line, and the directory entry of a new log.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { JsonlStore, Session, StoreError } from '../../../src/session/index';
import { removeTempDirs, tempDir, turnStart, user } from '../../helpers/session';

afterAll(removeTempDirs);
afterEach(() => vi.restoreAllMocks());

function canMount(): boolean {
  if (process.getuid?.() !== 0) return false;
  const probe = tempDir('xcompact-mount-probe-');
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe], { stdio: 'ignore' });
    execFileSync('umount', [probe], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
const MOUNTABLE = canMount();

const mounted: string[] = [];
afterAll(() => {
  for (const m of mounted) {
    try {
      execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    } catch {
      // already gone
    }
  }
});

/** A tmpfs of `kb` KiB of our own. */
function tmpfs(kb: number): string {
  const dir = tempDir('xcompact-tmpfs-');
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${kb}k`, 'tmpfs', dir]);
  mounted.push(dir);
  return dir;
}

const remount = (dir: string, mode: 'ro' | 'rw') => execFileSync('mount', ['-o', `remount,${mode}`, dir]);

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  );
}

describe.runIf(MOUNTABLE)('JsonlStore on a file system that turns read-only (EROFS)', () => {
  it('close() says the lock could not be removed; once writable again, this process reopens the session (its own lock)', async () => {
    const dir = tmpfs(1024);
    const store = new JsonlStore(dir);
    const before = await Session.open(store, 'ro');
    before.append(turnStart(0));
    await before.close();
    // Opened (and locked) while writable; the file system turns read-only before the first
    // write (a remount cannot happen under an open writer, so the file is not open yet).
    const s = await Session.open(store, 'ro');
    remount(dir, 'ro');
    try {
      s.append(user('lost'));
      const flushed = await rejection(s.flush());
      expect((flushed as StoreError).code).toBe('store-io');
      const closed = await rejection(s.close());
      expect(closed).toBeInstanceOf(StoreError);
      expect((closed as Error).message).toMatch(/lock .*ro\.jsonl\.lock.* could not be removed/);
      expect((closed as Error).message).toMatch(/other processes get store-locked until this process exits/);
    } finally {
      remount(dir, 'rw');
    }
    // The lock names this process: a reopen here (to recover) takes it.
    const again = await Session.open(store, 'ro');
    expect(again.length).toBe(1);
    await again.close();
    expect(existsSync(join(dir, 'ro.jsonl.lock'))).toBe(false);
  });
});

describe.runIf(MOUNTABLE)('JsonlStore on a full disk (ENOSPC)', () => {
  it('recovering a torn tail while the disk is full leaves no empty .torn-* file, and the log as it was', async () => {
    const dir = tmpfs(64);
    const store = new JsonlStore(dir);
    const s = await Session.open(store, 'full');
    s.append(turnStart(0));
    await s.close();
    const file = join(dir, 'full.jsonl');
    const committed = readFileSync(file);
    writeFileSync(file, Buffer.concat([committed, Buffer.from('{"seq":1,"type":"user/mes')]));
    const before = readFileSync(file);
    const reopened = await Session.open(store, 'full');
    expect(reopened.loadReport.tornTail?.bytes).toBe(25);
    // Fill the disk, then the first write moves the torn tail aside.
    let n = 0;
    try {
      for (;;) writeFileSync(join(dir, `filler-${n++}`), Buffer.alloc(4096, 1));
    } catch {
      // full
    }
    try {
      for (;;) writeFileSync(join(dir, `filler-${n++}`), Buffer.alloc(64, 1));
    } catch {
      // full to the last block
    }
    reopened.append(user('no room'));
    const err = await rejection(reopened.flush());
    expect((err as StoreError).code).toBe('store-io');
    await reopened.close().catch(() => undefined);
    expect(readdirSync(dir).filter((f) => f.includes('.torn-'))).toEqual([]);
    expect(readFileSync(file)).toEqual(before);
  });
});

describe('JsonlStore: invalid UTF-8', () => {
  it('is reported in the load report with the lines it is on, not replaced without a word', async () => {
    const dir = tempDir();
    const store = new JsonlStore(dir, { sync: false });
    const s = await Session.open(store, 'utf');
    s.append(turnStart(0));
    s.append(user('café'));
    s.append(user('plain'));
    await s.close();
    const file = join(dir, 'utf.jsonl');
    const bytes = readFileSync(file);
    const at = bytes.indexOf(Buffer.from('café')) + 3; // the first byte of "é"
    bytes[at] = 0xff;
    writeFileSync(file, bytes);
    const r = await Session.open(store, 'utf');
    expect(r.loadReport.invalidUtf8).toEqual({ lines: [2], count: 1 });
    expect((r.event(1).data as { content: Array<{ text: string }> }).content[0]!.text).toContain('\ufffd');
    await r.close();
    // A clean file reports nothing.
    const clean = tempDir();
    const cs = await Session.open(new JsonlStore(clean, { sync: false }), 'ok');
    cs.append(user('ünïcödé ✓'));
    await cs.close();
    expect((await Session.open(new JsonlStore(clean, { sync: false }), 'ok')).loadReport.invalidUtf8).toBeUndefined();
  });
});

describe('JsonlStore: a new log', () => {
  it("fsyncs the directory once the new file's first flush is durable, so a power loss keeps the file", async () => {
    const dir = tempDir();
    const opened: string[] = [];
    const synced: string[] = [];
    const realOpen = fsp.open.bind(fsp);
    vi.spyOn(fsp, 'open').mockImplementation(async (...args: Parameters<typeof fsp.open>) => {
      const fh = await realOpen(...args);
      const path = String(args[0]);
      opened.push(path);
      const sync = fh.sync.bind(fh);
      fh.sync = async () => {
        synced.push(path);
        return sync();
      };
      return fh;
    });
    const s = await Session.open(new JsonlStore(dir), 'fresh');
    s.append(turnStart(0));
    await s.flush();
    expect(synced).toContain(dir);
    // Only for a new file: a later flush, or reopening an existing log, does not sync the directory again.
    synced.length = 0;
    s.append(user('more'));
    await s.flush();
    await s.close();
    const again = await Session.open(new JsonlStore(dir), 'fresh');
    again.append(user('again'));
    await again.flush();
    await again.close();
    expect(synced).not.toContain(dir);
  });
});
