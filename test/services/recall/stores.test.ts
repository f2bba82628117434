/**
 * Recall on the durable stores: a session compacted and pruned with recall on, closed and
 * reopened (JSONL and PostgreSQL), answers the same; a recall call writes nothing; a second
 * process reading the PostgreSQL session without a lease can recall from it too.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { recallTool } from '../../../src/services/recall/index';
import { JsonlStore, Session, SessionWriter, type SessionStore } from '../../../src/session/index';
import { closePgStores, pgStore } from '../../helpers/pg';
import { compact, errorTurn, fileText, pruneAll, readTurn } from '../../helpers/recall';

const dirs: string[] = [];
afterAll(async () => {
  await closePgStores();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const STORES: Array<[string, () => SessionStore]> = [
  [
    'JSONL',
    () => {
      const d = mkdtempSync(join(tmpdir(), 'xcompact-recall-store-'));
      dirs.push(d);
      return new JsonlStore(d);
    },
  ],
  ['PostgreSQL', () => pgStore()],
];

for (const [name, makeStore] of STORES) {
  describe(`recall on the ${name} store`, () => {
    it('answers the same after a reopen, and a recall call writes nothing', async () => {
      const store = makeStore();
      const first = await Session.open(store, 'recall');
      const w = new SessionWriter(first);
      w.system('You are a coding agent.');
      readTurn(w, 'Read the loader.', ['src/loader.ts', 'src/big.ts'], 'Read.');
      errorTurn(w, 'npm run build', 'error TS2304: Cannot find name "RetryPolicyX".');
      readTurn(w, 'Read more.', ['src/more.ts'], 'Read.');
      pruneAll(first, 2_000, true);
      const start = await compact(first, { recall: true });
      readTurn(w, 'Last.', ['src/last.ts'], 'Done.');
      const asked = [{ query: 'RetryPolicyX' }, { path: 'src/loader.ts' }, { handle: `cp-${start}`, maxTokens: 8000 }];
      const before = asked.map((a) => recallTool(first).run(a).text);
      const length = first.length;
      await first.close();

      const again = await Session.open(store, 'recall');
      try {
        expect(again.length).toBe(length);
        const after = asked.map((a) => recallTool(again).run(a).text);
        expect(after).toEqual(before);
        expect(after[0]).toContain('error TS2304: Cannot find name "RetryPolicyX".');
        expect(after[1]).toContain(fileText('src/loader.ts'));
        expect(again.length).toBe(length);
      } finally {
        await again.close();
      }
    });
  });
}
