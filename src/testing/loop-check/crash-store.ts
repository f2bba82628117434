/**
 * A store that can crash: it wraps a real store (JSONL by default). `crash()` is the process
 * dying at that instant: what it had handed to the store stays (a killed process's writes are
 * in the kernel already; only a power loss takes unflushed ones), its writers are gone (their
 * lock released, as the OS does for a dead process) and every later call through them fails.
 * The next `open` is a new process reading what survived, typically a turn left open, maybe a
 * compaction bracket: what `session.recover()` is for. `acknowledgedCount` is what a flush had
 * confirmed before the crash: none of it may be missing afterwards.
 */
import { StoreError } from '../../session/errors';
import type { SessionEvent } from '../../session/events';
import type { LogWriter, SessionStore, StoredLog } from '../../session/store';

export class CrashableStore implements SessionStore {
  private epoch = 0;
  private readonly live = new Set<{ epoch: number; inner: LogWriter }>();
  /** Events acknowledged (flushed) per session id, as of now. */
  private readonly acknowledged = new Map<string, number>();
  private readonly watchers = new Set<(id: string, event: SessionEvent) => void>();

  constructor(private readonly inner: SessionStore) {}

  /** Calls `listener` with every event handed to the store, as it is appended; returns the unsubscribe. */
  watch(listener: (id: string, event: SessionEvent) => void): () => void {
    this.watchers.add(listener);
    return () => this.watchers.delete(listener);
  }

  async open(id: string): Promise<StoredLog> {
    const log = await this.inner.open(id);
    const epoch = this.epoch;
    const entry = { epoch, inner: log.writer };
    this.live.add(entry);
    let appended = log.records.length;
    this.acknowledged.set(id, appended);
    const dead = () => new StoreError('store-io', 'the process crashed (simulated by checkLoop): this session is gone; reopen it');
    const alive = () => entry.epoch === this.epoch;
    const writer: LogWriter = {
      get failure() {
        return alive() ? log.writer.failure : dead();
      },
      append: (event: SessionEvent) => {
        if (!alive()) throw dead();
        log.writer.append(event);
        appended++;
        for (const listener of this.watchers) listener(id, event);
      },
      flush: async () => {
        if (!alive()) throw dead();
        const upTo = appended;
        await log.writer.flush();
        if (!alive()) throw dead();
        this.acknowledged.set(id, upTo);
      },
      close: async () => {
        if (!alive()) return;
        await writer.flush();
        this.live.delete(entry);
        await log.writer.close();
      },
      ...(log.writer.saveSnapshot
        ? {
            saveSnapshot: async (events: number, payload: string) => {
              if (!alive()) throw dead();
              await writer.flush();
              await log.writer.saveSnapshot!(events, payload);
            },
          }
        : {}),
    };
    return { ...log, writer };
  }

  /** How many events of `id` were acknowledged (flushed) so far. */
  acknowledgedCount(id: string): number {
    return this.acknowledged.get(id) ?? 0;
  }

  /** The process dies: what it wrote stays, its sessions' locks are released, their writers are dead. */
  async crash(): Promise<void> {
    this.epoch++;
    const entries = [...this.live];
    this.live.clear();
    for (const entry of entries) await entry.inner.close().catch(() => undefined);
  }
}
