/**
 * The CLI on PostgreSQL sessions: `demo --store`, `inspect postgres://…#id` (read-only, even
 * while a writer holds the session), `compact` into a file or `--in-place`, the form in
 * `--help`, and bad references as usage errors that write nothing.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { runCompact } from '../../src/cli/compact';
import { runDemo } from '../../src/cli/demo';
import { CliError } from '../../src/cli/errors';
import { runInspect } from '../../src/cli/inspect';
import { PostgresStore, Session, SessionWriter } from '../../src/session/index';
import { xcompact } from '../helpers/cli';
import { freshSchema, pgUrl } from '../helpers/pg';
import { removeTempDirs, tempDir } from '../helpers/session';

afterAll(removeTempDirs);
afterEach(() => {
  vi.restoreAllMocks();
});

/** The pools of the PostgresStores the CLI opens sessions with, from now on: each must be ended once the command returns. */
function watchPools(): pg.Pool[] {
  const pools: pg.Pool[] = [];
  const open = PostgresStore.prototype.open;
  vi.spyOn(PostgresStore.prototype, 'open').mockImplementation(async function (this: PostgresStore, id: string) {
    const pool = (this as unknown as { pool(): Promise<pg.Pool> }).pool();
    pools.push(await pool);
    return open.call(this, id);
  });
  return pools;
}

function sink(): NodeJS.WriteStream & { text(): string } {
  let text = '';
  const w = new Writable({
    write(chunk, _enc, cb) {
      text += String(chunk);
      cb();
    },
  }) as unknown as NodeJS.WriteStream & { text(): string };
  w.text = () => text;
  return w;
}

async function count(id: string): Promise<number> {
  const c = new pg.Client({ connectionString: pgUrl() });
  await c.connect();
  try {
    return Number((await c.query('SELECT count(*) AS n FROM xcompact.events WHERE session_id = $1', [id])).rows[0].n);
  } finally {
    await c.end();
  }
}

describe('CLI with a PostgreSQL session', () => {
  const id = freshSchema('demo'); // a unique session id
  const ref = () => `${pgUrl()}#${id}`;

  it('demo --store keeps the session in PostgreSQL; inspect reads it by url#id or id + --store, without a lease', async () => {
    const dir = tempDir();
    const demoPools = watchPools();
    const report = await runDemo({ steps: 10, window: 16384, out: dir, seed: 1, quiet: true, color: false, store: { url: pgUrl(), session: id } }, sink());
    expect(demoPools.length).toBe(1);
    expect(demoPools.every((p) => p.ended)).toBe(true);
    vi.restoreAllMocks();
    expect(report.sessionFile).toContain(`#${id}`);
    expect(report.sessionFile).not.toContain(new URL(pgUrl()).password || '\u0000');
    expect(existsSync(join(dir, 'demo.jsonl'))).toBe(false);
    const stored = await count(id);
    expect(stored).toBe(report.events);

    // A writer holds the session: inspect still reads it (read-only needs no lease).
    const writer = await Session.open(new PostgresStore({ url: pgUrl() }), id);
    const a = await runInspect(ref(), { json: true }, sink());
    const b = await runInspect(id, { json: true, store: pgUrl() }, sink());
    await writer.close();
    expect(a.events).toBe(stored);
    expect(b.events).toBe(stored);
    expect(a.file).toBe(b.file);
    expect(a.checkpoints.length).toBeGreaterThan(0);
    expect(await count(id)).toBe(stored);
  });

  it('compact writes a JSONL copy by default and leaves the PostgreSQL session alone; --in-place appends to it', async () => {
    const before = await count(id);
    const dir = tempDir();
    const output = join(dir, 'copy.jsonl');
    const r = await runCompact(ref(), { summarizer: 'extractive', apiKeyEnv: 'OPENAI_API_KEY', maxTokens: 1024, output }, sink());
    expect(r.compacted).toBe(true);
    expect(readFileSync(output, 'utf8').trim().split('\n').length).toBeGreaterThan(before);
    expect(await count(id)).toBe(before);

    const pools = watchPools();
    const inPlace = await runCompact(id, { summarizer: 'extractive', apiKeyEnv: 'OPENAI_API_KEY', maxTokens: 1024, inPlace: true, store: pgUrl() }, sink());
    expect(pools.length).toBeGreaterThan(0);
    expect(pools.map((p) => p.ended)).not.toContain(false);
    vi.restoreAllMocks();
    expect(inPlace.compacted).toBe(true);
    expect(inPlace.output).toContain(`#${id}`);
    const after = await Session.open(new PostgresStore({ url: pgUrl(), readOnly: true }), id);
    expect(after.length).toBeGreaterThan(before);
    expect(after.events().at(-1)?.type).toBe('compaction/end');
    await after.close();
  });

  it('--in-place checks the events it appends after: what another writer appended before our lease is not recovered without --recover', async () => {
    // Another writer appends (a turn left open, as a crashed agent leaves it) just before our
    // writer lease is taken: whatever compact checked must include these events.
    const open = PostgresStore.prototype.open;
    let done = false;
    vi.spyOn(PostgresStore.prototype, 'open').mockImplementation(async function (this: PostgresStore, sid: string) {
      if (!this.readOnly && !done) {
        done = true;
        const otherStore = new PostgresStore({ url: pgUrl() });
        const other = await Session.open(otherStore, sid);
        const w = new SessionWriter(other);
        w.startTurn();
        w.user('a prompt whose turn never ended');
        await other.close();
        await otherStore.close();
      }
      return open.call(this, sid);
    });
    const before = await count(id);
    const err = await runCompact(id, { summarizer: 'extractive', apiKeyEnv: 'OPENAI_API_KEY', maxTokens: 1024, inPlace: true, store: pgUrl() }, sink()).catch(
      (e: unknown) => e,
    );
    vi.restoreAllMocks();
    expect(done).toBe(true);
    expect(err).toBeInstanceOf(CliError);
    expect((err as Error).message).toMatch(/ends mid-flight \(turn \d+ is open\).*--recover/);
    // Nothing of ours was written, and the lease was released.
    expect(await count(id)).toBe(before + 2);
    const next = await Session.open(new PostgresStore({ url: pgUrl() }), id);
    expect(next.events().at(-1)?.type).toBe('user/message');
    await next.close();
  });

  it('--help says the PostgreSQL form for inspect, compact and demo', async () => {
    for (const name of ['inspect', 'compact', 'demo']) {
      const { stdout, code } = await xcompact([name, '--help']);
      expect(code).toBe(0);
      expect(stdout, name).toContain('--store <postgres-url>');
      expect(stdout.replace(/\s+/g, ' '), name).toContain('postgres://user:password@host:5432/database');
    }
  });

  it('bad references are clear errors and write nothing', async () => {
    const noId = await runInspect(pgUrl(), {}, sink()).catch((e: unknown) => e);
    expect(noId).toBeInstanceOf(CliError);
    expect((noId as CliError).message).toMatch(/names no session/);
    expect((noId as Error).message).not.toContain(new URL(pgUrl()).password || '\u0000');

    const badStore = await runInspect('x', { store: 'mysql://h/db' }, sink()).catch((e: unknown) => e);
    expect((badStore as Error).message).toMatch(/not a postgres:\/\/ url/);

    const unreachable = new URL(pgUrl());
    unreachable.port = '1';
    const down = await runInspect(`${unreachable.href}#s1`, {}, sink()).catch((e: unknown) => e);
    expect(down).toBeInstanceOf(CliError);
    expect((down as Error).message).toMatch(/cannot reach the PostgreSQL server/);

    const empty = await runCompact(
      `${pgUrl()}#no-such-session-${id}`,
      { summarizer: 'extractive', apiKeyEnv: 'OPENAI_API_KEY', maxTokens: 1024, inPlace: true },
      sink(),
    ).catch((e: unknown) => e);
    expect((empty as Error).message).toMatch(/is empty/);
    expect(await count(`no-such-session-${id}`)).toBe(0);
  });
});
