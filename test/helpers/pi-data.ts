/**
 * The real pi transcript, committed as a test fixture (test/fixtures/pi-large-session.jsonl,
 * MIT, from github.com/badlogic/pi-mono; licence next to it) so that every test using it runs
 * wherever the repository is cloned. A missing fixture is an error, never a skipped test.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const PI_FILE_NAME = 'pi-large-session.jsonl';
export const PI_FIXTURE = fileURLToPath(new URL(`../fixtures/${PI_FILE_NAME}`, import.meta.url));

export function findPiData(): { path: string; searched: string[] } {
  if (!existsSync(PI_FIXTURE)) throw new Error(`the pi transcript fixture is missing: ${PI_FIXTURE} (it is committed with the repository)`);
  return { path: PI_FIXTURE, searched: [PI_FIXTURE] };
}
