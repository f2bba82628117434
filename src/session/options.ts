/** Session.open / Session.inMemory options, and their checks. */
import { XcompactError } from '../errors';

export interface SessionOptions {
  /** Clock for event times (ms since epoch). */
  now?: () => number;
  /** Called when an observer throws; the append itself has already committed. */
  onListenerError?: (error: unknown) => void;
  /**
   * A `flush()` also saves the snapshot (see claimSnapshot) once this many events were appended
   * since the last one, so a writer that dies before closing still leaves a recent one
   * (default 10,000; 0: only on close).
   */
  snapshotEvery?: number;
}

/** The snapshot period, checked: a bad value is a typed config error, not periodic saves silently off. */
export function snapshotEveryOf(options: SessionOptions): number {
  const n = options.snapshotEvery ?? 10_000;
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new XcompactError('config', `Session option snapshotEvery must be a whole number ≥ 0 (0: save only on close), got ${String(options.snapshotEvery)}`);
  }
  return n;
}
