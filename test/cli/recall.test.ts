/**
 * `xcompact inspect <session> --recall QUERY` (src/cli/inspect-recall.ts): the recall tool's
 * answer over a stored session, read-only; a query the tool refuses is a usage error (exit 2).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliError } from '../../src/cli/errors';
import { recallArgs, runInspectRecall } from '../../src/cli/inspect-recall';
import { JsonlStore, Session, SessionWriter } from '../../src/session/index';
import { compact, errorTurn, fileText, readTurn } from '../helpers/recall';

let dir: string;
let file: string;
let handle: string;

function sink(): { out: NodeJS.WriteStream; text: () => string } {
  let text = '';
  return { out: { write: (s: string) => ((text += s), true) } as unknown as NodeJS.WriteStream, text: () => text };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'xcompact-recall-cli-'));
  const session = await Session.open(new JsonlStore(dir), 'agent');
  const w = new SessionWriter(session);
  w.system('You are a coding agent.');
  readTurn(w, 'Read the loader.', ['src/loader.ts'], 'Read.');
  errorTurn(w, 'npm test', 'FAIL test/loader.test.ts > loads the config: expected 3 to be 4');
  handle = `cp-${await compact(session, { recall: true })}`;
  readTurn(w, 'Last.', ['src/last.ts'], 'Done.');
  await session.close();
  file = join(dir, 'agent.jsonl');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('xcompact inspect --recall', () => {
  it('text, /regex/ and handles: the tool answer, and the file is not touched', async () => {
    const bytes = readFileSync(file);
    const a = sink();
    await runInspectRecall(file, { recall: 'expected 3 to be 4' }, a.out);
    expect(a.text()).toContain('FAIL test/loader.test.ts > loads the config: expected 3 to be 4');
    const b = sink();
    await runInspectRecall(file, { recall: '/loader\\.ts line \\d+: export const v39/' }, b.out);
    expect(b.text()).toMatch(/^recall: 1 match for \/loader/);
    const c = sink();
    const answer = await runInspectRecall(file, { recall: handle, recallTokens: 8000, json: true }, c.out);
    expect(JSON.parse(c.text())).toEqual(answer);
    expect(answer.text).toContain(fileText('src/loader.ts'));
    expect(readFileSync(file).equals(bytes)).toBe(true);
  });

  it('a query the tool refuses is a usage error with its explanation', async () => {
    const err = await runInspectRecall(file, { recall: '/([bad/' }, sink().out).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).exitCode).toBe(2);
    expect((err as Error).message).toMatch(/^inspect --recall: query is not a regular expression recall can run \(unterminated/);
  });

  it('reads handles and /regex/ from the command line', () => {
    expect(recallArgs('cp-12', undefined)).toEqual({ handle: 'cp-12' });
    expect(recallArgs('/a.b/', 100)).toEqual({ query: 'a.b', regex: true, maxTokens: 100 });
    expect(recallArgs('src/a.ts', undefined)).toEqual({ query: 'src/a.ts' });
  });
});
