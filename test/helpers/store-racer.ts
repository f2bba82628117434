/**
 * A process that races others to open one JsonlStore session (test/session/stores/race.test.ts forks
 * it with `node --import tsx`). Driven over IPC, one trial at a time:
 *   arm {dir, id, go, trial}  → `armed`, then spin until the file `go` exists (the shared start
 *                               barrier), then Session.open;
 *                             → `outcome` {won, code}; a winner appends and flushes two batches
 *                               and reports the texts whose flush resolved (`acked`), then holds
 *                               the session open until told `close` (so a second winner in the
 *                               same trial can only be a double writer, not a later one)
 *   close                     → `closed`
 */
import { existsSync } from 'node:fs';
import { JsonlStore, Session, StoreError } from '../../src/session/index';

type Command = { kind: 'arm'; dir: string; id: string; go: string; trial: number } | { kind: 'close' } | { kind: 'exit' };

const name = process.env.RACER_NAME ?? String(process.pid);
let open: Session | undefined;

function send(message: Record<string, unknown>): void {
  process.send!(message);
}

async function race(cmd: Extract<Command, { kind: 'arm' }>): Promise<void> {
  const store = new JsonlStore(cmd.dir, { sync: false });
  send({ kind: 'armed' });
  // A hang guard only (the parent may be slow to arm every racer on a loaded machine).
  const deadline = Date.now() + 5 * 60_000;
  // Busy-wait, not a timer: both racers leave the barrier within microseconds of each other.
  while (!existsSync(cmd.go)) {
    if (Date.now() > deadline) throw new Error(`${name}: no start signal for trial ${cmd.trial}`);
  }
  let session: Session;
  try {
    session = await Session.open(store, cmd.id);
  } catch (err) {
    send({ kind: 'outcome', won: false, code: err instanceof StoreError ? err.code : String(err) });
    return;
  }
  open = session;
  send({ kind: 'outcome', won: true });
  const acked: string[] = [];
  for (const batch of [3, 2]) {
    const texts = Array.from({ length: batch }, (_, k) => `${name}:${cmd.trial}:${acked.length + k}`);
    try {
      for (const text of texts) session.append({ type: 'user/message', data: { content: [{ type: 'text', text }] }, surfaceOp: 'append' });
      await session.flush();
    } catch (err) {
      send({ kind: 'acked', texts: acked, error: err instanceof StoreError ? err.code : String(err) });
      return;
    }
    acked.push(...texts);
  }
  send({ kind: 'acked', texts: acked });
}

process.on('message', (cmd: Command) => {
  if (cmd.kind === 'arm') {
    race(cmd).catch((err: unknown) => send({ kind: 'fatal', message: String(err) }));
  } else if (cmd.kind === 'close') {
    const s = open;
    open = undefined;
    (s ? s.close() : Promise.resolve()).then(
      () => send({ kind: 'closed' }),
      (err: unknown) => send({ kind: 'closed', error: err instanceof StoreError ? err.code : String(err) }),
    );
  } else {
    process.disconnect();
  }
});
send({ kind: 'ready' });
