/**
 * The surface: the ordered projection of the log the model sees, with the indexes that
 * make every question about it cheap: position of a node, its derived message, and
 * tool-pairing balance at every cut.
 *
 * Balance is matched by call id. Cut p (between node p-1 and node p) is balanced when
 * every tool call in nodes [0, p) has its result in nodes [0, p). Because a result may
 * only be appended for a pending call, a balanced cut also has no result after it that
 * answers a call before it, so a parallel-call batch and its results form one unit.
 *
 * Everything here is incremental: an append folds one node; log-only growth touches
 * nothing; a replace splices the indexes (it reads only the shadowed events).
 */
import { deepFreeze } from './freeze';
import { SessionRuleError } from './errors';
import { toChatMessage, type ChatMessage } from './derive';
import { argumentPruneProblem } from './argument-prune';
import { readOnlyPrefix } from './message-view';
import { toolCallsOf, type ReplaceOp, type SessionEvent, type SurfaceEvent } from './events';

export type SurfacePlan =
  | { kind: 'append' }
  | {
      kind: 'replace';
      startPos: number;
      endPos: number;
      shadowed: number[];
      /** A single-node rewrite that changes content only: structure and balance stay as they are. */
      contentOnly: boolean;
    };

/** Every append's plan (it carries nothing of its own): one object, not one per event. */
const APPEND: SurfacePlan = Object.freeze({ kind: 'append' });

/**
 * Cached messages are shared by every deriveMessages() array: frozen, so a caller that edits
 * one (to truncate it for a request, say) gets a TypeError instead of corrupting the cache.
 */
function frozenMessage(event: SessionEvent): ChatMessage {
  return deepFreeze(toChatMessage(event as SurfaceEvent));
}

export type SurfaceChange =
  { kind: 'append'; position: number; seq: number } | { kind: 'replace'; position: number; seq: number; shadowed: readonly number[]; generation: number };

/** Read-only view handed to callers; the session owns the mutable instance. */
export interface SurfaceView {
  readonly length: number;
  readonly replaceGeneration: number;
  seqAt(position: number): number;
  positionOf(seq: number): number | undefined;
  has(seq: number): boolean;
  /** Surface seqs in order. Iterates without copying. */
  seqs(): IterableIterator<number>;
  /** Seqs of a position range [from, to), copied. */
  slice(from: number, to?: number): number[];
  /** Is the cut before `position` (0 ≤ position ≤ length) tool-pairing balanced? */
  balancedAt(position: number): boolean;
  /** Positions of every balanced cut, ascending (0 is always one). */
  balancedCuts(): number[];
  /** Call ids still waiting for their result, in call order. */
  pendingCalls(): string[];
  /** The seqs a replacement shadowed, by the replacing event's seq. */
  shadowedBy(seq: number): readonly number[] | undefined;
}

export class Surface implements SurfaceView {
  private readonly nodes: number[] = [];
  /** Surface position by seq, -1 for a seq that is not a current node: seqs are dense, so an array (a reopen indexes 80k). */
  private readonly pos: number[] = [];
  private messages: (ChatMessage | undefined)[] = [];
  /** cuts[p]: is the cut before node p balanced. Length is nodes.length + 1. */
  private readonly cuts: boolean[] = [true];
  /** callId → seq of the assistant node that made the call, while its result is missing. */
  private readonly pending = new Map<string, number>();
  /** Every call id currently on the surface (answered or not), to refuse duplicates. */
  private readonly callIds = new Set<string>();
  private readonly shadowMap = new Map<number, readonly number[]>();
  private generation = 0;
  /** Positions below this have their message converted (a replace lowers it). */
  private converted = 0;
  /** The view deriveMessages() returns until the surface changes. */
  private view: readonly ChatMessage[] | undefined;
  /** `messages` backs a view handed out: a replace copies it before editing (appends only add). */
  private shared = false;

  constructor(private readonly eventAt: (seq: number) => SessionEvent) {}

  get length(): number {
    return this.nodes.length;
  }

  get replaceGeneration(): number {
    return this.generation;
  }

  seqAt(position: number): number {
    const seq = this.nodes[position];
    if (seq === undefined) throw new RangeError(`surface position ${position} is outside 0..${this.nodes.length - 1}`);
    return seq;
  }

  positionOf(seq: number): number | undefined {
    const p = this.pos[seq];
    return p === undefined || p < 0 ? undefined : p;
  }

  has(seq: number): boolean {
    return this.positionOf(seq) !== undefined;
  }

  seqs(): IterableIterator<number> {
    return this.nodes.values();
  }

  slice(from: number, to?: number): number[] {
    return this.nodes.slice(from, to);
  }

  balancedAt(position: number): boolean {
    return this.cuts[position] ?? false;
  }

  balancedCuts(): number[] {
    const out: number[] = [];
    for (let p = 0; p < this.cuts.length; p++) if (this.cuts[p]) out.push(p);
    return out;
  }

  pendingCalls(): string[] {
    return [...this.pending.keys()];
  }

  shadowedBy(seq: number): readonly number[] | undefined {
    return this.shadowMap.get(seq);
  }

  /**
   * Derived chat messages of the whole surface; each node is converted once and cached. After
   * appends only the new nodes are converted and the view is O(1) (see message-view.ts).
   */
  messagesView(): readonly ChatMessage[] {
    if (this.view) return this.view;
    for (let p = this.converted; p < this.nodes.length; p++) {
      if (this.messages[p] === undefined) this.messages[p] = frozenMessage(this.eventAt(this.nodes[p]!));
    }
    this.converted = this.nodes.length;
    this.view = readOnlyPrefix(this.messages as ChatMessage[], this.nodes.length);
    this.shared = true;
    return this.view;
  }

  /** The derived message of one node (cached). */
  messageAt(position: number): ChatMessage {
    let m = this.messages[position];
    if (m === undefined) {
      m = frozenMessage(this.eventAt(this.seqAt(position)));
      this.messages[position] = m;
    }
    return m;
  }

  // -------------------------------------------------------------------------
  // Planning: pure checks, no mutation. Throws SessionRuleError.

  planAppend(event: { type: SurfaceEvent['type']; data: SurfaceEvent['data'] }): SurfacePlan {
    if (event.type === 'tool/result') {
      const callId = (event.data as { callId: string }).callId;
      if (!this.pending.has(callId)) {
        const why = this.callIds.has(callId) ? 'that call already has its result on the surface' : 'no tool call with that id is on the surface';
        throw new SessionRuleError(
          'orphan-tool-result',
          `tool/result for call "${callId}" cannot be appended: ${why}. A tool result must answer a pending call of an earlier assistant/message.`,
        );
      }
      return APPEND;
    }
    if (this.pending.size > 0) {
      throw new SessionRuleError(
        'pending-tool-calls',
        `${event.type} cannot be appended while tool calls ${[...this.pending.keys()].map((c) => `"${c}"`).join(', ')} wait for results: append a tool/result for each first (isError: true for a call that was aborted).`,
      );
    }
    if (event.type === 'assistant/message') {
      const seen = new Set<string>();
      for (const b of (event.data as SessionEvent<'assistant/message'>['data']).content) {
        if (b.type !== 'tool-call') continue;
        if (seen.has(b.id) || this.callIds.has(b.id)) {
          throw new SessionRuleError(
            'duplicate-tool-call-id',
            `assistant/message repeats tool call id "${b.id}", which is already on the surface: every tool call needs a unique id.`,
          );
        }
        seen.add(b.id);
      }
    }
    return APPEND;
  }

  planReplace(op: ReplaceOp, event: { type: SurfaceEvent['type']; data: SurfaceEvent['data'] }, sourceEventSeqs: readonly number[] | undefined): SurfacePlan {
    const startPos = this.positionOf(op.start);
    const endPos = this.positionOf(op.end);
    if (startPos === undefined || endPos === undefined) {
      const missing = startPos === undefined ? op.start : op.end;
      throw new SessionRuleError(
        'replace-not-on-surface',
        `replace {start: ${op.start}, end: ${op.end}} names seq ${missing}, which is not a current surface node (never a message, or already shadowed).`,
      );
    }
    if (startPos > endPos) {
      throw new SessionRuleError(
        'replace-order',
        `replace {start: ${op.start}, end: ${op.end}}: start is at surface position ${startPos}, after end at ${endPos}. Spans are in surface order, not seq order.`,
      );
    }
    const shadowed = this.nodes.slice(startPos, endPos + 1);
    const sources = new Set(sourceEventSeqs ?? []);
    const uncovered = shadowed.filter((s) => !sources.has(s));
    if (uncovered.length > 0) {
      throw new SessionRuleError(
        'replace-provenance',
        `replace shadows seqs ${uncovered.join(', ')} that sourceEventSeqs does not name: provenance must cover every shadowed node.`,
      );
    }

    const first = this.eventAt(shadowed[0]!);
    if (event.type === 'tool/result') {
      const data = event.data as SessionEvent<'tool/result'>['data'];
      if (shadowed.length !== 1 || first.type !== 'tool/result') {
        throw new SessionRuleError(
          'tool-result-replacement',
          `a tool/result replacement must shadow exactly one tool/result node; this one spans ${shadowed.length} node(s) starting with ${first.type}.`,
        );
      }
      const old = first.data;
      if (
        old.callId !== data.callId ||
        old.toolName !== data.toolName ||
        (old.isError ?? false) !== (data.isError ?? false) ||
        JSON.stringify(old.providerOptions) !== JSON.stringify(data.providerOptions)
      ) {
        throw new SessionRuleError(
          'tool-result-replacement',
          `a tool/result replacement may change content only: callId, toolName, isError and providerOptions must stay ${JSON.stringify({ callId: old.callId, toolName: old.toolName, isError: old.isError, providerOptions: old.providerOptions })}.`,
        );
      }
      return { kind: 'replace', startPos, endPos, shadowed, contentOnly: true };
    }
    if (event.type === 'assistant/message' && first.type === 'assistant/message' && shadowed.length === 1 && toolCallsOf(first).length > 0) {
      const problem = argumentPruneProblem(first.data, event.data as SessionEvent<'assistant/message'>['data']);
      if (problem) {
        throw new SessionRuleError(
          'argument-prune-replacement',
          `a replacement of assistant/message ${first.seq} (which made tool calls) may only prune its tool-call arguments: ${problem}.`,
        );
      }
      // Same calls, same ids, same order: pairing and balance stay exactly as they are.
      return { kind: 'replace', startPos, endPos, shadowed, contentOnly: true };
    }

    const systemHead = this.nodes.length > 0 && this.eventAt(this.nodes[0]!).type === 'system/message';
    if (systemHead && startPos === 0) {
      if (event.type === 'system/message' && endPos === 0) {
        // A system prompt update: node 0 stays a system node, only its text changes.
        return { kind: 'replace', startPos, endPos, shadowed, contentOnly: true };
      }
      throw new SessionRuleError(
        'system-node-shadowed',
        `replace {start: ${op.start}, end: ${op.end}} would shadow the system prompt at surface node 0; start the span at node 1.`,
      );
    }
    if (!this.cuts[startPos] || !this.cuts[endPos + 1]) {
      const side = !this.cuts[startPos] ? 'before start' : 'after end';
      throw new SessionRuleError(
        'replace-unbalanced',
        `replace {start: ${op.start}, end: ${op.end}} is not tool-pairing balanced ${side}: it would split a tool call from its result. Widen the span to whole units.`,
      );
    }
    if (event.type === 'assistant/message' && toolCallsOf({ type: event.type, data: event.data } as SessionEvent).length > 0) {
      throw new SessionRuleError(
        'replace-adds-tool-calls',
        'a replacement assistant/message may not carry tool calls: calls enter the surface only by append, followed by their results (the one exception prunes the arguments of exactly one assistant/message, keeping its calls).',
      );
    }
    return { kind: 'replace', startPos, endPos, shadowed, contentOnly: false };
  }

  /**
   * A `compaction/prune` names what it rewrites: a current tool/result of the call (its
   * content), or a current assistant/message that made the call (its arguments, docs/spec.md#15-pruning-what-the-agent-wrote).
   */
  checkPruneTarget(targetSeq: number, callId: string): void {
    const target = this.has(targetSeq) ? this.eventAt(targetSeq) : undefined;
    const fits =
      target !== undefined &&
      ((target.type === 'tool/result' && target.data.callId === callId) ||
        (target.type === 'assistant/message' && toolCallsOf(target).some((c) => c.id === callId)));
    if (!fits) {
      throw new SessionRuleError(
        'prune-target',
        `compaction/prune: seq ${targetSeq} is neither a current tool/result node for call "${callId}" nor a current assistant/message that made it.`,
      );
    }
  }

  // -------------------------------------------------------------------------
  // Commit: applies a plan made against the current state. Never throws.

  commit(plan: SurfacePlan, event: SurfaceEvent): SurfaceChange {
    this.view = undefined;
    if (plan.kind === 'append') {
      const position = this.nodes.length;
      this.nodes.push(event.seq);
      this.setPosition(event.seq, position);
      this.messages.push(undefined);
      this.fold(event);
      this.cuts.push(this.pending.size === 0);
      return { kind: 'append', position, seq: event.seq };
    }

    const { startPos, endPos, shadowed } = plan;
    const count = endPos - startPos + 1;
    this.nodes.splice(startPos, count, event.seq);
    if (this.shared) {
      // Earlier views keep showing what they showed.
      this.messages = this.messages.slice();
      this.shared = false;
    }
    this.messages.splice(startPos, count, undefined);
    this.converted = Math.min(this.converted, startPos);
    for (const s of shadowed) this.pos[s] = -1;
    // A one-node replace (prune, prompt update) moves nothing: only the new node needs an index.
    if (count === 1) this.setPosition(event.seq, startPos);
    if (plan.contentOnly && event.type === 'assistant/message') {
      // An argument prune keeps its calls: a call still waiting for its result now belongs to the new node.
      for (const call of toolCallsOf(event)) if (this.pending.has(call.id)) this.pending.set(call.id, event.seq);
    } else for (let p = startPos; p < this.nodes.length; p++) this.setPosition(this.nodes[p]!, p);
    if (!plan.contentOnly) {
      // The span was balanced on both sides and the new node has no calls: its interior cuts vanish.
      this.cuts.splice(startPos + 1, count, true);
      for (const s of shadowed) for (const call of toolCallsOf(this.eventAt(s))) this.callIds.delete(call.id);
    }
    this.shadowMap.set(event.seq, Object.freeze(shadowed));
    this.generation++;
    return { kind: 'replace', position: startPos, seq: event.seq, shadowed: shadowed, generation: this.generation };
  }

  private setPosition(seq: number, position: number): void {
    // Filled up to `seq` (log-only events leave gaps): a packed array, never a sparse one.
    while (this.pos.length < seq) this.pos.push(-1);
    this.pos[seq] = position;
  }

  private fold(event: SurfaceEvent): void {
    if (event.type === 'assistant/message') {
      for (const b of event.data.content) {
        if (b.type !== 'tool-call') continue;
        this.pending.set(b.id, event.seq);
        this.callIds.add(b.id);
      }
    } else if (event.type === 'tool/result') {
      this.pending.delete(event.data.callId);
    }
  }
}
