/**
 * Session: the append-only event log and every projection folded from it.
 *
 * `append` is synchronous and transactional: it validates the event (validate.ts) and plans
 * it against the current state — the surface and its tool pairing (surface.ts), turns and
 * steps (structure.ts), the compaction bracket (brackets.ts) — and only then commits, queues
 * the line for the store and notifies observers. A rejected append throws a SessionRuleError
 * and changes nothing.
 */
import { deepFreeze } from './freeze';
import { snapshotEveryOf, type SessionOptions } from './options';
import { SessionRuleError, StoreError, type StoreErrorCode } from './errors';
import type { ChatMessage } from './derive';
import { type AppendInput, type EventData, type EventType, type SessionEvent, type SurfaceEvent } from './events';
import { Brackets, type LockState } from './brackets';
import { Structure } from './structure';
import { recoverSession, type RecoveryReport } from './recover';
import { Surface, type SurfaceChange, type SurfacePlan, type SurfaceView } from './surface';
import { checkInput, inEventOrder, parseEvent, parseStoredLine, type EventOrigin, type ParsedEvent } from './validate';
import type { LoadReport, LogWriter, SessionStore, StoredSnapshot } from './store';

import { Observers, type SessionListener } from './observers';
import { WRITER_SNAPSHOT_MIN_EVENTS, writerSnapshot } from './writer-snapshot';

export type { SessionListener } from './observers';

export type { SessionOptions } from './options';

export type { LockState } from './brackets';

export type { RecoveryReport } from './recover';

type Planned = ParsedEvent & { surfacePlan: SurfacePlan | undefined };

export class Session {
  readonly id: string;
  /** What the store found on open (a dropped torn tail, for instance). */
  readonly loadReport: LoadReport;

  private readonly log: SessionEvent[] = [];
  private readonly surfaceState: Surface;
  private readonly observers: Observers;
  private readonly now: () => number;
  private writer: LogWriter | undefined;
  private replaying = false;
  private opened = 0;
  private storedSnapshot: StoredSnapshot | undefined;
  private snapshotter: (() => string | undefined) | undefined;
  /** Set while the claim is a weak one (the writer-side meter): what a later claim takes over. */
  private handover: (() => StoredSnapshot | undefined) | undefined;
  private readonly snapshotEvery: number;
  /** Log length of the last snapshot taken (or the log's length when opened): `flush` counts from it. */
  private snapshotAt = 0;
  /** Log length the last saved snapshot covers: nothing to save again at that length. */
  private savedAt: number | undefined;
  /** The snapshot being saved (by a flush), awaited by every flush and by close. */
  private saving: Promise<void> | undefined;

  private readonly brackets: Brackets;
  private readonly structure: Structure;
  private closed = false;

  private constructor(id: string, options: SessionOptions, loadReport: LoadReport) {
    this.id = id;
    this.loadReport = loadReport;
    this.now = options.now ?? Date.now;
    this.snapshotEvery = snapshotEveryOf(options);
    this.observers = new Observers(options.onListenerError ?? ((e) => console.error('xcompact: a session listener threw', e)));
    this.surfaceState = new Surface((seq) => this.event(seq));
    this.brackets = new Brackets((seq) => this.event(seq));
    this.structure = new Structure(this.brackets);
  }

  /** A session that lives in memory only (tests, one-shot tools). */
  static inMemory(id = 'memory', options: SessionOptions = {}): Session {
    return new Session(id, options, {});
  }

  /**
   * Opens (or creates) a session from a store: replays every stored line through the log
   * rules, so every projection is rebuilt exactly as it was. A line that breaks a rule is
   * a StoreError naming the file and line.
   */
  static async open(store: SessionStore, id: string, options: SessionOptions = {}): Promise<Session> {
    snapshotEveryOf(options); // a bad option is refused before the store is opened (and locked)
    const stored = await store.open(id);
    const session = new Session(id, options, stored.report);
    session.replaying = true;
    // Records the store vouches were checked by these log rules when written (see StoredSnapshot.checked).
    const checked = stored.snapshot?.checked === true ? stored.snapshot.events : 0;
    try {
      for (const { line, value } of stored.records) {
        try {
          session.replay(value, session.log.length < checked);
        } catch (err) {
          const why = err instanceof Error ? err.message : String(err);
          throw new StoreError('store-corrupt', `${stored.location}:${line}: ${why}`, {
            file: stored.location,
            line,
            cause: err,
          });
        }
      }
    } catch (err) {
      await stored.writer.close().catch(() => undefined);
      throw err;
    } finally {
      session.replaying = false;
    }
    session.opened = session.log.length;
    session.snapshotAt = session.log.length;
    session.writer = stored.writer;
    session.storedSnapshot = stored.snapshot;
    return session;
  }

  // -------------------------------------------------------------------------
  // Reading

  get length(): number {
    return this.log.length;
  }

  /** Number of events replayed from the store when this session was opened. */
  get openedLength(): number {
    return this.opened;
  }

  event(seq: number): SessionEvent {
    const e = this.log[seq];
    if (e === undefined) throw new RangeError(`no event with seq ${seq}: the log has ${this.log.length} events`);
    return e;
  }

  /** The whole log, read-only and without a copy. */
  events(): readonly SessionEvent[] {
    return this.log;
  }

  get surface(): SurfaceView {
    return this.surfaceState;
  }

  /** OpenAI chat-completions messages for the current surface, ready to send. */
  deriveMessages(): readonly ChatMessage[] {
    return this.surfaceState.messagesView();
  }

  /** The derived message of one surface position (cached per node). */
  messageAt(position: number): ChatMessage {
    return this.surfaceState.messageAt(position);
  }

  /** Is the cut just before surface node `seq` tool-pairing balanced? */
  balancedBefore(seq: number): boolean {
    return this.surfaceState.balancedAt(this.surfacePosition(seq));
  }

  /** Is the cut just after surface node `seq` tool-pairing balanced? */
  balancedAfter(seq: number): boolean {
    return this.surfaceState.balancedAt(this.surfacePosition(seq) + 1);
  }

  balancedCuts(): number[] {
    return this.surfaceState.balancedCuts();
  }

  get lock(): LockState {
    return this.brackets.lock(this.opened);
  }

  get openTurn(): number | null {
    return this.structure.openTurn;
  }

  get lastTurn(): number {
    return this.structure.lastTurn;
  }

  get openStep(): { turn: number; step: number } | null {
    return this.structure.openStep;
  }

  get lastStep(): number {
    return this.structure.lastStep;
  }

  /** The latest `request/header`: what the last request was routed to and built with. */
  get latestHeader(): SessionEvent<'request/header'> | undefined {
    const seq = this.structure.headerSeq;
    return seq === undefined ? undefined : (this.log[seq] as SessionEvent<'request/header'>);
  }

  /** The latest `assistant/message`: the model's latest successful reply. */
  get latestReply(): SessionEvent<'assistant/message'> | undefined {
    const seq = this.structure.replySeq;
    return seq === undefined ? undefined : (this.log[seq] as SessionEvent<'assistant/message'>);
  }

  /** The latest `assistant/message` that carried provider usage. */
  get latestUsage(): SessionEvent<'assistant/message'> | undefined {
    const seq = this.structure.usageSeq;
    return seq === undefined ? undefined : (this.log[seq] as SessionEvent<'assistant/message'>);
  }

  /** True when the log ends mid-flight: pending tool calls, an open step or turn, or a live lock. */
  get needsRecovery(): boolean {
    return this.surfaceState.pendingCalls().length > 0 || this.openStep !== null || this.openTurn !== null || this.brackets.open !== undefined;
  }

  // -------------------------------------------------------------------------
  // Writing

  subscribe(listener: SessionListener): () => void {
    return this.observers.add(listener);
  }

  append<T extends EventType>(input: AppendInput<T>): SessionEvent<T> {
    checkInput(input);
    if (this.closed) {
      // Without this an append after close() would commit in memory and never reach the store.
      throw new StoreError('store-closed', `session "${this.id}" was closed; reopen it with Session.open to append.`);
    }
    const failure = this.writer?.failure;
    if (failure) {
      // Keep the failure's own code (store-interleaved, store-io, …) so callers can branch on it.
      const code: StoreErrorCode = failure instanceof StoreError ? (failure.code as StoreErrorCode) : 'store-io';
      throw new StoreError(code, `session "${this.id}" cannot take more events: an earlier write failed (${failure.message}).`, {
        cause: failure,
        ...(failure instanceof StoreError && failure.file !== undefined ? { file: failure.file } : {}),
      });
    }
    const seq = this.log.length;
    const planned = this.plan(seq, input.type, input.data, input.surfaceOp, input.sourceEventSeqs);
    return this.commit(seq, new Date(this.now()).toISOString(), planned) as SessionEvent<T>;
  }

  /**
   * Would this append be accepted now? Runs every rule of `append` without committing
   * anything: the rule error it would throw, or undefined. Lets a caller that must append
   * several events together check the risky one before writing the first.
   */
  check<T extends EventType>(input: AppendInput<T>): SessionRuleError | undefined {
    try {
      checkInput(input);
      this.plan(this.log.length, input.type, input.data, input.surfaceOp, input.sourceEventSeqs);
      return undefined;
    } catch (err) {
      if (err instanceof SessionRuleError) return err;
      throw err;
    }
  }

  /**
   * The rules of this event on its own, whatever the log holds: its type, its data (storable
   * text included: no lone surrogate, no U+0000), its surfaceOp's form. The rule error it breaks,
   * or undefined. With `check` for the rules of its place in the log, a caller that appends
   * several events together (one of them answering another) checks them all before the first.
   */
  checkEvent<T extends EventType>(input: AppendInput<T>): SessionRuleError | undefined {
    try {
      checkInput(input);
      parseEvent(this.log.length, input.type, input.data, input.surfaceOp, input.sourceEventSeqs);
      return undefined;
    } catch (err) {
      if (err instanceof SessionRuleError) return err;
      throw err;
    }
  }

  /** Resolves when every appended event is durable in the store. */
  async flush(): Promise<void> {
    await this.writer?.flush();
    if (this.snapshotEvery > 0 && this.log.length - this.snapshotAt >= this.snapshotEvery) this.saving = this.saveSnapshot();
    // Another caller's flush (the engine's, say) may have started the save this one would have.
    await this.saving;
  }

  /**
   * Claims this session's snapshot: the first caller gets the one the store kept (checked
   * against the stored bytes it was taken on; its reader validates it again and may still
   * ignore it) and `produce` becomes what is saved at close (undefined: nothing new to save).
   * Later callers get `undefined`: one reader-writer per log (the engine's meter, which folds
   * first), so another meter on the session never overwrites it with a fold of its own. The one
   * exception is a weak claim (`options.handover`: the writer-side meter a session attaches when
   * it saves a snapshot nobody claimed, writer-snapshot.ts): the next claim takes it over and is
   * given what `handover` returns (that claimant's fold so far) as the stored snapshot.
   */
  claimSnapshot(
    produce: () => string | undefined,
    options: { handover?: () => StoredSnapshot | undefined } = {},
  ): { stored: StoredSnapshot | undefined } | undefined {
    if (this.snapshotter && !this.handover) return undefined;
    // A weak claim (the writer-side meter, writer-snapshot.ts) gives way: its fold so far is what the new claimant starts from.
    const stored = this.handover ? this.handover() : this.storedSnapshot;
    this.snapshotter = produce;
    this.handover = options.handover;
    this.storedSnapshot = undefined;
    return { stored };
  }

  /** Flushes, saves the snapshot if the store keeps one, and releases the store's hold on this session. */
  async close(): Promise<void> {
    this.closed = true;
    const w = this.writer;
    this.writer = undefined;
    await this.saving;
    if (w) await this.saveSnapshot(w);
    await w?.close();
  }

  private async saveSnapshot(w = this.writer): Promise<void> {
    if (!w?.saveSnapshot || w.failure) return;
    const events = this.log.length;
    if (this.savedAt === events) return;
    try {
      // Nobody claimed it: the log was written with no engine. Its writer prices what it appended.
      if (!this.snapshotter && this.log.length > this.opened && this.log.length >= WRITER_SNAPSHOT_MIN_EVENTS) writerSnapshot()?.(this);
      if (!this.snapshotter) return;
      this.snapshotAt = events;
      const payload = this.snapshotter();
      if (payload === undefined) return;
      await w.saveSnapshot(events, payload);
      this.savedAt = events;
    } catch {
      // A snapshot only saves time on the next open: failing to write one never fails a flush or a close.
    }
  }

  /**
   * Brings a log left mid-flight by a stopped process back to a state an agent can continue
   * from: each call without a result gets an error result saying it was interrupted, an open
   * step and turn are closed as `interrupted`, and a live compaction lock is made stale with
   * `session/end-seed`. Call it right after `Session.open` when the previous process did not
   * shut down cleanly (`needsRecovery` tells). Never call it while this process is mid-turn.
   */
  recover(): RecoveryReport {
    return recoverSession(this);
  }

  // -------------------------------------------------------------------------
  // Internals

  private surfacePosition(seq: number): number {
    const p = this.surfaceState.positionOf(seq);
    if (p === undefined) {
      throw new SessionRuleError('not-on-surface', `seq ${seq} is not a current surface node (not a message, or shadowed by a replacement).`);
    }
    return p;
  }

  private replay(value: unknown, checked: boolean): void {
    const e = parseStoredLine(value, this.log.length);
    const planned = this.plan(e.seq, e.type, e.data, e.surfaceOp, e.sourceEventSeqs, { stored: true, checked });
    // The common envelope is the parsed line itself (parseStoredLine checked its every key): it
    // becomes the event as it is, instead of a copy of it (a reopen commits 80k of them).
    this.commit(e.seq, e.time, planned, e === value && inEventOrder(value as object) ? (value as Record<string, unknown>) : undefined);
  }

  private plan(seq: number, type: EventType, rawData: unknown, rawSurfaceOp: unknown, rawSourceEventSeqs: unknown, origin: EventOrigin = {}): Planned {
    const parsed = parseEvent(seq, type, rawData, rawSurfaceOp, rawSourceEventSeqs, origin);
    const { data, surfaceOp, sourceEventSeqs } = parsed;
    if (surfaceOp !== undefined) {
      const ev = { type, data } as { type: SurfaceEvent['type']; data: SurfaceEvent['data'] };
      const surfacePlan = surfaceOp === 'append' ? this.surfaceState.planAppend(ev) : this.surfaceState.planReplace(surfaceOp, ev, sourceEventSeqs);
      this.brackets.checkSurface(type, data, surfaceOp, sourceEventSeqs);
      // parseEvent's result is this call's own object: completed in place, not copied (a reopen plans every event).
      (parsed as Planned).surfacePlan = surfacePlan;
      return parsed as Planned;
    }
    this.structure.check(type, data);
    this.brackets.check(type, data, this.structure.openTurn);
    if (type === 'compaction/prune') {
      const d = data as EventData<'compaction/prune'>;
      this.surfaceState.checkPruneTarget(d.targetSeq, d.callId);
    }
    (parsed as Planned).surfacePlan = undefined;
    return parsed as Planned;
  }

  /** `stored`: a replayed line whose envelope is exactly an event's (seq, type, time, data, surfaceOp 'append'), committed as it is. */
  private commit(seq: number, time: string, planned: Planned, stored?: Record<string, unknown>): SessionEvent {
    const { surfaceOp, sourceEventSeqs } = planned;
    let raw: Record<string, unknown>;
    if (stored) {
      raw = stored;
      // The data schema's own output when the line's data was checked (the same value when the store vouched for it).
      if (raw.data !== planned.data) raw.data = planned.data;
    } else {
      raw = { seq, type: planned.type, time, data: planned.data };
      if (surfaceOp !== undefined) raw.surfaceOp = typeof surfaceOp === 'string' ? surfaceOp : { ...surfaceOp };
      if (sourceEventSeqs !== undefined) raw.sourceEventSeqs = [...sourceEventSeqs];
    }
    // Queued before it is frozen and held: a writer that cannot take it (closed, too large)
    // changes nothing, not even the caller's objects.
    if (!this.replaying) this.writer?.append(raw as unknown as SessionEvent);
    const event = deepFreeze(raw) as unknown as SessionEvent;
    this.log.push(event);

    let change: SurfaceChange | undefined;
    if (planned.surfacePlan) change = this.surfaceState.commit(planned.surfacePlan, event as SurfaceEvent);
    this.foldStructure(event);

    this.observers.notify(event, change);
    return event;
  }

  private foldStructure(e: SessionEvent): void {
    this.brackets.fold(e);
    this.structure.fold(e);
  }
}
