/**
 * Store benchmark: PostgresStore against JsonlStore, same workload, same run.
 *
 * - appends/s for one session, flushing after every step (6 events: what an agent waits
 *   for) and after every 100 events (a bulk import);
 * - aggregate appends/s of 8 concurrent writers on 8 sessions (one store each, as 8
 *   workers would have), flushing after every step;
 * - reopen time of a 100k-event session (PostgreSQL: a read-only open, as a standby or
 *   dashboard does; JSONL: an open, which also takes the lock).
 *
 * PostgreSQL is the one at XCOMPACT_PG_URL, else an embedded server started for the run
 * (fsync off, like the JSONL store's `sync: false` here: the figures compare the stores,
 * not the disks). Ratios are PostgreSQL ÷ JSONL. Run: `npx tsx bench/store.ts`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { JsonlStore, PostgresStore, Session, type AppendInput, type SessionStore } from '../src/session/index';
import { startPgServerProcess } from '../test/helpers/pg-server';

const LOREM = 'The quick brown fox jumps over the lazy dog; const x = await read("src/index.ts"); ';
const text = (n: number) => LOREM.repeat(Math.ceil(n / LOREM.length)).slice(0, n);
const USER = [80, 200, 600].map(text);
const ASSISTANT = [40, 300, 900].map(text);

/** One agent step as a turn: 6 events, 2 of them messages. */
function stepEvents(turn: number): AppendInput[] {
  return [
    { type: 'turn/start', data: { turn } },
    { type: 'user/message', data: { content: [{ type: 'text', text: USER[turn % 3]! }] }, surfaceOp: 'append' },
    { type: 'step/start', data: { turn, step: 0 } },
    { type: 'assistant/message', data: { content: [{ type: 'text', text: ASSISTANT[turn % 3]! }] }, surfaceOp: 'append' },
    { type: 'step/end', data: { turn, step: 0 } },
    { type: 'turn/end', data: { turn } },
  ];
}

/** Appends `events` (rounded up to whole steps) to a fresh session, flushing every `flushEvery` events. */
async function writeSession(store: SessionStore, id: string, events: number, flushEvery: number): Promise<{ events: number; ms: number }> {
  const s = await Session.open(store, id);
  const t0 = performance.now();
  let n = 0;
  let sinceFlush = 0;
  for (let turn = 0; n < events; turn++) {
    for (const e of stepEvents(turn)) s.append(e);
    n += 6;
    sinceFlush += 6;
    if (sinceFlush >= flushEvery) {
      await s.flush();
      sinceFlush = 0;
    }
  }
  await s.flush();
  const ms = performance.now() - t0;
  await s.close();
  return { events: n, ms };
}

interface Pair {
  jsonl: number;
  pg: number;
}

const rate = (r: { events: number; ms: number }) => (r.events / r.ms) * 1000;
const f0 = (x: number) => Math.round(x).toLocaleString('en-US');

export async function run(): Promise<void> {
  const server = await startPgServerProcess();
  const dir = await mkdtemp(join(tmpdir(), 'xcompact-bench-store-'));
  const schema = `bench_${Date.now().toString(36)}`;
  const stores: PostgresStore[] = [];
  const pgStore = (readOnly = false) => {
    const s = new PostgresStore({ url: server.url, schema, readOnly });
    stores.push(s);
    return s;
  };
  const jsonl = () => new JsonlStore(dir, { sync: false });
  try {
    await pgStore().migrate();
    // Warm-up: connections, JIT.
    await writeSession(jsonl(), 'warm', 600, 6);
    await writeSession(pgStore(), 'warm', 600, 6);

    const perStep: Pair = { jsonl: rate(await writeSession(jsonl(), 'one-step', 3_000, 6)), pg: rate(await writeSession(pgStore(), 'one-step', 3_000, 6)) };
    const bulk: Pair = { jsonl: rate(await writeSession(jsonl(), 'one-bulk', 12_000, 100)), pg: rate(await writeSession(pgStore(), 'one-bulk', 12_000, 100)) };

    const aggregate = async (make: () => SessionStore): Promise<number> => {
      const t0 = performance.now();
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => writeSession(make(), `w${i}`, 1_200, 6)));
      const events = results.reduce((a, r) => a + r.events, 0);
      return (events / (performance.now() - t0)) * 1000;
    };
    const eight: Pair = { jsonl: await aggregate(jsonl), pg: await aggregate(() => pgStore()) };

    await writeSession(jsonl(), 'big', 100_000, 1_000);
    await writeSession(pgStore(), 'big', 100_000, 1_000);
    const reopen = async (store: SessionStore): Promise<number> => {
      const t0 = performance.now();
      const s = await Session.open(store, 'big');
      const ms = performance.now() - t0;
      if (s.length < 100_000) throw new Error(`reopened ${s.length} events, expected ≥ 100000`);
      await s.close();
      return ms;
    };
    const reopenMs: Pair = { jsonl: await reopen(jsonl()), pg: await reopen(pgStore(true)) };

    const rows: Array<[string, string, string, string]> = [
      ['appends/s, one session, flush per step (6 events)', f0(perStep.jsonl), f0(perStep.pg), (perStep.pg / perStep.jsonl).toFixed(2)],
      ['appends/s, one session, flush per 100 events', f0(bulk.jsonl), f0(bulk.pg), (bulk.pg / bulk.jsonl).toFixed(2)],
      ['appends/s, 8 concurrent writers (aggregate)', f0(eight.jsonl), f0(eight.pg), (eight.pg / eight.jsonl).toFixed(2)],
      ['reopen of a 100k-event session (ms)', f0(reopenMs.jsonl), f0(reopenMs.pg), (reopenMs.pg / reopenMs.jsonl).toFixed(2)],
    ];
    const w = [52, 12, 12, 16];
    const line = (c: string[]) => c.map((x, i) => (i === 0 ? x.padEnd(w[i]!) : x.padStart(w[i]!))).join('  ');
    console.log(line(['measure', 'JSONL', 'PostgreSQL', 'PG ÷ JSONL']));
    for (const r of rows) console.log(line(r));
    console.log(
      `\n8 writers: PostgreSQL aggregate is ${(eight.pg / perStep.pg).toFixed(1)}× its one-session rate, JSONL ${(eight.jsonl / perStep.jsonl).toFixed(1)}×.` +
        `\nServer: ${process.env.XCOMPACT_PG_URL ? 'XCOMPACT_PG_URL' : 'embedded PostgreSQL (fsync off)'}; JSONL with sync: false; both local.`,
    );
  } finally {
    await Promise.all(stores.map((s) => s.close()));
    // Leave a server of your own as it was.
    const pg = (await import('pg')).default;
    const c = new pg.Client({ connectionString: server.url });
    await c
      .connect()
      .then(() => c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`))
      .catch(() => undefined)
      .finally(() => c.end().catch(() => undefined));
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run();
}
