/**
 * The part every store's writer shares: appends are queued synchronously and written in
 * order, one batch per turn of the event loop; the first failure stops the writer for good;
 * `flush()` waits for the writes (and whatever makes them durable); `close()` flushes, then
 * releases the session whatever the flush did. A store supplies only the batch write.
 */
import { XcompactError } from '../../errors';
import { SessionRuleError, StoreError } from '../errors';
import type { SessionEvent } from '../events';
import type { LogWriter } from '../store';

/** The largest event, in characters of JSON (at most 192 MiB of UTF-8, under jsonb's 255 MB). */
export const MAX_EVENT_CHARS = 64 * 1024 * 1024;

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
    // Encoded before it is queued (and the session commits only after this returns): an event
    // that cannot be encoded is refused, never half taken.
    let encoded: T;
    try {
      encoded = this.encode(event);
    } catch (err) {
      if (err instanceof XcompactError) throw err;
      throw new SessionRuleError('not-storable', `${event.type} cannot be serialised for ${this.location}: ${String(err)}.`);
    }
    this.queue.push(encoded);
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

  /** One event's JSON line, refused when it is over the size every store can keep. */
  protected json(event: SessionEvent): string {
    const line = JSON.stringify(event);
    if (line.length > MAX_EVENT_CHARS) {
      throw new SessionRuleError(
        'not-storable',
        `${event.type} is ${line.length} characters of JSON, over the ${MAX_EVENT_CHARS} an event may take (PostgreSQL keeps at most 255 MB per jsonb value): prune or split it.`,
      );
    }
    return line;
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
