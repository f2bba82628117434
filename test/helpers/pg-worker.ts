/**
 * One worker process of the multi-process PostgresStore test (test/session/stores/multiprocess.test.ts).
 *
 * It loops over random sessions: open as writer (a live lease elsewhere → try another),
 * recover() what a stopped writer left, append one turn, and compact when the surface is
 * long. Every fact the parent checks later is reported over IPC only once it is durable
 * (after flush resolved). `STALL` makes its first compaction stop the whole process (SIGSTOP
 * to itself: no timers, no lease renewal, as a long GC pause or a partition would) until the
 * parent resumes it, either after it decided to compact at a seq but before it appended the
 * `compaction/start`, or inside the bracket.
 * The parent tells it to compact a given session now (`compact`), and to stop.
 */
import { PostgresStore, Session, StoreError } from '../../src/session/index';

const url = process.env.PG_URL!;
const schema = process.env.PG_SCHEMA!;
const wid = process.env.WORKER_ID!;
const leaseMs = Number(process.env.LEASE_MS);
const sessions = Number(process.env.SESSIONS);
let stall = process.env.STALL as 'before' | 'bracket' | 'none';

const send = (m: Record<string, unknown>) => process.send?.({ w: wid, pid: process.pid, ...m });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Tells the parent, then stops this process until the parent sends SIGCONT. */
const pause = (m: Record<string, unknown>) =>
  new Promise<void>((resolve) => {
    process.send!({ w: wid, pid: process.pid, ...m }, () => {
      process.kill(process.pid, 'SIGSTOP');
      resolve();
    });
  });

const forced: string[] = [];
let stopping = false;
process.on('message', (m: { cmd: string; session?: string }) => {
  if (m.cmd === 'stop') stopping = true;
  if (m.cmd === 'compact' && m.session) forced.push(m.session);
});

const store = new PostgresStore({ url, schema, leaseMs });
let counter = 0;

const text = (t: string) => [{ type: 'text' as const, text: t }];

async function turn(s: Session, sid: string): Promise<void> {
  const tag = `${wid}/${process.pid}/${counter++}`;
  const t = s.lastTurn + 1;
  s.append({ type: 'turn/start', data: { turn: t } });
  const u = s.append({ type: 'user/message', data: { content: text(tag) }, surfaceOp: 'append' });
  s.append({ type: 'step/start', data: { turn: t, step: 0 } });
  s.append({ type: 'assistant/message', data: { content: text(`reply to ${tag}`) }, surfaceOp: 'append' });
  s.append({ type: 'step/end', data: { turn: t, step: 0 } });
  s.append({ type: 'turn/end', data: { turn: t } });
  await s.flush();
  send({ k: 'ack', s: sid, seq: u.seq, tag });
}

async function compact(s: Session, sid: string): Promise<void> {
  const surface = s.surface.slice(0);
  if (surface.length < 4) return;
  const shadowed = surface.slice(0, surface.length - 2);
  const startSeq = s.length;
  send({ k: 'attempt', s: sid, seq: startSeq });
  if (stall === 'before') {
    stall = 'none';
    await pause({ k: 'stalling', s: sid, seq: startSeq });
  }
  const start = s.append({ type: 'compaction/start', data: { turn: null, trigger: 'pressure' } });
  await s.flush();
  send({ k: 'start-acked', s: sid, seq: start.seq });
  send({ k: 'in-bracket', s: sid, seq: start.seq });
  await sleep(Math.random() * 60);
  if (stall === 'bracket') {
    stall = 'none';
    await pause({ k: 'stalling', s: sid, seq: startSeq });
  }
  const tag = `${wid}/${process.pid}/c${counter++}`;
  const range = { start: shadowed[0]!, end: shadowed[shadowed.length - 1]! };
  const summary = s.append({
    type: 'compaction/summary',
    data: { summary: `summary by ${tag}`, range, shadowedSeqs: shadowed, shadowedTokens: 10 * shadowed.length },
  });
  s.append({
    type: 'user/message',
    data: { content: text(`<compacted-summary>\nsummary by ${tag}\n</compacted-summary>`), source: 'compaction-checkpoint' },
    surfaceOp: { op: 'replace', ...range },
    sourceEventSeqs: [start.seq, summary.seq, ...shadowed],
  });
  s.append({ type: 'compaction/end', data: { turn: null } });
  await s.flush();
  send({ k: 'commit', s: sid, seq: start.seq, tag });
}

async function visit(sid: string, force: boolean): Promise<boolean> {
  let s: Session;
  try {
    s = await Session.open(store, sid);
  } catch (err) {
    if (err instanceof StoreError && err.code === 'store-locked') return false;
    throw err;
  }
  let phase = 'open';
  try {
    if (s.needsRecovery) {
      phase = 'recover';
      const report = s.recover();
      await s.flush();
      send({ k: 'recovered', s: sid, clearedLock: report.clearedLock ?? null, from: s.loadReport.leaseTakenOver?.from ?? null });
    }
    if (!force) {
      phase = 'turn';
      await turn(s, sid);
    }
    // A worker that is to stop compacts as soon as it can, so every run has its contests.
    if (force || s.surface.length > 6 || (stall !== 'none' && s.surface.length >= 4)) {
      phase = 'compact';
      await compact(s, sid);
    }
  } catch (err) {
    if (!(err instanceof StoreError && err.code === 'store-conflict')) throw err;
    send({ k: 'lost', s: sid, phase, last: s.events().at(-1)?.type ?? null });
  } finally {
    await s.close().catch(() => undefined);
  }
  return true;
}

async function main(): Promise<void> {
  send({ k: 'ready' });
  while (!stopping) {
    const f = forced.shift();
    if (f !== undefined) {
      send({ k: 'busy', on: true });
      const deadline = Date.now() + leaseMs * 15;
      let tries = 1;
      while (!(await visit(f, true)) && Date.now() < deadline) {
        tries++;
        await sleep(leaseMs / 4);
      }
      send({ k: 'busy', on: false, s: f, seq: tries });
      continue;
    }
    await visit(`s${Math.floor(Math.random() * sessions)}`, false);
    await sleep(5 + Math.random() * 20);
  }
  await store.close();
  send({ k: 'done' });
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    send({ k: 'error', message: err instanceof Error ? `${err.name}: ${err.message}` : String(err), code: (err as { code?: string }).code ?? null });
    process.exit(1);
  },
);
