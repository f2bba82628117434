/**
 * Real processes racing for one JsonlStore session whose lock was left by a dead writer: at
 * most one may become the writer, and every event a writer saw acknowledged (its flush
 * resolved) must be in the file when it is reopened. Each trial: a session with a few events
 * and a stale lock (alternately the lock directory and the plain-file lock of an earlier
 * release); the racers (test/helpers/store-racer.ts, forked once with `node --import tsx`) are
 * armed, spin on a shared start file, and open the session at the same instant.
 *
 * XCOMPACT_RACE_TRIALS (default 300) and XCOMPACT_RACE_PROCS (default 2) raise the stress.
 */
import { fork, spawnSync, type ChildProcess } from 'node:child_process';
import { promises as fs, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonlStore, Session } from '../../../src/session/index';

const TRIALS = Number(process.env.XCOMPACT_RACE_TRIALS ?? 300);
const PROCS = Number(process.env.XCOMPACT_RACE_PROCS ?? 2);
const HERE = dirname(fileURLToPath(import.meta.url));

interface Message {
  kind: string;
  won?: boolean;
  code?: string;
  texts?: string[];
  error?: string;
  message?: string;
}

/** A forked racer and its messages, taken in the order they arrived. */
class Racer {
  private readonly inbox: Message[] = [];
  private waiting: ((m: Message) => void) | undefined;
  private exited: string | undefined;

  constructor(readonly child: ChildProcess) {
    child.on('message', (m: Message) => {
      if (this.waiting) {
        const w = this.waiting;
        this.waiting = undefined;
        w(m);
      } else this.inbox.push(m);
    });
    child.on('exit', (code, signal) => {
      this.exited = `racer ${child.pid} exited (${code ?? signal})`;
      this.waiting?.({ kind: 'fatal', message: this.exited });
    });
  }

  async next(kind: string): Promise<Message> {
    const m = this.inbox.shift() ?? (this.exited ? { kind: 'fatal', message: this.exited } : await new Promise<Message>((r) => (this.waiting = r)));
    if (m.kind !== kind) throw new Error(`racer ${this.child.pid}: expected ${kind}, got ${JSON.stringify(m)}`);
    return m;
  }
}

const root = mkdtempSync(join(tmpdir(), 'xcompact-race-'));
const racers: Racer[] = [];

beforeAll(async () => {
  for (let i = 0; i < PROCS; i++) {
    const child = fork(join(HERE, '../../helpers', 'store-racer.ts'), [], {
      execArgv: ['--import', 'tsx'],
      cwd: join(HERE, '../../..'),
      env: { ...process.env, RACER_NAME: `r${i}` },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    racers.push(new Racer(child));
  }
  await Promise.all(racers.map((r) => r.next('ready')));
});

afterAll(() => {
  for (const r of racers) if (r.child.exitCode === null) r.child.kill('SIGKILL');
  rmSync(root, { recursive: true, force: true });
});

/** A pid of this host that no process has now: an owner that died without closing. */
function deadPid(): number {
  const run = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(run.stdout);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

describe('JsonlStore: processes racing to take over a stale lock', () => {
  it(`${TRIALS} trials of ${PROCS} processes: exactly one writer each time, no acknowledged event lost`, async () => {
    const started = Date.now();
    let dead = deadPid();
    const tally = { trials: 0, doubleWriters: 0, noWriter: 0, lost: 0, acked: 0, reopenFailures: 0, writerErrors: 0 };
    const problems: string[] = [];

    for (let trial = 0; trial < TRIALS; trial++) {
      const dir = join(root, `t${trial}`);
      mkdirSync(dir);
      const store = new JsonlStore(dir, { sync: false });
      const earlier = await Session.open(store, 's');
      for (let k = 0; k < 3; k++) earlier.append({ type: 'user/message', data: { content: [{ type: 'text', text: `earlier:${k}` }] }, surfaceOp: 'append' });
      await earlier.close();
      if (alive(dead)) dead = deadPid();
      const lockPath = `${store.pathOf('s')}.lock`;
      const owner = { pid: dead, host: hostname(), since: '2020-01-01T00:00:00.000Z' };
      if (trial % 2 === 0) {
        mkdirSync(lockPath);
        writeFileSync(join(lockPath, 'owner-dead'), JSON.stringify({ ...owner, token: 'dead' }));
      } else {
        writeFileSync(lockPath, JSON.stringify(owner));
      }

      const go = join(dir, 'go');
      for (const r of racers) r.child.send({ kind: 'arm', dir, id: 's', go, trial });
      await Promise.all(racers.map((r) => r.next('armed')));
      writeFileSync(go, '');
      const outcomes = await Promise.all(racers.map((r) => r.next('outcome')));
      const winners = racers.filter((_, i) => outcomes[i]!.won);
      for (const o of outcomes) if (!o.won && o.code !== 'store-locked') problems.push(`trial ${trial}: a loser failed with ${o.code}`);
      if (winners.length > 1) tally.doubleWriters++;
      if (winners.length === 0) tally.noWriter++;
      const acks = await Promise.all(winners.map((r) => r.next('acked')));
      // Only now may a writer close: a second winner above could not have opened after the first closed.
      for (const r of racers) r.child.send({ kind: 'close' });
      await Promise.all(racers.map((r) => r.next('closed')));

      const acked = acks.flatMap((a) => a.texts ?? []);
      tally.writerErrors += acks.filter((a) => a.error !== undefined).length;
      tally.acked += acked.length;
      try {
        const reopened = await Session.open(store, 's');
        const texts = new Set(reopened.deriveMessages().map((m) => String(m.content)));
        await reopened.close();
        for (const t of [...acked, 'earlier:0', 'earlier:1', 'earlier:2']) {
          if (!texts.has(t)) {
            tally.lost++;
            problems.push(`trial ${trial}: acknowledged "${t}" is gone`);
          }
        }
      } catch (err) {
        tally.reopenFailures++;
        tally.lost += acked.length;
        problems.push(`trial ${trial}: reopening failed: ${String(err)}`);
      }
      tally.trials++;
      await fs.rm(dir, { recursive: true, force: true });
    }

    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    console.info(`store race: ${JSON.stringify(tally)} in ${seconds} s`);
    expect(problems.slice(0, 10)).toEqual([]);
    expect(tally).toEqual({ trials: TRIALS, doubleWriters: 0, noWriter: 0, lost: 0, acked: TRIALS * 5, reopenFailures: 0, writerErrors: 0 });
  });
});
