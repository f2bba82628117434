/**
 * Many worker processes on shared sessions in one real PostgreSQL (docs/spec.md#14-many-workers-one-session-the-postgresql-store): 8 workers
 * (test/helpers/pg-worker.ts) on 20 sessions with random SIGKILLs and respawns, some stopped
 * (SIGSTOP) past their lease while compacting, as a long GC pause would. Afterwards, from the database:
 * - every acknowledged event is stored exactly once, where it was acknowledged; no duplicate
 *   seq and no gap in any session; every session replays under the log rules;
 * - a compaction contested by two workers at one seq has exactly one `compaction/start`
 *   acknowledged there and at most one commit; every bracket is closed exactly once;
 * - a killed worker's lease is taken over by another worker that recovers its orphan bracket.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { PostgresStore, Session, type SessionEvent } from '../../../src/session/index';
import { nodeBundle } from '../../helpers/node-bundle';
import { closePgStores, freshSchema, pgUrl } from '../../helpers/pg';
import { LOOP_RUN_MS } from '../../helpers/suite-plan';

const WORKER = fileURLToPath(new URL('../../helpers/pg-worker.ts', import.meta.url));
const WORKERS = 8;
const SESSIONS = 20;
const LEASE_MS = 600;
const RUN_MS = 14_000;
const MIN_ACKS = 40;
/** Only a hang guard (below the suite's): the run goes on until what the checks need has happened, however slow the machine. */
const MAX_RUN_MS = LOOP_RUN_MS;

type Msg = {
  w: string;
  pid: number;
  k: string;
  s?: string;
  seq?: number;
  tag?: string;
  clearedLock?: number | null;
  from?: string | null;
  on?: boolean;
  message?: string;
};

const live = new Set<ChildProcess>();
afterAll(async () => {
  for (const c of live) c.kill('SIGKILL');
  await closePgStores();
});

it('8 workers, 20 sessions, SIGKILLs and stopped lease holders: nothing lost or doubled, one commit per contested compaction, orphans recovered', async () => {
  // Bundled once: 12 or so starts through tsx cost ~2.5 s of CPU each (test/helpers/node-bundle.ts).
  const worker = await nodeBundle(WORKER);
  const schema = freshSchema('mp');
  // Create the schema once up front, so the workers' first opens do not all queue on it.
  const setup = new PostgresStore({ url: pgUrl(), schema });
  await setup.migrate();
  await setup.close();

  const msgs: Msg[] = [];
  const workers = new Map<string, ChildProcess>();
  const protectedIds = new Set<string>(); // stopped or running a forced compaction: not killed at random
  const killedPids = new Set<number>();
  const stalled = new Map<string, { s: string; resume: () => void; timer: NodeJS.Timeout }>();
  const ready = new Set<string>(); // started (its store open): killing it earlier tests nothing
  let spawned = 0;
  let killsInBracket = 0;
  let stopping = false;

  const others = (w: string) => [...workers.keys()].filter((id) => id !== w);
  const tellCompact = (notW: string, session: string) => {
    const pick = others(notW);
    const fit = pick.filter((w) => ready.has(w) && !protectedIds.has(w));
    const from = fit.length > 0 ? fit : pick;
    const id = from[Math.floor(Math.random() * from.length)];
    if (id) workers.get(id)!.send({ cmd: 'compact', session });
  };

  const spawnWorker = (stall: 'before' | 'bracket' | 'none') => {
    const id = `w${spawned++}`;
    const child = fork(worker, [], {
      execArgv: [],
      env: { ...process.env, PG_URL: pgUrl(), PG_SCHEMA: schema, WORKER_ID: id, LEASE_MS: String(LEASE_MS), SESSIONS: String(SESSIONS), STALL: stall },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    child.stderr!.resume();
    // Sending to a worker this test has just killed fails with EPIPE: expected here, not a test error.
    child.on('error', () => undefined);
    live.add(child);
    workers.set(id, child);
    child.on('message', (m: Msg) => {
      msgs.push(m);
      if (m.k === 'ready') ready.add(id);
      if (m.k === 'stalling') {
        protectedIds.add(id);
        const resume = () => {
          stalled.delete(id);
          child.kill('SIGCONT');
        };
        stalled.set(id, { s: m.s!, resume, timer: setTimeout(resume, 12_000) });
        tellCompact(id, m.s!);
      }
      // A stopped worker resumes once another took its session over and stored there.
      for (const [sid, st] of stalled) {
        if (sid !== id && st.s === m.s && (m.k === 'start-acked' || m.k === 'recovered' || (m.k === 'busy' && !m.on))) {
          clearTimeout(st.timer);
          st.resume();
        }
      }
      if (m.k === 'busy') m.on ? protectedIds.add(id) : protectedIds.delete(id);
      // Kill some workers inside their compaction bracket: an orphan for another to recover.
      if (m.k === 'in-bracket' && !stopping && !protectedIds.has(id) && (killsInBracket < 2 || Math.random() < 0.15)) {
        killsInBracket++;
        kill(id);
        tellCompact(id, m.s!);
      }
    });
    child.on('exit', () => {
      live.delete(child);
      if (workers.get(id) === child) workers.delete(id);
      protectedIds.delete(id);
      ready.delete(id);
      if (!stopping) spawnWorker(Math.random() < 0.2 ? (Math.random() < 0.5 ? 'before' : 'bracket') : 'none');
    });
  };

  const kill = (id: string) => {
    const c = workers.get(id);
    if (!c || c.pid === undefined) return;
    killedPids.add(c.pid);
    c.kill('SIGKILL');
  };

  const roles = ['before', 'before', 'bracket', 'bracket', 'none', 'none', 'none', 'none'] as const;
  for (let i = 0; i < WORKERS; i++) spawnWorker(roles[i]!);

  // Run for RUN_MS, and on a loaded machine longer, until the workers have done what the checks
  // below look for: enough acknowledged events, a contest settled, an orphan recovered, a race lost.
  const started = Date.now();
  const ackCount = () => msgs.reduce((n, m) => n + (m.k === 'ack' ? 1 : 0), 0);
  // A contest needs two workers deciding at one seq: rare when a loaded machine slows them down,
  // so the run also goes on until one contest ended with a single winner that committed.
  const contestSettled = () => {
    const count = (k: string) => {
      const m = new Map<string, Set<number | undefined>>();
      for (const x of msgs) if (x.k === k) m.set(`${x.s}#${x.seq}`, (m.get(`${x.s}#${x.seq}`) ?? new Set()).add(x.pid));
      return m;
    };
    const attempts = count('attempt');
    const acked = count('start-acked');
    const commits = count('commit');
    return [...attempts].some(([k, pids]) => pids.size > 1 && acked.get(k)?.size === 1 && commits.get(k)?.size === 1);
  };
  // A killed worker's lease taken over by another that recovered its orphan bracket, and a loser of a race told so.
  const recoveredFromKill = () =>
    msgs.some((m) => m.k === 'recovered' && m.clearedLock !== null && m.from && [...killedPids].some((pid) => m.from!.includes(`:${pid}:`)));
  const enough = () => ackCount() >= MIN_ACKS && contestSettled() && recoveredFromKill() && msgs.some((m) => m.k === 'lost');
  while (Date.now() - started < RUN_MS || (!enough() && Date.now() - started < MAX_RUN_MS)) {
    await new Promise((r) => setTimeout(r, 1200 + Math.random() * 1000));
    const candidates = [...workers.keys()].filter((id) => ready.has(id) && !protectedIds.has(id));
    const victim = candidates[Math.floor(Math.random() * candidates.length)];
    if (victim) kill(victim);
  }
  stopping = true;
  for (const st of stalled.values()) {
    clearTimeout(st.timer);
    st.resume();
  }
  for (const c of workers.values()) c.send({ cmd: 'stop' });
  const deadline = Date.now() + 20_000;
  while (live.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  for (const c of live) c.kill('SIGKILL');

  const kinds: Record<string, number> = {};
  for (const m of msgs) kinds[m.k] = (kinds[m.k] ?? 0) + 1;
  console.log(`workers spawned ${spawned}, killed ${killedPids.size} (${killsInBracket} inside a bracket); messages`, kinds);
  const errors = msgs.filter((m) => m.k === 'error');
  expect(errors, 'no worker failed with an unexpected error').toEqual([]);

  // --- What the database holds.
  const db = new pg.Client({ connectionString: pgUrl() });
  await db.connect();
  const { rows } = await db.query(`SELECT session_id AS s, seq, event FROM ${schema}.events ORDER BY session_id, seq`);
  await db.end();
  const logs = new Map<string, SessionEvent[]>();
  for (const r of rows as { s: string; seq: number; event: SessionEvent }[]) {
    const log = logs.get(r.s) ?? [];
    expect(r.seq, `${r.s}: no gap, no duplicate`).toBe(log.length);
    expect(r.event.seq).toBe(r.seq);
    log.push(r.event);
    logs.set(r.s, log);
  }
  const reader = new PostgresStore({ url: pgUrl(), schema, readOnly: true });
  for (const [id, log] of logs) {
    const s = await Session.open(reader, id); // replays every log rule
    expect(s.length).toBe(log.length);
    await s.close();
  }
  await reader.close();

  // --- Every acknowledged event exactly once, where it was acknowledged; no tag twice at all.
  const where = new Map<string, string[]>();
  for (const [id, log] of logs) {
    for (const e of log) {
      if (e.type !== 'user/message' || e.data.source === 'compaction-checkpoint') continue;
      const tag = (e.data.content[0] as { text: string }).text;
      where.set(tag, [...(where.get(tag) ?? []), `${id}#${e.seq}`]);
    }
  }
  const acks = msgs.filter((m) => m.k === 'ack');
  expect(acks.length, 'the workers made progress').toBeGreaterThanOrEqual(MIN_ACKS);
  for (const a of acks) expect(where.get(a.tag!), `ack ${a.tag}`).toEqual([`${a.s}#${a.seq}`]);
  for (const [tag, at] of where) expect(at, `tag ${tag}`).toHaveLength(1);

  // --- Compactions: every bracket closed exactly once (or still open at the very end).
  const commitsInLog = new Map<string, number>();
  for (const [id, log] of logs) {
    let open: number | undefined;
    for (const e of log) {
      if (e.type === 'compaction/start') open = e.seq;
      if (e.type === 'compaction/end') {
        const k = `${id}#${open}`;
        commitsInLog.set(k, (commitsInLog.get(k) ?? 0) + 1);
        open = undefined;
      }
      if (e.type === 'session/end-seed') open = undefined;
    }
  }
  const by = (k: string) => {
    const m = new Map<string, Msg[]>();
    for (const x of msgs.filter((y) => y.k === k)) m.set(`${x.s}#${x.seq}`, [...(m.get(`${x.s}#${x.seq}`) ?? []), x]);
    return m;
  };
  const attempts = by('attempt');
  const acked = by('start-acked');
  const commits = by('commit');
  for (const [k, cs] of commits) {
    expect(cs, `one commit reported for ${k}`).toHaveLength(1);
    expect(commitsInLog.get(k), `commit ${k} is in the log`).toBe(1);
  }
  for (const [, n] of commitsInLog) expect(n).toBe(1);
  const contested = [...attempts].filter(([, a]) => new Set(a.map((x) => x.pid)).size > 1);
  expect(contested.length, 'at least one compaction was contested').toBeGreaterThan(0);
  for (const [k, a] of attempts) {
    // Never two winners at one seq; a winner's compaction/start is what the log holds there.
    const won = acked.get(k) ?? [];
    expect(won.length, `at most one compaction/start stored at ${k} (${a.length} attempts)`).toBeLessThanOrEqual(1);
    const [s, seq] = k.split('#');
    if (won.length === 1) expect(logs.get(s!)![Number(seq)]?.type, `${k} holds the winner's compaction/start`).toBe('compaction/start');
    expect((commits.get(k) ?? []).length).toBeLessThanOrEqual(won.length);
  }
  expect(
    contested.some(([k]) => acked.get(k)?.length === 1 && commits.get(k)?.length === 1),
    'a contested compaction ended with one winner and exactly one commit',
  ).toBe(true);
  expect(
    msgs.some((m) => m.k === 'lost'),
    'the losers of the races got store-conflict',
  ).toBe(true);

  // --- A killed worker's lease was taken over and its orphan bracket recovered by another.
  const recoveredFromKilled = msgs.filter(
    (m) => m.k === 'recovered' && m.clearedLock !== null && m.from && [...killedPids].some((pid) => m.from!.includes(`:${pid}:`)),
  );
  expect(recoveredFromKilled.length).toBeGreaterThan(0);
  for (const m of recoveredFromKilled) expect(m.pid).not.toBe(Number(m.from!.split(':')[1]));
});
