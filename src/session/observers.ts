/**
 * The observers of a session: each sees every committed event once, in log order, even when
 * an observer appends from inside its callback (that append is delivered after the current
 * event reached every observer). An observer that throws is reported, never undoes the append.
 */
import type { SessionEvent } from './events';
import type { SurfaceChange } from './surface';

export type SessionListener = (event: SessionEvent, change: SurfaceChange | undefined) => void;

export class Observers {
  private readonly listeners = new Set<SessionListener>();
  private readonly outbox: Array<[SessionEvent, SurfaceChange | undefined]> = [];
  private notifying = false;

  constructor(private readonly onListenerError: (error: unknown) => void) {}

  add(listener: SessionListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  notify(event: SessionEvent, change: SurfaceChange | undefined): void {
    // Nobody to tell and nothing queued (a reopen replays every event before anyone subscribes).
    if (this.listeners.size === 0 && !this.notifying) return;
    this.outbox.push([event, change]);
    if (this.notifying) return;
    this.notifying = true;
    try {
      for (let next = this.outbox.shift(); next; next = this.outbox.shift()) {
        for (const listener of this.listeners) {
          try {
            listener(next[0], next[1]);
          } catch (err) {
            this.onListenerError(err);
          }
        }
      }
    } finally {
      this.notifying = false;
    }
  }
}
