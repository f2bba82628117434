/**
 * The writer-side snapshot (docs/sessions-and-stores.md#reopening-a-long-session): a session
 * written with no engine attached still leaves the store the token meter's fold, so a reopen
 * restores its prices instead of tokenizing the whole log. Pricing belongs to a layer above the
 * session (services/core), which registers here what attaches a meter to a session; the session
 * calls it when it saves a snapshot nobody claimed. Nothing registered (a program that never
 * loads the engine's services): no snapshot, as before.
 */
/** Attaches a writer-side meter to the session: it claims the snapshot weakly (Session.claimSnapshot's `handover`). */
export type WriterSnapshot = (session: { claimSnapshot: unknown }) => void;

/** The fewest events a log must hold for its writer to price it: below, a reopen prices it in a few tens of ms. */
export const WRITER_SNAPSHOT_MIN_EVENTS = 2_000;

let attach: WriterSnapshot | undefined;

/** Registers what attaches a writer-side meter (services/core does, once loaded); `undefined` unregisters. */
export function setWriterSnapshot(f: WriterSnapshot | undefined): void {
  attach = f;
}

export function writerSnapshot(): WriterSnapshot | undefined {
  return attach;
}
