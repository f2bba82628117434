/**
 * Pruning what the agent wrote (docs/spec.md#15-pruning-what-the-agent-wrote): an older assistant message whose tool-call
 * arguments hold oversized strings (a `write` of a whole file, a big `edit`) is replaced by
 * the same message with each such string cut like a tool result (head, one marker, tail).
 * The arguments stay valid JSON with the same keys, numbers and array lengths; call ids,
 * names, text and reasoning are unchanged (the session's argument-prune rule checks all of it).
 *
 * Which messages: only those whose calls all have their results on the surface (the call is
 * history, not work in flight), whose arguments are JSON (anything else must stay
 * byte-identical), and that pruner.ts's protections allow: outside the recent budget, no
 * pruned call in `neverPrune`, and a replacement that costs fewer tokens. The pass's minimum
 * reclaim is judged by planPrune over tool results and arguments together.
 */
import { isJson, withPrunedArguments } from '../../session/argument-prune';
import { toolCallsOf, type EventData } from '../../session/events';
import { jsonTokens } from '../../session/json-tokens';
import type { Session } from '../../session/session';
import { prunedHandle } from '../recall';

export interface ArgumentPruneTarget {
  /** The assistant/message node to replace. */
  readonly seq: number;
  /** The calls whose arguments are cut, in message order, with their new arguments. */
  readonly calls: ReadonlyArray<{ readonly callId: string; readonly name: string; readonly arguments: string }>;
  /** The message's arguments the plan was made from, by call id: applyPrune checks they are unchanged. */
  readonly argumentsBefore: Readonly<Record<string, string>>;
  readonly charsBefore: number;
  readonly charsAfter: number;
  readonly tokensBefore: number;
  readonly tokensAfter: number;
}

export interface ArgumentPruneSettings {
  thresholdChars: number;
  headChars: number;
  tailChars: number;
  /** Recall is on: the marker names the message's handle. */
  recallHandle?: string | undefined;
  recall?: boolean | undefined;
}

export type ArgumentKeepReason = 'protected-recent' | 'never-prune' | 'no-gain';

interface Helpers {
  codePointLength(s: string): number;
  truncateMiddle(text: string, s: { headChars: number; tailChars: number; recallHandle?: string | undefined }): string;
  priceOf(seq: number): number;
  priceAssistant(data: EventData<'assistant/message'>): number;
}

/** Argument keys naming what the agent did (a command, a path, a pattern): never cut. */
export const ACTION_KEY = /^(?:command|cmd|script|path|paths|file|file_?path|filename|pattern|query|glob|regex)$/i;

/**
 * `text` (valid JSON) with every string value of more than `threshold` code points cut, and
 * every other byte (keys, numbers as written, whitespace) copied unchanged; undefined when no
 * string is cut. Works on the text, not a parsed value: see json-tokens.ts for what parsing loses.
 */
export function pruneJsonText(text: string, settings: ArgumentPruneSettings, h: Pick<Helpers, 'codePointLength' | 'truncateMiddle'>): string | undefined {
  let out = '';
  let copied = 0;
  let key: string | undefined;
  for (const t of jsonTokens(text)) {
    if (t.kind === 'key') {
      key = t.end - t.start <= 40 ? (JSON.parse(text.slice(t.start, t.end)) as string) : undefined;
      continue;
    }
    const of = key;
    key = undefined;
    // The agent's own action stays whole: a command, a path, a search pattern (what it did, not what it wrote).
    if (of !== undefined && ACTION_KEY.test(of)) continue;
    // A literal's text is at least as long as its value (escapes only lengthen it): cheap filter.
    if (t.kind !== 'string' || t.end - t.start - 2 <= settings.thresholdChars) continue;
    const value = JSON.parse(text.slice(t.start, t.end)) as string;
    if (h.codePointLength(value) <= settings.thresholdChars) continue;
    const cut = h.truncateMiddle(value, settings);
    if (cut === value) continue;
    out += text.slice(copied, t.start) + JSON.stringify(cut);
    copied = t.end;
  }
  return copied === 0 ? undefined : out + text.slice(copied);
}

/**
 * The argument prunes a pass would make, oldest first, and the oversized calls it leaves.
 * `recent` are the protected seqs; `never` the tool names never pruned.
 */
export function planArgumentPrunes(
  session: Session,
  settings: ArgumentPruneSettings,
  recent: ReadonlySet<number>,
  never: ReadonlySet<string>,
  h: Helpers,
): { targets: ArgumentPruneTarget[]; kept: Array<{ seq: number; callId: string; reason: ArgumentKeepReason }> } {
  const targets: ArgumentPruneTarget[] = [];
  const kept: Array<{ seq: number; callId: string; reason: ArgumentKeepReason }> = [];
  const pending = new Set(session.surface.pendingCalls());
  for (const seq of session.surface.seqs()) {
    const event = session.event(seq);
    if (event.type !== 'assistant/message') continue;
    const calls = toolCallsOf(event);
    if (calls.length === 0 || calls.some((c) => pending.has(c.id))) continue;
    // Cheap filter first: a call whose whole argument text fits cannot hold an oversized string.
    const big = calls.filter((c) => c.arguments.length > settings.thresholdChars);
    if (big.length === 0) continue;
    const pruned: Array<{ callId: string; name: string; arguments: string }> = [];
    for (const call of big) {
      if (!isJson(call.arguments)) continue; // not JSON: the session keeps such arguments byte-identical
      const next = pruneJsonText(call.arguments, settings.recall === true ? { ...settings, recallHandle: prunedHandle(seq) } : settings, h);
      if (next === undefined) continue;
      if (never.has(call.name)) {
        kept.push({ seq, callId: call.id, reason: 'never-prune' });
        continue;
      }
      pruned.push({ callId: call.id, name: call.name, arguments: next });
    }
    if (pruned.length === 0) continue;
    if (recent.has(seq)) {
      for (const c of pruned) kept.push({ seq, callId: c.callId, reason: 'protected-recent' });
      continue;
    }
    const byId = new Map(pruned.map((c) => [c.callId, c.arguments]));
    const data = withPrunedArguments(event, byId).data;
    const tokensBefore = h.priceOf(seq);
    const tokensAfter = h.priceAssistant(data);
    if (tokensAfter >= tokensBefore) {
      for (const c of pruned) kept.push({ seq, callId: c.callId, reason: 'no-gain' });
      continue;
    }
    const before: Record<string, string> = {};
    for (const c of calls) before[c.id] = c.arguments;
    targets.push(
      Object.freeze({
        seq,
        calls: Object.freeze(pruned.map((c) => Object.freeze(c))),
        argumentsBefore: Object.freeze(before),
        charsBefore: pruned.reduce((n, c) => n + h.codePointLength(before[c.callId]!), 0),
        charsAfter: pruned.reduce((n, c) => n + h.codePointLength(c.arguments), 0),
        tokensBefore,
        tokensAfter,
      }),
    );
  }
  return { targets, kept };
}

/**
 * Checks an argument target against the session (still a current assistant/message with the
 * arguments the plan was made from) and builds its two events, or says why it is stale.
 */
export function argumentWrites(
  session: Session,
  target: ArgumentPruneTarget,
): { prune: EventData<'compaction/prune'>; replacement: (pruneSeq: number) => { data: EventData<'assistant/message'>; sourceEventSeqs: number[] } } | string {
  if (!session.surface.has(target.seq)) return 'is no longer a current surface node (shadowed, or never on this surface)';
  const event = session.event(target.seq);
  if (event.type !== 'assistant/message') return `is a ${event.type}, not an assistant/message`;
  const calls = toolCallsOf(event);
  if (calls.length !== Object.keys(target.argumentsBefore).length || calls.some((c) => target.argumentsBefore[c.id] !== c.arguments)) {
    return 'has different tool calls than the plan was made from';
  }
  const args = new Map(target.calls.map((c) => [c.callId, c.arguments]));
  return {
    prune: {
      targetSeq: target.seq,
      // One prune event per message; it names the first call it cuts.
      callId: target.calls[0]!.callId,
      tokensBefore: target.tokensBefore,
      tokensAfter: target.tokensAfter,
      charsBefore: target.charsBefore,
      charsAfter: target.charsAfter,
    },
    replacement: (pruneSeq) => {
      const { data, sourceEventSeqs } = withPrunedArguments(event, args, pruneSeq);
      return { data, sourceEventSeqs: [...sourceEventSeqs!] };
    },
  };
}
