/**
 * Reopening skips the shape checks of the lines the store vouches for (docs/sessions-and-stores.md#reopening-a-long-session): the prefix a
 * JSONL sidecar covers, byte for byte, when it says those lines were checked by this version's
 * log rules before they were stored. What is skipped must change nothing: the reopened log is
 * the one a full check gives. Lines checked under other rules (an older sidecar, or a rules
 * version bump) are checked again, and a line the rules refuse is still a StoreError.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { JsonlStore, Session, StoreError } from '../../src/session/index';
import { snapshotPath, writeSnapshot } from '../../src/session/stores/jsonl-snapshot';
import { LOG_RULES_VERSION } from '../../src/session/validate';
import { appendAll, assistant, header, removeTempDirs, result, stepEnd, stepStart, tempDir, turnEnd, turnStart, user } from '../helpers/session';

afterAll(removeTempDirs);

/** A closed JSONL session of a few steps whose writer claimed the snapshot (so close saves the sidecar). */
async function writtenSession(dir: string, id: string): Promise<string> {
  const s = await Session.open(new JsonlStore(dir, { sync: false }), id);
  s.claimSnapshot(() => 'derived state');
  appendAll(s, [
    turnStart(0),
    header(),
    user('fix the build'),
    stepStart(0, 0),
    header(),
    assistant('reading', ['c1']),
    result('c1', 'file text'),
    stepEnd(0, 0),
    turnEnd(0),
  ]);
  await s.close();
  return join(dir, `${id}.jsonl`);
}

async function reopened(dir: string, id: string) {
  const s = await Session.open(new JsonlStore(dir, { sync: false }), id);
  const out = {
    events: JSON.parse(JSON.stringify(s.events())) as unknown,
    messages: JSON.parse(JSON.stringify(s.deriveMessages())) as unknown,
    snapshot: s.claimSnapshot(() => undefined)?.stored,
  };
  await s.close();
  return out;
}

/** The sidecar's header line with `rules` set to `rules` (undefined: removed, as an older writer wrote it). */
function setRules(file: string, rules: number | undefined): void {
  const [head, ...rest] = readFileSync(snapshotPath(file), 'utf8').split('\n');
  const h = JSON.parse(head!) as Record<string, unknown>;
  if (rules === undefined) delete h.rules;
  else h.rules = rules;
  writeFileSync(snapshotPath(file), [JSON.stringify(h), ...rest].join('\n'));
}

describe('replaying lines the store vouches for', () => {
  it('gives the same log as checking every line', async () => {
    const dir = tempDir();
    const file = await writtenSession(dir, 's');
    const vouched = await reopened(dir, 's');
    expect(vouched.snapshot?.checked).toBe(true);
    expect(vouched.snapshot?.events).toBe(9);
    setRules(file, undefined);
    const checked = await reopened(dir, 's');
    expect(checked.snapshot?.checked).toBe(false);
    expect(vouched.events).toEqual(checked.events);
    expect(vouched.messages).toEqual(checked.messages);
  });

  it.each([
    ['an older sidecar (no rules recorded)', undefined],
    ['other log rules', LOG_RULES_VERSION + 1],
  ])('checks again the lines of %s: a line the rules refuse is a StoreError, the file unchanged', async (_what, rules) => {
    const dir = tempDir();
    const file = await writtenSession(dir, 'bad');
    // Line 3 (the user message) gets content the schema refuses; the sidecar is rebound to the new bytes.
    const lines = readFileSync(file, 'utf8').split('\n');
    const bad = JSON.parse(lines[2]!) as { data: { content: unknown } };
    bad.data.content = 42;
    lines[2] = JSON.stringify(bad);
    writeFileSync(file, lines.join('\n'));
    const bytes = readFileSync(file);
    await writeSnapshot(file, 9, bytes.length, 'derived state');
    setRules(file, rules);
    const err = await Session.open(new JsonlStore(dir, { sync: false }), 'bad').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StoreError);
    expect((err as StoreError).code).toBe('store-corrupt');
    expect((err as Error).message).toMatch(/bad\.jsonl:3: .*content/);
    expect(readFileSync(file).equals(bytes)).toBe(true);
  });
});
