/**
 * The part every store's writer shares: appends are queued synchronously and written in
 * order, one batch per turn of the event loop; the first failure stops the writer for good;
 * `flush()` waits for the writes (and whatever makes them durable); `close()` flushes, then
 * releases the session whatever the flush did. A store supplies only the batch write.
 */
import { StoreError } from '../errors';
import type { SessionEvent } from '../events';
import type { LogWriter } from '../store';

export abstract class QueuedWriter<T> implements LogWriter {
  failure: Error | undefined;
  protected closed = false;
  private queue: T[] = [];
  private draining: Promise<void> | undefined;

  /** @param location where the session lives, for messages */
  protected constructor(protected readonly location: string) {}

  /** One queued event as the store writes it. */
  protected abstract encode(event: SessionEvent): T;
  /** Writes one batch, whole; throws to stop the writer. */
  protected abstract writeBatch(batch: T[]): Promise<void>;
  /** The error a failed batch write becomes. */
  protected abstract asFailure(err: unknown): StoreError;
  /** Releases the session for other writers (called once, by close). */
  protected abstract release(): Promise<void>;
  /** After the writes of a flush: what makes them durable, if anything more is needed. */
  protected async durable(): Promise<void> {}

  append(event: SessionEvent): void {
    if (this.closed) throw new StoreError('store-closed', `${this.location} was closed; reopen the session to append.`, { file: this.location });
    this.queue.push(this.encode(event));
    this.draining ??= this.drain();
  }

  async flush(): Promise<void> {
    while (this.draining) await this.draining;
    if (this.failure) throw this.failure;
    await this.durable();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.flush();
    } finally {
      this.closed = true;
      await this.release();
    }
  }

  protected fail(err: Error): void {
    this.failure ??= err;
  }

  private async drain(): Promise<void> {
    // Yield once so a burst of synchronous appends becomes one batch.
    await Promise.resolve();
    try {
      while (this.queue.length > 0 && !this.failure) {
        const batch = this.queue;
        this.queue = [];
        await this.writeBatch(batch);
      }
    } catch (err) {
      this.fail(this.asFailure(err));
    } finally {
      this.draining = undefined;
      if (this.queue.length > 0 && !this.failure) this.draining = this.drain();
    }
  }
}
