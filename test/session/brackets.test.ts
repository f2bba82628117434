/**
 * The compaction bracket rules (docs/spec.md#5-the-transaction): what may happen between `compaction/start`
 * and `compaction/end`. Each forbidden sequence is refused live on a MemoryStore and a
 * JsonlStore session with nothing observable changed (the stored bytes included), and refused
 * on reopen when another writer put it in the file, with the file left as it was.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { JsonlStore, Session, StoreError, type AppendInput, type EventData } from '../../src/session/index';
import {
  BACKENDS,
  appendAll,
  assistant,
  checkpoint,
  expectRejected,
  header,
  openHarness,
  removeTempDirs,
  stepEnd,
  stepStart,
  system,
  tempDir,
  turnEnd,
  turnStart,
  user,
  type Harness,
} from '../helpers/session';

afterAll(removeTempDirs);

const start = (turn: number | null): AppendInput<'compaction/start'> => ({ type: 'compaction/start', data: { turn, trigger: 'pressure' } });
const summary = (
  shadowedSeqs: number[],
  range = { start: shadowedSeqs[0]!, end: shadowedSeqs[shadowedSeqs.length - 1]! },
): AppendInput<'compaction/summary'> => ({
  type: 'compaction/summary',
  data: { summary: 'S', range, shadowedSeqs, shadowedTokens: 10 * shadowedSeqs.length },
});
const end = (turn: number | null, error?: EventData<'compaction/end'>['error']): AppendInput<'compaction/end'> => ({
  type: 'compaction/end',
  data: error ? { turn, error } : { turn },
});
const failed = { code: 'summary', message: 'the summarizer failed' };

/** system 0, turn/start 1, step/start 2, user 3, assistant 4, user 5, assistant 6, step/end 7: turn 0 open, no step. */
function conversation(s: Session): void {
  appendAll(s, [system('sys'), turnStart(0), stepStart(0, 0), user('u1'), assistant('a1'), user('u2'), assistant('a2'), stepEnd(0, 0)]);
}

/** The engine's commit: start, summary, checkpoint, end. Returns the seqs. */
function compact(s: Session, turn: number | null, span: number[]): { start: number; summary: number; checkpoint: number; end: number } {
  const st = s.append(start(turn));
  const su = s.append(summary(span));
  const cp = s.append(checkpoint(span[0]!, span[span.length - 1]!, [st.seq, su.seq, ...span]));
  const en = s.append(end(turn));
  return { start: st.seq, summary: su.seq, checkpoint: cp.seq, end: en.seq };
}

describe.each(BACKENDS)('compaction bracket rules on a %s store', (backend) => {
  let h: Harness;
  let s: Session;
  beforeEach(async () => {
    h = await openHarness(backend);
    s = h.session;
    conversation(s);
  });
  afterEach(async () => {
    await h.dispose();
  });

  it('the engine sequence passes inside a turn and between turns, and reopens', async () => {
    compact(s, 0, [3, 4]);
    s.append(turnEnd(0));
    const between = compact(s, null, [5, 6]);
    s.append(turnStart(1));
    expect(s.surface.slice(0)).toEqual([0, 10, between.checkpoint]);
    const reopened = await h.reopen();
    expect(reopened.events()).toEqual(s.events());
  });

  it('turn/end while a compaction of that turn is open', async () => {
    const st = s.append(start(0));
    const e = await expectRejected(h, turnEnd(0), 'compaction-open');
    expect(e.message).toContain(`compaction ${st.seq} (turn 0)`);
    s.append(summary([3, 4]));
    await expectRejected(h, turnEnd(0), 'compaction-open');
    s.append(checkpoint(3, 4, [st.seq, st.seq + 1, 3, 4]));
    await expectRejected(h, { type: 'turn/end', data: { turn: 0, reason: 'aborted' } }, 'compaction-open');
    s.append(end(0));
    s.append(turnEnd(0));
  });

  it('turn/start while a between-turns compaction is open', async () => {
    s.append(turnEnd(0));
    const st = s.append(start(null));
    const e = await expectRejected(h, turnStart(1), 'compaction-open');
    expect(e.message).toContain(`compaction ${st.seq} (between turns)`);
    s.append(end(null, failed));
    s.append(turnStart(1));
  });

  it('a second compaction/summary in one bracket', async () => {
    s.append(start(0));
    const first = s.append(summary([3, 4]));
    const e = await expectRejected(h, summary([5, 6]), 'compaction-summary-twice');
    expect(e.message).toContain(`seq ${first.seq}`);
    await expectRejected(h, summary([3, 4]), 'compaction-summary-twice');
    s.append(end(0, failed));
    // The next bracket has a summary of its own.
    s.append(start(0));
    s.append(summary([3, 4]));
  });

  it('a summary whose range is not the first and last of its shadowedSeqs', async () => {
    s.append(start(0));
    await expectRejected(h, summary([3, 4, 5], { start: 4, end: 5 }), 'summary-range');
    await expectRejected(h, summary([3, 4, 5], { start: 3, end: 4 }), 'summary-range');
    await expectRejected(h, summary([3, 4], { start: 4, end: 3 }), 'summary-range');
    await expectRejected(h, summary([4], { start: 3, end: 4 }), 'summary-range');
    s.append(summary([3, 4, 5]));
  });

  it('compaction/end with neither an error nor a summary before it', async () => {
    s.append(start(0));
    const e = await expectRejected(h, end(0), 'compaction-end-without-summary');
    expect(e.message).toContain('error');
    s.append(end(0, failed));
    // A summary of an earlier bracket does not count for the next one.
    compact(s, 0, [3, 4]);
    s.append(start(0));
    await expectRejected(h, end(0), 'compaction-end-without-summary');
    s.append(summary([5, 6]));
    s.append(end(0)); // a summary the checkpoint never followed: allowed, the surface is unchanged
  });

  it('a checkpoint replace with no open bracket, or naming another bracket', async () => {
    await expectRejected(h, checkpoint(3, 4, [3, 4]), 'checkpoint-outside-compaction');
    const done = compact(s, 0, [3, 4]);
    await expectRejected(h, checkpoint(5, 6, [done.start, done.summary, 5, 6]), 'checkpoint-outside-compaction');
    const st = s.append(start(0));
    const su = s.append(summary([5, 6]));
    for (const other of [done.start, done.summary, done.end]) {
      const e = await expectRejected(h, checkpoint(5, 6, [st.seq, su.seq, other, 5, 6]), 'checkpoint-bracket');
      expect(e.message).toContain(`${s.event(other).type} ${other}`);
    }
    // An orphan bracket made stale by session/end-seed is another bracket too.
    await expectRejected(h, checkpoint(5, 6, [su.seq, 5, 6]), 'checkpoint-bracket'); // its own start is not named
    s.append(end(0, failed));
    const orphan = s.append(start(0));
    s.append({ type: 'session/end-seed', data: { reason: 'stopped' } });
    const next = s.append(start(0));
    await expectRejected(h, checkpoint(5, 6, [next.seq, orphan.seq, 5, 6]), 'checkpoint-bracket');
    s.append(checkpoint(5, 6, [next.seq, 5, 6]));
    // Appended checkpoints and plain replaces are not bracket business.
    s.append(end(0, failed));
    s.append(user('a checkpoint-like note', 'compaction-checkpoint'));
  });

  it('a background bracket stays open across step and turn boundaries; every other rule holds (docs/spec.md#13-background-compaction)', async () => {
    const bg: AppendInput<'compaction/start'> = { type: 'compaction/start', data: { turn: 0, trigger: 'pressure', background: true } };
    const st = s.append(bg);
    // The agent works on: a step, the turn's end, a new turn, all while the summary is prepared.
    appendAll(s, [stepStart(0, 1), user('u3'), assistant('a3'), stepEnd(0, 1), turnEnd(0), turnStart(1), user('u4')]);
    await expectRejected(h, start(1), 'compaction-locked');
    await expectRejected(h, end(1, failed), 'compaction-turn'); // it ends naming the turn it started in
    await expectRejected(h, end(0), 'compaction-end-without-summary');
    s.append(summary([3, 4]));
    await expectRejected(h, summary([5, 6]), 'compaction-summary-twice');
    s.append(checkpoint(3, 4, [st.seq, st.seq + 1, 3, 4]));
    s.append(end(0));
    expect(s.lock.held).toBe(false);
    const reopened = await h.reopen();
    expect(reopened.events()).toEqual(s.events());
  });

  it('recover() clears an orphan background bracket left open in a later turn', async () => {
    const st = s.append({ type: 'compaction/start', data: { turn: 0, trigger: 'pressure', background: true } });
    appendAll(s, [turnEnd(0), turnStart(1), user('u3')]);
    s = await h.reopen();
    expect(s.lock).toMatchObject({ held: true, orphan: true, startSeq: st.seq });
    expect(s.recover()).toMatchObject({ clearedLock: st.seq, closedTurn: true });
    expect(s.lock.held).toBe(false);
    s.append(turnStart(2));
  });

  it('recover() ends an orphan bracket before it ends the turn, so the recovered log is valid', async () => {
    const st = s.append(start(0));
    s = await h.reopen();
    const report = s.recover();
    expect(report).toMatchObject({ closedTurn: true, clearedLock: st.seq });
    expect(
      s
        .events()
        .slice(-2)
        .map((e) => e.type),
    ).toEqual(['session/end-seed', 'turn/end']);
    s = await h.reopen();
    expect(s.needsRecovery).toBe(false);
  });
});

describe('the bracket rules read no more than the bracket', () => {
  it('rejecting reads no event of the log; a checkpoint reads only its provenance', () => {
    const s = Session.inMemory();
    conversation(s);
    for (let i = 0; i < 200; i++) s.append(header());
    const st = s.append(start(0));
    s.append(summary([3, 4]));
    const reads = vi.spyOn(s, 'event');
    const events = vi.spyOn(s, 'events');
    expect(s.check(turnEnd(0))?.rule).toBe('compaction-open');
    expect(s.check(summary([5, 6]))?.rule).toBe('compaction-summary-twice');
    expect(s.check(turnStart(1))?.rule).toBe('turn-already-open');
    expect(reads).not.toHaveBeenCalled();
    expect(s.check(checkpoint(3, 4, [st.seq, 3, 4]))).toBeUndefined();
    expect(reads.mock.calls.length).toBeLessThanOrEqual(8);
    expect(events).not.toHaveBeenCalled();
  });
});

describe('a file another writer left with a forbidden sequence', () => {
  const forged: Array<[string, (s: Session) => AppendInput, string]> = [
    ['turn/end inside an open bracket', (s) => (s.append(start(0)), turnEnd(0)), 'compaction-open'],
    ['turn/start inside a between-turns bracket', (s) => (s.append(turnEnd(0)), s.append(start(null)), turnStart(1)), 'compaction-open'],
    ['a second summary', (s) => (s.append(start(0)), s.append(summary([3, 4])), summary([5, 6])), 'compaction-summary-twice'],
    ['a summary range off its shadowedSeqs', (s) => (s.append(start(0)), summary([3, 4], { start: 4, end: 4 })), 'summary-range'],
    ['an end without summary or error', (s) => (s.append(start(0)), end(0)), 'compaction-end-without-summary'],
    ['a checkpoint outside any bracket', () => checkpoint(3, 4, [3, 4]), 'checkpoint-outside-compaction'],
    [
      'a checkpoint naming another bracket',
      (s) => {
        const done = compact(s, 0, [3, 4]);
        const st = s.append(start(0));
        return checkpoint(5, 6, [st.seq, done.summary, 5, 6]);
      },
      'checkpoint-bracket',
    ],
  ];

  it.each(forged)('%s is refused on open, naming the line, and the file is left as it was', async (_name, setup, rule) => {
    const dir = tempDir();
    const store = new JsonlStore(dir, { sync: false });
    const s = await Session.open(store, 'forged');
    conversation(s);
    const bad = setup(s);
    expect(s.check(bad)?.rule).toBe(rule);
    await s.close();
    // Another writer appends the line this session refused.
    const path = store.pathOf('forged');
    const line = JSON.stringify({ seq: s.length, time: new Date(0).toISOString(), ...bad });
    writeFileSync(path, readFileSync(path, 'utf8') + line + '\n');
    const bytes = readFileSync(path, 'utf8');
    const err = await Session.open(store, 'forged').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StoreError);
    expect((err as StoreError).code).toBe('store-corrupt');
    expect((err as StoreError).line).toBe(s.length + 1);
    expect((err as StoreError).message).toContain(`[rule: ${rule}]`);
    expect(readFileSync(path, 'utf8')).toBe(bytes);
  });
});
