/**
 * MemoryStore keeps each session as JSON lines in memory, so a reopen goes through the
 * same parse-and-replay path as a file: what a test sees here is what a JSONL file gives.
 */
import { StoreError } from '../errors';
import type { SessionEvent } from '../events';
import { checkSessionId, type LogWriter, type SessionStore, type StoredLog } from '../store';

export class MemoryStore implements SessionStore {
  private readonly lines = new Map<string, string[]>();
  private readonly openIds = new Set<string>();

  async open(id: string): Promise<StoredLog> {
    checkSessionId(id);
    if (this.openIds.has(id)) {
      throw new StoreError('store-locked', `memory session "${id}" is already open: close the other Session first.`);
    }
    const lines = this.lines.get(id) ?? [];
    this.lines.set(id, lines);
    const records = lines.map((text, i) => ({ line: i + 1, value: JSON.parse(text) as unknown }));
    this.openIds.add(id);
    let closed = false;
    const writer: LogWriter = {
      failure: undefined,
      append: (event: SessionEvent) => {
        if (closed) throw new StoreError('store-closed', `memory session "${id}" was closed; reopen it to append.`);
        lines.push(JSON.stringify(event));
      },
      flush: async () => undefined,
      close: async () => {
        if (closed) return;
        closed = true;
        this.openIds.delete(id);
      },
    };
    return { records, report: {}, location: `memory:${id}`, writer };
  }

  /** The stored lines of a session (a copy), for tests and export. */
  dump(id: string): string[] {
    return [...(this.lines.get(id) ?? [])];
  }
}
