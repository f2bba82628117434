/**
 * MemoryStore and JsonlStore: round trips that rebuild every projection, flush durability,
 * torn tails, corrupt lines, and the one-writer rule (same process, another live process, a
 * stale lock of a dead one, and an external append detected as interleaving).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, promises as fs, readdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { JsonlStore, MemoryStore, Session, StoreError, type SessionStore } from '../../../src/session/index';
import { openAIMessageProblems } from '../../helpers/openai-validator';
import {
  appendAll,
  assistant,
  checkpoint,
  durableSnapshot,
  header,
  removeTempDirs,
  replace,
  result,
  snapshot,
  stepStart,
  system,
  tempDir,
  turnEnd,
  turnStart,
  user,
} from '../../helpers/session';

afterAll(removeTempDirs);

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  vi.restoreAllMocks();
});

/** A session that exercises every projection: system prompt, header, usage, calls, prune, checkpoint, stale and live locks, open turn and step. */
function writeRichSession(s: Session): void {
  appendAll(s, [system('sys'), turnStart(0), stepStart(0, 0), header('m1'), user('u1')]);
  appendAll(s, [assistant('', ['a', 'b'], { promptTokens: 100, completionTokens: 10, cachedTokens: 50 }), result('b'), result('a', 'A'.repeat(100))]);
  s.append({ type: 'compaction/prune', data: { targetSeq: 7, callId: 'a', tokensBefore: 30, tokensAfter: 5, charsBefore: 100, charsAfter: 10 } });
  s.append(replace(result('a', 'A…'), 7, 7, [7, 8]));
  s.append({ type: 'step/end', data: { turn: 0, step: 0 } });
  s.append(stepStart(0, 1));
  s.append(assistant('thinking about it'));
  const start = s.append({ type: 'compaction/start', data: { turn: 0, trigger: 'pressure' } });
  s.append({ type: 'session/end-seed', data: { reason: 'crash' } }); // start is now a stale orphan
  const start2 = s.append({ type: 'compaction/start', data: { turn: 0, trigger: 'pressure' } });
  const summary = s.append({
    type: 'compaction/summary',
    data: { summary: 'S', range: { start: 4, end: 12 }, shadowedSeqs: [4, 5, 6, 9, 12], shadowedTokens: 99 },
  });
  s.append(checkpoint(4, 12, [start2.seq, summary.seq, 4, 5, 6, 9, 12]));
  s.append({ type: 'compaction/end', data: { turn: 0 } });
  s.append(header('m2'));
  s.append(assistant('', ['c']));
  s.append({ type: 'compaction/start', data: { turn: 0, trigger: 'overflow' } }); // left open: a live lock
  expect(start.seq).toBe(13);
}

async function expectStoreError(p: Promise<unknown>, code: string): Promise<StoreError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, `expected StoreError ${code}`).toBeInstanceOf(StoreError);
  expect((err as StoreError).code).toBe(code);
  return err as StoreError;
}

function fileOf(store: JsonlStore, id: string): string {
  return store.pathOf(id);
}

/** Writes a lock as JsonlStore does: a `<file>.lock` directory holding one `owner-<token>` file. */
async function writeLock(lockPath: string, owner: Record<string, unknown>, token = `t${Math.random().toString(36).slice(2)}`): Promise<void> {
  await fs.mkdir(lockPath);
  await fs.writeFile(join(lockPath, `owner-${token}`), JSON.stringify({ ...owner, token }));
}

/** The owner named by a lock directory (it holds exactly one owner file). */
async function lockOwner(lockPath: string): Promise<Record<string, unknown>> {
  const entries = readdirSync(lockPath);
  expect(entries).toHaveLength(1);
  return JSON.parse(await fs.readFile(join(lockPath, entries[0]!), 'utf8')) as Record<string, unknown>;
}

describe.each([
  ['MemoryStore', () => new MemoryStore()],
  ['JsonlStore', () => new JsonlStore(tempDir(), { sync: false })],
] as Array<[string, () => SessionStore]>)('%s round trip', (_name, makeStore) => {
  it('Session.open replays the log and rebuilds every projection', async () => {
    const store = makeStore();
    const s = await Session.open(store, 'rich');
    writeRichSession(s);
    const live = durableSnapshot(s);
    const liveUsage = s.latestUsage;
    await s.close();

    const r = await Session.open(store, 'rich');
    expect(durableSnapshot(r)).toEqual(live);
    expect(r.openedLength).toBe(r.length);
    expect(r.lock).toMatchObject({ held: true, orphan: true, trigger: 'overflow', staleOrphans: [13] });
    expect(r.openTurn).toBe(0);
    expect(r.openStep).toEqual({ turn: 0, step: 1 });
    expect(r.latestHeader?.data.model).toBe('m2');
    expect(r.latestUsage).toEqual(liveUsage);
    expect(r.surface.pendingCalls()).toEqual(['c']);
    expect(r.needsRecovery).toBe(true);
    expect(r.loadReport).toEqual({});
    // and it goes on from there
    r.recover();
    expect(openAIMessageProblems(r.deriveMessages())).toEqual([]);
    const after = durableSnapshot(r);
    await r.close();
    const r2 = await Session.open(store, 'rich');
    expect(durableSnapshot(r2)).toEqual(after);
    await r2.close();
  });

  it('a second open of an open session is refused; after close it opens again', async () => {
    const store = makeStore();
    const s = await Session.open(store, 'one');
    s.append(user('u'));
    await expectStoreError(Session.open(store, 'one'), 'store-locked');
    await s.close();
    const again = await Session.open(store, 'one');
    expect(again.length).toBe(1);
    await again.close();
  });

  it('an empty or new session opens empty', async () => {
    const store = makeStore();
    const s = await Session.open(store, 'fresh');
    expect(snapshot(s)).toEqual(snapshot(Session.inMemory()));
    await s.close();
  });

  it('refuses session ids that are not portable file names', async () => {
    const store = makeStore();
    for (const id of ['', '../x', 'a/b', '.hidden', 'x'.repeat(129)]) {
      await expect(Session.open(store, id)).rejects.toMatchObject({ code: 'invalid-session-id' });
    }
  });
});

describe('MemoryStore', () => {
  it('keeps one JSON line per event', async () => {
    const store = new MemoryStore();
    const s = await Session.open(store, 'm');
    appendAll(s, [user('u'), turnStart(0)]);
    expect(store.dump('m')).toEqual(s.events().map((e) => JSON.stringify(e)));
    await s.close();
  });
});

describe('JsonlStore', () => {
  it('writes one JSON line per event, in order, and flush makes them readable on disk', async () => {
    const store = new JsonlStore(tempDir(), { sync: false });
    const s = await Session.open(store, 'lines');
    appendAll(s, [system('sys'), user('u'), assistant('', ['a']), result('a'), header()]);
    await s.flush(); // not closed: the data must already be in the file
    const text = await fs.readFile(fileOf(store, 'lines'), 'utf8');
    expect(text).toBe(
      s
        .events()
        .map((e) => `${JSON.stringify(e)}\n`)
        .join(''),
    );
    await s.close();
  });

  it('flush fdatasyncs the file when sync is on (the default), and not when it is off', async () => {
    const probe = await fs.open(join(tempDir(), 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> };
    await probe.close();
    const datasync = vi.spyOn(proto, 'datasync');

    const synced = await Session.open(new JsonlStore(tempDir()), 's');
    synced.append(user('u'));
    await synced.flush();
    expect(datasync).toHaveBeenCalledTimes(1);
    await synced.close();

    datasync.mockClear();
    const unsynced = await Session.open(new JsonlStore(tempDir(), { sync: false }), 's');
    unsynced.append(user('u'));
    await unsynced.flush();
    await unsynced.close();
    expect(datasync).not.toHaveBeenCalled();
  });

  it('close releases the lock file; opening only reads (no file for a session never written)', async () => {
    const dir = tempDir();
    const store = new JsonlStore(dir, { sync: false });
    const s = await Session.open(store, 'x');
    expect(existsSync(`${fileOf(store, 'x')}.lock`)).toBe(true);
    await s.close();
    expect(readdirSync(dir)).toEqual([]);
  });

  describe('a torn last line', () => {
    it('is reported, dropped, kept aside, and the next append starts on a clean line', async () => {
      const dir = tempDir();
      const store = new JsonlStore(dir, { sync: false });
      const s = await Session.open(store, 't');
      appendAll(s, [system('sys'), user('u'), assistant('', ['a']), result('a')]);
      const before = durableSnapshot(s);
      await s.close();
      const file = fileOf(store, 't');
      const good = await fs.readFile(file);
      const tornBytes = Buffer.from('{"seq":4,"type":"user/message","time":"2025-01-');
      await fs.appendFile(file, tornBytes);

      const r = await Session.open(store, 't');
      expect(r.loadReport.tornTail).toMatchObject({ line: 5, bytes: tornBytes.length });
      expect(r.loadReport.tornTail?.keptAt).toMatch(/t\.jsonl\.torn-/);
      expect(durableSnapshot(r)).toEqual(before); // nothing before it is lost
      r.append(user('after the crash'));
      await r.flush();
      const keptAt = r.loadReport.tornTail!.keptAt!;
      expect(await fs.readFile(keptAt)).toEqual(tornBytes);
      const text = await fs.readFile(file, 'utf8');
      expect(text.startsWith(good.toString('utf8'))).toBe(true);
      expect(text.endsWith('\n')).toBe(true);
      expect(
        text
          .split('\n')
          .slice(0, -1)
          .map((l) => JSON.parse(l).seq),
      ).toEqual([0, 1, 2, 3, 4]);
      await r.close();

      const r2 = await Session.open(store, 't');
      expect(r2.loadReport).toEqual({});
      expect(r2.length).toBe(5);
      expect(r2.deriveMessages().at(-1)).toEqual({ role: 'user', content: 'after the crash' });
      await r2.close();
    });

    it('a file that is only a torn line opens empty', async () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      await fs.writeFile(fileOf(store, 'only'), '{"seq":0,"ty');
      const r = await Session.open(store, 'only');
      expect(r.loadReport.tornTail).toMatchObject({ line: 1, bytes: 12 });
      expect(r.length).toBe(0);
      r.append(user('fresh'));
      await r.close();
      expect(await fs.readFile(fileOf(store, 'only'), 'utf8')).toBe(`${JSON.stringify(r.event(0))}\n`);
    });

    it('bytes appended by someone else after the torn tail are not cut off', async () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      const s = await Session.open(store, 'tt');
      s.append(user('u'));
      await s.close();
      const file = fileOf(store, 'tt');
      await fs.appendFile(file, '{"seq":1,"ty');
      const r = await Session.open(store, 'tt');
      await fs.appendFile(file, 'pe":"turn/start"}\n'); // another writer, ignoring the lock
      const onDisk = await fs.readFile(file);
      r.append(turnStart(0));
      await expectStoreError(r.flush(), 'store-interleaved');
      expect(await fs.readFile(file)).toEqual(onDisk);
      await r.close().catch(() => undefined);
    });
  });

  describe('a corrupt line in the middle', () => {
    async function writeFile(store: JsonlStore, id: string): Promise<string[]> {
      const s = await Session.open(store, id);
      appendAll(s, [system('sys'), user('u'), assistant('', ['a']), result('a'), user('v'), assistant('w')]);
      await s.close();
      return (await fs.readFile(fileOf(store, id), 'utf8')).split('\n').slice(0, -1);
    }

    it('that is not JSON is a store-corrupt error naming file and line; the file is unchanged', async () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      const lines = await writeFile(store, 'bad');
      lines[2] = lines[2]!.slice(0, 20);
      const file = fileOf(store, 'bad');
      await fs.writeFile(file, `${lines.join('\n')}\n`);
      const bytes = await fs.readFile(file);
      for (let attempt = 0; attempt < 2; attempt++) {
        // the second attempt proves the failed open released its lock
        const err = await expectStoreError(Session.open(store, 'bad'), 'store-corrupt');
        expect(err.file).toBe(file);
        expect(err.line).toBe(3);
        expect(err.message).toContain(`${file}:3`);
        expect(await fs.readFile(file)).toEqual(bytes);
      }
      expect(existsSync(`${file}.lock`)).toBe(false);
    });

    it.each([
      ['an orphan tool result', (l: string[]) => JSON.stringify({ ...JSON.parse(l[3]!), data: { callId: 'zzz', content: [] } }), 'orphan-tool-result'],
      ['a seq out of position', (l: string[]) => JSON.stringify({ ...JSON.parse(l[3]!), seq: 7 }), 'seq-position'],
      ['a line that is no event', () => '{"hello":"world"}', 'stored-shape'],
      [
        'a log-only event with a surfaceOp',
        () => JSON.stringify({ seq: 3, type: 'turn/start', time: 't', data: { turn: 0 }, surfaceOp: 'append' }),
        'log-only-event',
      ],
    ] as Array<[string, (l: string[]) => string, string]>)(
      'that breaks a log rule (%s) is store-corrupt naming file, line and rule',
      async (_name, corrupt, rule) => {
        const store = new JsonlStore(tempDir(), { sync: false });
        const lines = await writeFile(store, 'rule');
        lines[3] = corrupt(lines);
        const file = fileOf(store, 'rule');
        await fs.writeFile(file, `${lines.join('\n')}\n`);
        const bytes = await fs.readFile(file);
        const err = await expectStoreError(Session.open(store, 'rule'), 'store-corrupt');
        expect(err.file).toBe(file);
        expect(err.line).toBe(4);
        expect(err.message).toContain(`${file}:4`);
        expect(err.message).toContain(`[rule: ${rule}]`);
        expect(await fs.readFile(file)).toEqual(bytes);
        expect(existsSync(`${file}.lock`)).toBe(false);
      },
    );
  });

  describe('one writer per file', () => {
    it('a second Session.open on the same file in this process is store-locked', async () => {
      const dir = tempDir();
      const s = await Session.open(new JsonlStore(dir, { sync: false }), 'w');
      s.append(user('mine'));
      // another store object on the same directory: same file
      await expectStoreError(Session.open(new JsonlStore(dir), 'w'), 'store-locked');
      await s.close();
      const r = await Session.open(new JsonlStore(dir), 'w');
      expect(r.length).toBe(1);
      await r.close();
    });

    it('a lock held by another live process is store-locked, naming that process', async () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      const lockPath = `${fileOf(store, 'busy')}.lock`;
      const child = spawn(
        process.execPath,
        [
          '-e',
          `const fs = require('fs'), os = require('os'), path = require('path');
           fs.mkdirSync(process.env.LOCK_PATH);
           fs.writeFileSync(path.join(process.env.LOCK_PATH, 'owner-x1'), JSON.stringify({ pid: process.pid, host: os.hostname(), since: new Date().toISOString(), token: 'x1' }));
           process.stdout.write('ready\\n');
           setInterval(() => {}, 1000);`,
        ],
        { env: { ...process.env, LOCK_PATH: lockPath }, stdio: ['ignore', 'pipe', 'inherit'] },
      );
      children.push(child);
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (d: Buffer) => d.toString().includes('ready') && resolve());
        child.on('exit', (code) => reject(new Error(`lock holder exited early (${code})`)));
      });
      const err = await expectStoreError(Session.open(store, 'busy'), 'store-locked');
      expect(err.message).toContain(`process ${child.pid}`);
      expect(existsSync(lockPath)).toBe(true); // not ours to remove
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      // its process is gone now: the lock is stale and is taken over
      const s = await Session.open(store, 'busy');
      expect((await lockOwner(lockPath)).pid).toBe(process.pid);
      await s.close();
    });

    it('a stale lock of a dead process on this host is taken over', async () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
      children.push(child);
      await new Promise((r) => child.once('exit', r));
      const lockPath = `${fileOf(store, 'stale')}.lock`;
      await writeLock(lockPath, { pid: child.pid, host: hostname(), since: '2020-01-01T00:00:00.000Z' });
      const s = await Session.open(store, 'stale');
      expect(await lockOwner(lockPath)).toMatchObject({ pid: process.pid, host: hostname() });
      s.append(user('taken over'));
      await s.close();
      expect(existsSync(lockPath)).toBe(false);
    });

    it('a lock naming this pid that this process does not hold is stale (a restarted container reuses pids)', async () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      const lockPath = `${fileOf(store, 'self')}.lock`;
      await writeLock(lockPath, { pid: process.pid, host: hostname(), since: '2020-01-01T00:00:00.000Z' });
      const s = await Session.open(store, 'self');
      expect((await lockOwner(lockPath)).since).not.toBe('2020-01-01T00:00:00.000Z');
      // While this process holds it, it is locked.
      await expectStoreError(Session.open(store, 'self'), 'store-locked');
      await s.close();
    });

    it('a lock from another host, or an unreadable one, is never guessed stale', async () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      const lockPath = `${fileOf(store, 'far')}.lock`;
      await writeLock(lockPath, { pid: 999_999_999, host: `not-${hostname()}` });
      await expectStoreError(Session.open(store, 'far'), 'store-locked');
      const [ownerFile] = readdirSync(lockPath);
      await fs.writeFile(join(lockPath, ownerFile!), 'garbage');
      await expectStoreError(Session.open(store, 'far'), 'store-locked');
      expect(await fs.readFile(join(lockPath, ownerFile!), 'utf8')).toBe('garbage');
      // An owner file whose token is not the one in its name is not trusted either.
      await fs.writeFile(join(lockPath, ownerFile!), JSON.stringify({ pid: 999_999_999, host: hostname(), token: 'another' }));
      await expectStoreError(Session.open(store, 'far'), 'store-locked');
      expect(readdirSync(lockPath)).toEqual([ownerFile]);
    });

    it('a plain-file lock of an earlier release is honoured while its process lives, removed when stale', async () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      const lockPath = `${fileOf(store, 'old')}.lock`;
      await fs.writeFile(lockPath, JSON.stringify({ pid: process.ppid, host: hostname() }));
      await expectStoreError(Session.open(store, 'old'), 'store-locked');
      await fs.writeFile(lockPath, 'garbage');
      await expectStoreError(Session.open(store, 'old'), 'store-locked');
      expect(await fs.readFile(lockPath, 'utf8')).toBe('garbage');
      const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
      children.push(child);
      await new Promise((r) => child.once('exit', r));
      await fs.writeFile(lockPath, JSON.stringify({ pid: child.pid, host: hostname() }));
      const s = await Session.open(store, 'old');
      expect((await lockOwner(lockPath)).pid).toBe(process.pid);
      await s.close();
      expect(existsSync(lockPath)).toBe(false);
    });

    it('a lock found shared right after winning it is refused, and this process leaves no owner file behind', async () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      const lockPath = `${fileOf(store, 'shared')}.lock`;
      // Another process's owner file lands in the lock between our rename and our check of it
      // (a protocol breach by a foreign tool, say): we must refuse, and not keep the session locked.
      const rename = fs.rename.bind(fs);
      vi.spyOn(fs, 'rename').mockImplementation(async (from, to) => {
        await rename(from, to);
        if (String(to) === lockPath)
          await fs.writeFile(join(lockPath, 'owner-intruder'), JSON.stringify({ pid: process.ppid, host: hostname(), token: 'intruder' }));
      });
      await expectStoreError(Session.open(store, 'shared'), 'store-locked');
      expect(readdirSync(lockPath)).toEqual(['owner-intruder']);
      vi.restoreAllMocks();
      // Once the intruder is gone the session opens: nothing of ours was left holding it.
      await fs.unlink(join(lockPath, 'owner-intruder'));
      const s = await Session.open(store, 'shared');
      await s.close();
    });

    it('an empty lock directory (a release or a takeover cut short) is free', async () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      const lockPath = `${fileOf(store, 'empty')}.lock`;
      await fs.mkdir(lockPath);
      const s = await Session.open(store, 'empty');
      expect((await lockOwner(lockPath)).pid).toBe(process.pid);
      await s.close();
      expect(existsSync(lockPath)).toBe(false);
    });

    it('an external append between our writes is store-interleaved from flush(), and appends are then refused', async () => {
      const store = new JsonlStore(tempDir(), { sync: false });
      const s = await Session.open(store, 'il');
      appendAll(s, [user('u'), turnStart(0)]);
      await s.flush();
      const file = fileOf(store, 'il');
      const foreign = `${JSON.stringify({ seq: 2, type: 'turn/end', time: new Date().toISOString(), data: { turn: 0 } })}\n`;
      await fs.appendFile(file, foreign);
      const onDisk = await fs.readFile(file);

      s.append(turnEnd(0)); // accepted in memory; its write finds the file changed
      const err = await expectStoreError(s.flush(), 'store-interleaved');
      expect(err.file).toBe(file);
      expect(await fs.readFile(file)).toEqual(onDisk); // our line was not written after theirs
      await expectStoreError(s.flush(), 'store-interleaved'); // and it stays reported

      const before = snapshot(s);
      let refused: unknown;
      try {
        s.append(turnStart(1));
      } catch (e) {
        refused = e;
      }
      expect(refused).toBeInstanceOf(StoreError);
      expect((refused as StoreError).code).toBe('store-interleaved');
      expect(snapshot(s)).toEqual(before);
      await s.close().catch(() => undefined);
      expect(existsSync(`${file}.lock`)).toBe(false);
    });
  });
});

describe("JsonlStore: two writers can never lose each other's lines", () => {
  it('a foreign append that lands between the size check and the write is kept intact and reported; the reopen names the repeated seq and changes nothing', async () => {
    const store = new JsonlStore(tempDir(), { sync: false });
    const s = await Session.open(store, 'iw');
    appendAll(s, [user('u'), turnStart(0)]);
    await s.flush();
    const file = fileOf(store, 'iw');
    const foreign = `${JSON.stringify({ seq: 2, type: 'turn/end', time: new Date().toISOString(), data: { turn: 0 } })}\n`;

    // Another writer, ignoring the lock, appends at the worst moment: after this writer checked
    // the size, before its bytes reach the file.
    const probe = await fs.open(join(tempDir(), 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as { write: (...args: unknown[]) => Promise<unknown> };
    await probe.close();
    const realWrite = proto.write;
    let intruded = false;
    vi.spyOn(proto, 'write').mockImplementation(async function (this: unknown, ...args: unknown[]) {
      if (!intruded) {
        intruded = true;
        await fs.appendFile(file, foreign);
      }
      return realWrite.apply(this, args);
    });
    s.append(turnEnd(0));
    const mine = `${JSON.stringify(s.event(2))}\n`;
    const err = await expectStoreError(s.flush(), 'store-interleaved');
    expect(err.message).toMatch(/grew to \d+ bytes/);
    vi.restoreAllMocks();
    expect(intruded).toBe(true);

    // Appending, never writing at a remembered offset: the other writer's line is still there, whole.
    const onDisk = await fs.readFile(file, 'utf8');
    const lines = onDisk.split('\n').slice(0, -1);
    expect(lines.slice(2)).toEqual([foreign.trimEnd(), mine.trimEnd()]);
    await s.close().catch(() => undefined);

    for (let attempt = 0; attempt < 2; attempt++) {
      const reopen = await expectStoreError(Session.open(store, 'iw'), 'store-interleaved');
      expect(reopen.file).toBe(file);
      expect(reopen.line).toBe(4);
      expect(reopen.message).toContain(`${file}:4: seq 2 again (first at line 3)`);
      expect(reopen.message).toContain('repairInterleaved');
      expect(await fs.readFile(file, 'utf8')).toBe(onDisk);
      expect(existsSync(`${file}.lock`)).toBe(false);
    }

    // The way out, chosen explicitly: keep the lines before the repeat, move the rest aside.
    const repair = new JsonlStore(store.dir, { sync: false, repairInterleaved: true });
    const r = await Session.open(repair, 'iw');
    expect(r.length).toBe(3);
    expect(r.event(2).data).toEqual({ turn: 0 }); // the first writer of seq 2 is kept
    const keptAt = r.loadReport.interleavedTail?.keptAt ?? '';
    expect(r.loadReport.interleavedTail).toEqual({ line: 4, seq: 2, firstAt: 3, lines: 1, bytes: Buffer.byteLength(mine), keptAt });
    expect(keptAt).toMatch(/iw\.jsonl\.interleaved-/);
    r.append(turnStart(1));
    await r.close();
    expect(await fs.readFile(keptAt, 'utf8')).toBe(mine);
    expect(await fs.readFile(file, 'utf8')).toBe(`${lines.slice(0, 3).join('\n')}\n${JSON.stringify(r.event(3))}\n`);
    const plain = await Session.open(store, 'iw');
    expect(plain.length).toBe(4);
    await plain.close();
  });

  it('repairInterleaved moves everything from the first repeated seq on, a torn tail included; without an append the file is left as it is', async () => {
    const dir = tempDir();
    const store = new JsonlStore(dir, { sync: false });
    const s = await Session.open(store, 'rep');
    appendAll(s, [user('a'), user('b'), user('c')]);
    await s.close();
    const file = fileOf(store, 'rep');
    const good = await fs.readFile(file, 'utf8');
    const [l0, l1] = good.split('\n');
    const rest = `${l1}\n${l0}\n{"seq":3,"ty`;
    await fs.appendFile(file, rest);
    const onDisk = await fs.readFile(file, 'utf8');
    await expectStoreError(Session.open(store, 'rep'), 'store-interleaved');
    expect(await fs.readFile(file, 'utf8')).toBe(onDisk);

    const repair = new JsonlStore(dir, { sync: false, repairInterleaved: true });
    const r = await Session.open(repair, 'rep');
    expect(r.length).toBe(3);
    expect(r.loadReport.tornTail).toBeUndefined();
    expect(r.loadReport.interleavedTail).toMatchObject({ line: 4, seq: 1, firstAt: 2, lines: 3, bytes: Buffer.byteLength(rest) });
    await r.close();
    expect(await fs.readFile(file, 'utf8')).toBe(onDisk);
    expect(existsSync(r.loadReport.interleavedTail!.keptAt)).toBe(false);
  });
});

describe('concurrent sessions', () => {
  it('different ids in one directory are independent', async () => {
    const store = new JsonlStore(tempDir(), { sync: false });
    const [a, b] = await Promise.all([Session.open(store, 'a'), Session.open(store, 'b')]);
    a.append(user('for a'));
    b.append(user('for b'));
    b.append(assistant('reply b'));
    await Promise.all([a.close(), b.close()]);
    const [a2, b2] = await Promise.all([Session.open(store, 'a'), Session.open(store, 'b')]);
    expect([a2.length, b2.length]).toEqual([1, 2]);
    await Promise.all([a2.close(), b2.close()]);
  });

  it('two opens of one id racing in this process: exactly one wins', async () => {
    const store = new JsonlStore(tempDir(), { sync: false });
    const outcomes = await Promise.allSettled([Session.open(store, 'race'), Session.open(store, 'race')]);
    const won = outcomes.filter((o) => o.status === 'fulfilled');
    const lost = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect((lost[0]!.reason as StoreError).code).toBe('store-locked');
    await (won[0] as PromiseFulfilledResult<Session>).value.close();
  });
});
