/**
 * The invariants checkLoop judges on what the loop sent, against what the log says it should
 * have sent: the request after a commit carries the checkpoint and none of the span it
 * shadows; the first request after a resume carries every message the log held; no request
 * carries a message twice. Messages are told apart by what no two of them share: a tool call
 * or result by its call id, an assistant answer by its text (the scripted model never answers
 * the same twice), a user message by its text when it is long (a short prompt may be asked
 * again after a crash, on purpose).
 */
import { toChatMessage } from '../../session/derive';
import { isCheckpoint, isSurfaceType, type SessionEvent, type SurfaceEvent } from '../../session/events';
import type { ChatRequestBody } from '../scenarios';
import type { Violation } from './invariants';

/** User texts shorter than this are not identities (a prompt asked again after a crash is no duplicate). */
const LONG_USER_TEXT = 200;

export interface AgentRequest {
  /** Position in the server's requests. */
  index: number;
  body: ChatRequestBody;
}

/** An event handed to the store, with how many requests the server had received by then. */
export interface StoreMark {
  event: SessionEvent;
  requests: number;
}

type ChatMessageLike = { role?: string; content?: unknown; tool_calls?: unknown; tool_call_id?: unknown };

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p) => (p && typeof p === 'object' && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : '')).join('');
}

/** What identifies one chat message: `c:`/`r:` a tool call/result id, `a:` an answer's text, `u:` a long user text. */
export function messageKeys(m: ChatMessageLike): string[] {
  const keys: string[] = [];
  const text = textOf(m.content).trim();
  if (m.role === 'user' && text.length >= LONG_USER_TEXT) keys.push(`u:${text}`);
  if (m.role === 'assistant') {
    if (text !== '') keys.push(`a:${text}`);
    for (const c of Array.isArray(m.tool_calls) ? (m.tool_calls as Array<{ id?: unknown }>) : []) if (typeof c.id === 'string') keys.push(`c:${c.id}`);
  }
  if (m.role === 'tool' && typeof m.tool_call_id === 'string') keys.push(`r:${m.tool_call_id}`);
  return keys;
}

export function eventKeys(e: SessionEvent | undefined): string[] {
  if (!e || !isSurfaceType(e.type) || e.type === 'system/message') return [];
  return messageKeys(toChatMessage(e as SurfaceEvent));
}

function keysOf(body: ChatRequestBody): string[] {
  return (body.messages ?? []).flatMap((m) => messageKeys(m as ChatMessageLike));
}

const describeKey = (key: string): string => {
  const kind = { c: 'tool call', r: 'tool result of', a: 'answer', u: 'user message' }[key[0] as 'c' | 'r' | 'a' | 'u'];
  const what = key.slice(2);
  return key[0] === 'c' || key[0] === 'r' ? `${kind} ${what}` : `${kind} "${what.length > 40 ? `${what.slice(0, 40)}…` : what}"`;
};

/** No request carries the same message twice (an answer appended twice, a history recorded again). */
export function duplicateViolations(agent: readonly AgentRequest[]): Violation[] {
  const out: Violation[] = [];
  for (const r of agent) {
    const seen = new Set<string>();
    const twice = keysOf(r.body).filter((k) => (seen.has(k) ? true : (seen.add(k), false)));
    if (twice.length > 0)
      out.push({
        invariant: 'no-message-twice',
        message: `request ${r.index} carries the ${describeKey(twice[0]!)} twice${twice.length > 1 ? ` (and ${twice.length - 1} more)` : ''}`,
      });
  }
  return out;
}

interface Commit {
  text: string;
  shadowed: string[];
  /** Requests the server had received when a request built after the commit could first be sent. */
  from: number;
}

/**
 * The commits in the order they landed. A foreground commit (pressure or overflow) lands inside
 * a call the loop awaits: the next request is built after it. A background one lands on its own,
 * maybe while a request built before it is on its way: the next request after the next
 * `step/start` is built after it.
 */
function commitsOf(marks: readonly StoreMark[], events: readonly SessionEvent[]): Commit[] {
  const out: Commit[] = [];
  let background = false;
  let shadowedSeqs: readonly number[] = [];
  for (const [k, { event, requests }] of marks.entries()) {
    if (event.type === 'compaction/start') background = (event.data as { background?: boolean }).background === true;
    if (event.type === 'compaction/summary') shadowedSeqs = (event.data as { shadowedSeqs: number[] }).shadowedSeqs;
    if (!isCheckpoint(event)) continue;
    const from = background ? marks.slice(k + 1).find((m) => m.event.type === 'step/start')?.requests : requests;
    if (from === undefined) continue;
    const text = textOf(toChatMessage(event as SurfaceEvent).content).trim();
    out.push({ text, shadowed: shadowedSeqs.flatMap((seq) => eventKeys(events[seq])), from });
  }
  return out;
}

/** The request after each commit carries its checkpoint, and nothing of the span it shadows. */
export function checkpointViolations(agent: readonly AgentRequest[], marks: readonly StoreMark[], events: readonly SessionEvent[]): Violation[] {
  const out: Violation[] = [];
  const commits = commitsOf(marks, events);
  for (const [k, commit] of commits.entries()) {
    const next = agent.find((r) => r.index >= commit.from);
    if (!next) continue;
    // A later commit landed before that request: its own checkpoint shadows this one.
    if (commits.slice(k + 1).some((c) => c.from <= next.index)) continue;
    const texts = (next.body.messages ?? []).map((m) => textOf(m.content));
    const head = commit.text.slice(0, 200);
    if (!texts.some((t) => t.includes(head))) {
      out.push({
        invariant: 'sends-checkpoint',
        message: `request ${next.index}, the first after a compaction committed, does not carry its checkpoint: send the session's derived messages, not your own array`,
      });
    }
    const sent = new Set(keysOf(next.body));
    const stale = commit.shadowed.filter((key) => sent.has(key));
    if (stale.length > 0) {
      out.push({
        invariant: 'sends-checkpoint',
        message: `request ${next.index} still carries the ${describeKey(stale[0]!)}${stale.length > 1 ? ` (and ${stale.length - 1} more)` : ''}, which the checkpoint replaced`,
      });
    }
  }
  return out;
}

/**
 * The first request after a resume carries every message the log held at the crash (the
 * resumed run may compact before it: what that commit shadowed is not asked for).
 */
export function resumeViolations(
  agent: readonly AgentRequest[],
  resume: { requests: number; logLength: number; keys: readonly string[] },
  marks: readonly StoreMark[],
  events: readonly SessionEvent[],
): Violation[] {
  const next = agent.find((r) => r.index >= resume.requests);
  if (!next) return [];
  const exempt = new Set<string>();
  for (const { event, requests } of marks) {
    if (event.type !== 'compaction/summary' || event.seq < resume.logLength || requests > next.index) continue;
    for (const seq of (event.data as { shadowedSeqs: number[] }).shadowedSeqs) for (const key of eventKeys(events[seq])) exempt.add(key);
  }
  const sent = new Set(keysOf(next.body));
  const dropped = resume.keys.filter((key) => !exempt.has(key) && !sent.has(key));
  if (dropped.length === 0) return [];
  return [
    {
      invariant: 'resume-keeps-history',
      message: `request ${next.index}, the first after the restart, dropped the ${describeKey(dropped[0]!)}${dropped.length > 1 ? ` (and ${dropped.length - 1} more)` : ''} the session held: continue from the session (its derived messages), not a fresh or saved array`,
    },
  ];
}
