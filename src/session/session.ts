/**
 * Session: the append-only event log and every projection folded from it.
 *
 * `append` is synchronous and transactional: it validates the event and plans the
 * surface change against the current state, and only then commits (log, surface,
 * turn/step and lock state), queues the line for the store and notifies observers.
 * A rejected append throws a SessionRuleError and changes nothing.
 */
import { z } from 'zod';
import { deepFreeze } from './freeze';
import { SessionRuleError, StoreError, type StoreErrorCode } from './errors';
import type { ChatMessage } from './derive';
import {
  EventDataSchemas,
  StoredEventSchema,
  SurfaceOpSchema,
  isSurfaceType,
  toolCallsOf,
  type AppendInput,
  type EventType,
  type SessionEvent,
  type SurfaceEvent,
  type SurfaceOp,
} from './events';
import { Brackets, type LockState } from './brackets';
import { Surface, type SurfaceChange, type SurfacePlan, type SurfaceView } from './surface';
import type { LoadReport, LogWriter, SessionStore } from './store';

export type SessionListener = (event: SessionEvent, change: SurfaceChange | undefined) => void;

export interface SessionOptions {
  /** Clock for event times (ms since epoch). */
  now?: () => number;
  /** Called when an observer throws; the append itself has already committed. */
  onListenerError?: (error: unknown) => void;
}

export type { LockState } from './brackets';

export interface RecoveryReport {
  /** Calls that never got a result; each now has an error result saying so. */
  closedCalls: string[];
  closedStep: boolean;
  closedTurn: boolean;
  /** Seq of the orphan `compaction/start` made stale by a `session/end-seed`, if any. */
  clearedLock: number | undefined;
}

type Planned = {
  type: EventType;
  data: unknown;
  /** surfaceOp and sourceEventSeqs as validated: what is committed and stored. */
  surfaceOp: SurfaceOp | undefined;
  sourceEventSeqs: readonly number[] | undefined;
  surfacePlan: SurfacePlan | undefined;
};

const SourceSeqsSchema = z.array(z.number().int().min(0));

const INTERRUPTED_RESULT =
  'Tool call interrupted: the process stopped before this result was recorded. The call may or may not have run.';

function formatZodIssues(type: string, issues: ReadonlyArray<{ path: PropertyKey[]; message: string }>): string {
  return issues.map((i) => `${type} data${i.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('')}: ${i.message}`).join('; ');
}

/**
 * Tool definitions are free-form JSON: copy them through JSON so the log neither shares (and
 * freezes) the caller's objects nor holds values a reopen would read back differently
 * (undefined, Dates, class instances). Not JSON at all (BigInt, cycles) is a rejected append.
 */
function normaliseTools(data: { tools: Record<string, unknown>[] }): void {
  try {
    data.tools = JSON.parse(JSON.stringify(data.tools)) as Record<string, unknown>[];
  } catch (err) {
    throw new SessionRuleError('invalid-data', `request/header data.tools must be plain JSON: ${(err as Error).message}`);
  }
}

export class Session {
  readonly id: string;
  /** What the store found on open (a dropped torn tail, for instance). */
  readonly loadReport: LoadReport;

  private readonly log: SessionEvent[] = [];
  private readonly surfaceState: Surface;
  private readonly listeners = new Set<SessionListener>();
  private readonly outbox: Array<[SessionEvent, SurfaceChange | undefined]> = [];
  private notifying = false;
  private readonly now: () => number;
  private readonly onListenerError: (error: unknown) => void;
  private writer: LogWriter | undefined;
  private replaying = false;
  private opened = 0;

  private turnOpen: number | null = null;
  private lastTurnNo = -1;
  private stepOpen: { turn: number; step: number } | null = null;
  private lastStepNo = -1;
  private readonly brackets: Brackets;
  private closed = false;
  private headerSeq: number | undefined;
  private usageSeq: number | undefined;
  private replySeq: number | undefined;

  private constructor(id: string, options: SessionOptions, loadReport: LoadReport) {
    this.id = id;
    this.loadReport = loadReport;
    this.now = options.now ?? Date.now;
    this.onListenerError = options.onListenerError ?? ((e) => console.error('xcompact: a session listener threw', e));
    this.surfaceState = new Surface((seq) => this.event(seq));
    this.brackets = new Brackets((seq) => this.event(seq));
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
    const stored = await store.open(id);
    const session = new Session(id, options, stored.report);
    session.replaying = true;
    try {
      for (const { line, value } of stored.records) {
        try {
          session.replay(value);
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
    session.writer = stored.writer;
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
    return this.turnOpen;
  }

  get lastTurn(): number {
    return this.lastTurnNo;
  }

  get openStep(): { turn: number; step: number } | null {
    return this.stepOpen;
  }

  get lastStep(): number {
    return this.lastStepNo;
  }

  /** The latest `request/header`: what the last request was routed to and built with. */
  get latestHeader(): SessionEvent<'request/header'> | undefined {
    return this.headerSeq === undefined ? undefined : (this.log[this.headerSeq] as SessionEvent<'request/header'>);
  }

  /** The latest `assistant/message`: the model's latest successful reply. */
  get latestReply(): SessionEvent<'assistant/message'> | undefined {
    return this.replySeq === undefined ? undefined : (this.log[this.replySeq] as SessionEvent<'assistant/message'>);
  }

  /** The latest `assistant/message` that carried provider usage. */
  get latestUsage(): SessionEvent<'assistant/message'> | undefined {
    return this.usageSeq === undefined ? undefined : (this.log[this.usageSeq] as SessionEvent<'assistant/message'>);
  }

  /** True when the log ends mid-flight: pending tool calls, an open step or turn, or a live lock. */
  get needsRecovery(): boolean {
    return this.surfaceState.pendingCalls().length > 0 || this.stepOpen !== null || this.turnOpen !== null || this.brackets.open !== undefined;
  }

  // -------------------------------------------------------------------------
  // Writing

  subscribe(listener: SessionListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  append<T extends EventType>(input: AppendInput<T>): SessionEvent<T> {
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
      this.plan(this.log.length, input.type, input.data, input.surfaceOp, input.sourceEventSeqs);
      return undefined;
    } catch (err) {
      if (err instanceof SessionRuleError) return err;
      throw err;
    }
  }

  /** Resolves when every appended event is durable in the store. */
  async flush(): Promise<void> {
    await this.writer?.flush();
  }

  /** Flushes and releases the store's hold on this session. */
  async close(): Promise<void> {
    this.closed = true;
    const w = this.writer;
    this.writer = undefined;
    await w?.close();
  }

  /**
   * Brings a log left mid-flight by a stopped process back to a state an agent can continue
   * from: each call without a result gets an error result saying it was interrupted, an open
   * step and turn are closed as `interrupted`, and a live compaction lock is made stale with
   * `session/end-seed`. Call it right after `Session.open` when the previous process did not
   * shut down cleanly (`needsRecovery` tells). Never call it while this process is mid-turn.
   */
  recover(): RecoveryReport {
    const report: RecoveryReport = { closedCalls: [], closedStep: false, closedTurn: false, clearedLock: undefined };
    for (const callId of this.surfaceState.pendingCalls()) {
      this.append({
        type: 'tool/result',
        data: { callId, content: [{ type: 'text', text: INTERRUPTED_RESULT }], isError: true },
        surfaceOp: 'append',
      });
      report.closedCalls.push(callId);
    }
    if (this.stepOpen) {
      this.append({ type: 'step/end', data: { ...this.stepOpen, reason: 'interrupted' } });
      report.closedStep = true;
    }
    // Before the turn ends: a compaction ends in the turn it started in.
    const orphan = this.brackets.open;
    if (orphan) {
      report.clearedLock = orphan.seq;
      this.append({ type: 'session/end-seed', data: { reason: 'recover' } });
    }
    if (this.turnOpen !== null) {
      this.append({ type: 'turn/end', data: { turn: this.turnOpen, reason: 'interrupted' } });
      report.closedTurn = true;
    }
    return report;
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

  private replay(value: unknown): void {
    const shape = StoredEventSchema.safeParse(value);
    if (!shape.success) throw new SessionRuleError('stored-shape', formatZodIssues('stored event', shape.error.issues));
    const e = shape.data;
    if (e.seq !== this.log.length) {
      throw new SessionRuleError('seq-position', `event has seq ${e.seq} but is at log position ${this.log.length}.`);
    }
    const planned = this.plan(e.seq, e.type, e.data, e.surfaceOp, e.sourceEventSeqs);
    this.commit(e.seq, e.time, planned);
  }

  private plan(
    seq: number,
    type: EventType,
    rawData: unknown,
    rawSurfaceOp: unknown,
    rawSourceEventSeqs: unknown,
  ): Planned {
    // Own keys only: a type like "toString" must be a rule error, not a TypeError.
    const schema = Object.hasOwn(EventDataSchemas, type) ? EventDataSchemas[type] : undefined;
    if (!schema) throw new SessionRuleError('unknown-type', `unknown event type ${JSON.stringify(type)}.`);
    const parsed = schema.safeParse(rawData);
    if (!parsed.success) throw new SessionRuleError('invalid-data', formatZodIssues(type, parsed.error.issues));
    if (type === 'request/header') normaliseTools(parsed.data as { tools: Record<string, unknown>[] });
    const data = parsed.data as never;
    // Checked here, not only on replay: a shape accepted live but refused by StoredEventSchema
    // would make the session file impossible to reopen.
    let surfaceOp: SurfaceOp | undefined;
    if (rawSurfaceOp !== undefined) {
      const op = SurfaceOpSchema.safeParse(rawSurfaceOp);
      if (!op.success) {
        throw new SessionRuleError('surface-op-shape', `surfaceOp must be 'append' or {op: 'replace', start, end} with seqs ≥ 0 and no other keys; got ${JSON.stringify(rawSurfaceOp)}.`);
      }
      surfaceOp = op.data;
    }
    let sourceEventSeqs: readonly number[] | undefined;
    if (rawSourceEventSeqs !== undefined) {
      const seqs = SourceSeqsSchema.safeParse(rawSourceEventSeqs);
      if (!seqs.success) throw new SessionRuleError('source-seqs', `sourceEventSeqs must be an array of seqs (integers ≥ 0); got ${JSON.stringify(rawSourceEventSeqs)}.`);
      sourceEventSeqs = seqs.data;
    }
    this.checkProvenance(seq, type, surfaceOp, sourceEventSeqs);

    if (isSurfaceType(type)) {
      if (surfaceOp === undefined) {
        throw new SessionRuleError('missing-surface-op', `${type} is a surface event and must carry surfaceOp ('append' or a replace).`);
      }
      const ev = { type, data } as { type: SurfaceEvent['type']; data: SurfaceEvent['data'] };
      const surfacePlan =
        surfaceOp === 'append' ? this.surfaceState.planAppend(ev) : this.surfaceState.planReplace(surfaceOp, ev, sourceEventSeqs);
      this.brackets.checkSurface(type, data, surfaceOp, sourceEventSeqs);
      return { type, data, surfaceOp, sourceEventSeqs, surfacePlan };
    }
    this.checkStructure(type, data);
    return { type, data, surfaceOp, sourceEventSeqs, surfacePlan: undefined };
  }

  private checkProvenance(
    seq: number,
    type: EventType,
    surfaceOp: AppendInput['surfaceOp'],
    sourceEventSeqs: readonly number[] | undefined,
  ): void {
    if (!isSurfaceType(type)) {
      if (surfaceOp !== undefined || sourceEventSeqs !== undefined) {
        throw new SessionRuleError('log-only-event', `${type} is a log-only event: it carries neither surfaceOp nor sourceEventSeqs.`);
      }
      return;
    }
    if (sourceEventSeqs === undefined) return;
    if (sourceEventSeqs.length === 0 && type !== 'assistant/message') {
      throw new SessionRuleError('source-seqs', `sourceEventSeqs of ${type} must not be empty (only an assistant/message may say [] for a known empty stream).`);
    }
    const seen = new Set<number>();
    for (const s of sourceEventSeqs) {
      if (!Number.isInteger(s) || s < 0 || s >= seq) {
        throw new SessionRuleError('source-seqs', `sourceEventSeqs entry ${s} must be an earlier seq (0..${seq - 1}).`);
      }
      if (seen.has(s)) throw new SessionRuleError('source-seqs', `sourceEventSeqs names seq ${s} twice.`);
      seen.add(s);
    }
  }

  private checkStructure(type: EventType, data: never): void {
    switch (type) {
      case 'turn/start': {
        const d = data as { turn: number };
        if (this.turnOpen !== null) throw new SessionRuleError('turn-already-open', `turn/start ${d.turn}: turn ${this.turnOpen} is still open; end it first.`);
        if (d.turn <= this.lastTurnNo) throw new SessionRuleError('turn-number', `turn/start ${d.turn}: turn numbers must increase (last was ${this.lastTurnNo}).`);
        this.brackets.checkTurnBoundary('turn/start', d.turn);
        return;
      }
      case 'turn/end': {
        const d = data as { turn: number };
        if (this.turnOpen !== d.turn) throw new SessionRuleError('turn-not-open', `turn/end ${d.turn}: the open turn is ${this.turnOpen ?? 'none'}.`);
        if (this.stepOpen) throw new SessionRuleError('step-still-open', `turn/end ${d.turn}: step ${this.stepOpen.step} is still open; end it first.`);
        this.brackets.checkTurnBoundary('turn/end', d.turn);
        return;
      }
      case 'step/start': {
        const d = data as { turn: number; step: number };
        if (this.turnOpen !== d.turn) throw new SessionRuleError('step-outside-turn', `step/start ${d.turn}.${d.step}: the open turn is ${this.turnOpen ?? 'none'}.`);
        if (this.stepOpen) throw new SessionRuleError('step-already-open', `step/start ${d.turn}.${d.step}: step ${this.stepOpen.step} is still open.`);
        if (d.step <= this.lastStepNo) throw new SessionRuleError('step-number', `step/start ${d.turn}.${d.step}: step numbers must increase within a turn (last was ${this.lastStepNo}).`);
        return;
      }
      case 'step/end': {
        const d = data as { turn: number; step: number };
        if (!this.stepOpen || this.stepOpen.turn !== d.turn || this.stepOpen.step !== d.step) {
          throw new SessionRuleError('step-not-open', `step/end ${d.turn}.${d.step}: the open step is ${this.stepOpen ? `${this.stepOpen.turn}.${this.stepOpen.step}` : 'none'}.`);
        }
        return;
      }
      case 'compaction/start':
      case 'compaction/summary':
      case 'compaction/end':
        this.brackets.check(type, data, this.turnOpen);
        return;
      case 'compaction/prune': {
        const d = data as { targetSeq: number; callId: string };
        const p = this.surfaceState.positionOf(d.targetSeq);
        const target = p === undefined ? undefined : this.log[d.targetSeq];
        // A tool result is pruned by its content, a call (SPEC §15) by its arguments.
        const fits =
          target !== undefined &&
          ((target.type === 'tool/result' && target.data.callId === d.callId) ||
            (target.type === 'assistant/message' && toolCallsOf(target).some((c) => c.id === d.callId)));
        if (!fits) {
          throw new SessionRuleError(
            'prune-target',
            `compaction/prune: seq ${d.targetSeq} is neither a current tool/result node for call "${d.callId}" nor a current assistant/message that made it.`,
          );
        }
        return;
      }
      default:
        return;
    }
  }

  private commit(seq: number, time: string, planned: Planned): SessionEvent {
    const { surfaceOp, sourceEventSeqs } = planned;
    const raw: Record<string, unknown> = { seq, type: planned.type, time, data: planned.data };
    if (surfaceOp !== undefined) raw.surfaceOp = typeof surfaceOp === 'string' ? surfaceOp : { ...surfaceOp };
    if (sourceEventSeqs !== undefined) raw.sourceEventSeqs = [...sourceEventSeqs];
    const event = deepFreeze(raw) as unknown as SessionEvent;
    this.log.push(event);

    let change: SurfaceChange | undefined;
    if (planned.surfacePlan) change = this.surfaceState.commit(planned.surfacePlan, event as SurfaceEvent);
    this.foldStructure(event);
    if (!this.replaying) this.writer?.append(event);

    this.notify(event, change);
    return event;
  }

  /**
   * Observers see events in log order, each once, even when an observer appends: an append
   * made from inside a listener is delivered after the current event reached every listener.
   */
  private notify(event: SessionEvent, change: SurfaceChange | undefined): void {
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

  private foldStructure(e: SessionEvent): void {
    this.brackets.fold(e);
    switch (e.type) {
      case 'turn/start':
        this.turnOpen = e.data.turn;
        this.lastTurnNo = e.data.turn;
        this.lastStepNo = -1;
        return;
      case 'turn/end':
        this.turnOpen = null;
        return;
      case 'step/start':
        this.stepOpen = { turn: e.data.turn, step: e.data.step };
        this.lastStepNo = e.data.step;
        return;
      case 'step/end':
        this.stepOpen = null;
        return;
      case 'request/header':
        this.headerSeq = e.seq;
        return;
      case 'assistant/message':
        // A replace (an argument prune) rewrites an old reply; it is no new reply.
        if (e.surfaceOp !== 'append') return;
        this.replySeq = e.seq;
        if (e.data.usage) this.usageSeq = e.seq;
        return;
      default:
        return;
    }
  }
}
