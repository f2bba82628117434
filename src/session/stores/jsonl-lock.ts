/**
 * The one-writer lock of a JsonlStore session: `<file>.lock` is a directory holding exactly one
 * `owner-<token>` file (JSON: pid, host, since, token) while a writer holds the session.
 *
 * Why a directory: POSIX rename(2) of a directory onto an existing one succeeds only if the target
 * is empty, atomically. That is the compare-and-swap the takeover of a dead writer's lock needs:
 * - acquire: fill a private candidate directory with my owner file, rename it onto the lock; it
 *   lands only where there is no lock or an empty (released) one, so at most one renamer wins;
 * - take over: when the owner's process is gone, unlink that owner's file by its unique name (a
 *   live lock that replaced it has another name, so a taker acting on an old reading removes
 *   nothing), then race to rename as above;
 * - release: unlink my own owner file, then rmdir the lock, which fails harmlessly once someone
 *   else has moved in.
 * An owner's file is removed only by its owner or by someone who saw its process dead, so two
 * live writers can never both hold the lock. A plain-file lock from an earlier release is
 * honoured while its process lives and removed with unlink when stale (unlink never removes a
 * directory, so it cannot hit a current lock).
 */
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { StoreError } from '../errors';

const OWNER_PREFIX = 'owner-';
/** Renames lost to other processes before giving up: each loss means a live writer appeared or a stale one was cleared. */
const MAX_ROUNDS = 8;

interface Owner {
  pid?: unknown;
  host?: unknown;
  since?: unknown;
  token?: unknown;
}

/** Tokens of the locks this process holds (any JsonlStore instance). */
const heldHere = new Set<string>();

export function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errnoOf(err) === 'EPERM';
  }
}

export interface HeldLock {
  readonly lockPath: string;
  readonly token: string;
}

/** Takes the writer lock of `file`, or throws `store-locked` naming the live owner. */
export async function acquireLock(file: string, lockPath: string): Promise<HeldLock> {
  const token = randomUUID();
  const owner = { pid: process.pid, host: hostname(), since: new Date().toISOString(), token };
  const candidate = `${lockPath}.${token}.tmp`;
  try {
    await fs.mkdir(candidate);
    await fs.writeFile(join(candidate, OWNER_PREFIX + token), JSON.stringify(owner), { flag: 'wx' });
  } catch (err) {
    await fs.rm(candidate, { recursive: true, force: true });
    throw new StoreError('store-io', `cannot create lock ${lockPath}: ${String(err)}`, { file, cause: err });
  }
  try {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      try {
        await fs.rename(candidate, lockPath);
        heldHere.add(token);
        await verifyOwnership(file, lockPath, token);
        return { lockPath, token };
      } catch (err) {
        if (err instanceof StoreError) throw err;
        const code = errnoOf(err);
        // ENOTEMPTY/EEXIST: a lock with an owner; ENOTDIR: a plain-file lock of an earlier release.
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST' && code !== 'ENOTDIR') {
          throw new StoreError('store-io', `cannot create lock ${lockPath}: ${String(err)}`, { file, cause: err });
        }
      }
      await clearIfStale(file, lockPath);
    }
    throw new StoreError('store-locked', `${file}: lost the race for ${lockPath} to other processes ${MAX_ROUNDS} times; try again.`, { file });
  } finally {
    // After a successful rename the candidate is gone and this does nothing.
    await fs.rm(candidate, { recursive: true, force: true }).catch(() => undefined);
  }
}

/**
 * Releases a lock taken by {@link acquireLock}. Never removes another writer's lock. Returns
 * the error when this writer's owner file could not be removed (a file system that turned
 * read-only, say): the lock then still names this live process, so other processes are
 * refused until it exits, while a reopen in this process takes it back (see isStale).
 */
export async function releaseLock(lock: HeldLock): Promise<Error | undefined> {
  heldHere.delete(lock.token);
  let failure: Error | undefined;
  try {
    await fs.unlink(join(lock.lockPath, OWNER_PREFIX + lock.token));
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') failure = err as Error;
  }
  await fs.rmdir(lock.lockPath).catch(() => undefined);
  return failure;
}

/** After winning the rename: the lock holds my owner file and nothing else (a check of the protocol, not a retry). */
async function verifyOwnership(file: string, lockPath: string, token: string): Promise<void> {
  const entries = await fs.readdir(lockPath);
  const mine = entries.length === 1 && entries[0] === OWNER_PREFIX + token;
  const owner = mine ? (JSON.parse(await fs.readFile(join(lockPath, entries[0]!), 'utf8')) as Owner) : undefined;
  if (!mine || owner?.token !== token || owner.pid !== process.pid) {
    heldHere.delete(token);
    // Our owner file names a live pid (ours): left behind, it would lock the session for everyone until this process exits.
    await fs.unlink(join(lockPath, OWNER_PREFIX + token)).catch(() => undefined);
    throw new StoreError('store-locked', `${file}: ${lockPath} holds ${entries.join(', ') || 'nothing'} right after this process took it; refusing to write.`, {
      file,
    });
  }
}

/**
 * Looks at the lock that blocked a rename: a live (or unreadable, or foreign-host) owner is
 * `store-locked`; a dead owner's file is removed so the next rename can land; an empty or
 * vanished lock needs nothing.
 */
async function clearIfStale(file: string, lockPath: string): Promise<void> {
  let isDir: boolean;
  try {
    isDir = (await fs.lstat(lockPath)).isDirectory();
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return;
    throw new StoreError('store-io', `cannot read lock ${lockPath}: ${String(err)}`, { file, cause: err });
  }
  if (!isDir) {
    const owner = await readOwner(lockPath);
    if (owner === 'gone') return;
    if (!isStale(owner)) throw lockedBy(file, lockPath, owner, lockPath);
    await fs.unlink(lockPath).catch(() => undefined);
    return;
  }
  let entries: string[];
  try {
    entries = await fs.readdir(lockPath);
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') return;
    throw new StoreError('store-io', `cannot read lock ${lockPath}: ${String(err)}`, { file, cause: err });
  }
  if (entries.length === 0) return;
  const entry = entries[0]!;
  if (entries.length > 1 || !entry.startsWith(OWNER_PREFIX)) throw lockedBy(file, lockPath, undefined, join(lockPath, entries.join(', ')));
  const ownerFile = join(lockPath, entry);
  const owner = await readOwner(ownerFile);
  if (owner === 'gone') return;
  // The token in the name is what a taker removes: an owner file written by a later writer has another.
  if (owner !== undefined && owner.token !== entry.slice(OWNER_PREFIX.length)) throw lockedBy(file, lockPath, undefined, ownerFile);
  if (!isStale(owner)) throw lockedBy(file, lockPath, owner, ownerFile);
  await fs.unlink(ownerFile).catch(() => undefined);
}

async function readOwner(path: string): Promise<Owner | undefined | 'gone'> {
  let text: string;
  try {
    text = await fs.readFile(path, 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return 'gone';
    return undefined;
  }
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === 'object' && value !== null ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Only a same-host owner whose process is gone is stale: refusing is safe, guessing is not. */
function isStale(owner: Owner | undefined): boolean {
  if (owner === undefined || typeof owner.pid !== 'number' || owner.host !== hostname()) return false;
  if (owner.pid === process.pid) {
    // Our own pid on a lock this process does not hold: left by an earlier life of a process
    // that got the same pid (a restarted container's pid 1, say).
    return typeof owner.token !== 'string' || !heldHere.has(owner.token);
  }
  return !processAlive(owner.pid);
}

function lockedBy(file: string, lockPath: string, owner: Owner | undefined, where: string): StoreError {
  const who = owner !== undefined && typeof owner.pid === 'number' ? `process ${owner.pid} on ${String(owner.host)}` : `an unreadable lock (${where})`;
  return new StoreError(
    'store-locked',
    `${file} is locked by ${who}: only one writer may append to a session. Close that session, or delete ${lockPath} if its process is gone. ` +
      '(A writer whose file system turned read-only cannot remove its lock: it is released when that process exits.)',
    { file },
  );
}
