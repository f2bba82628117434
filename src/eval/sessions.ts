/**
 * Sessions derived from one recorded session, for the replay: a part of it (a second
 * transcript from the same file) and a longer one stitched from copies.
 */
import type { AppendInput } from '../session/events';
import { Session } from '../session/session';
import { historyFacts } from './retention';

/**
 * The `part`-th of `parts` consecutive pieces of a session (1-based), cut at turn starts so
 * each piece has about the same number of agent requests; a fresh session of its events.
 */
export function partOf(source: Session, part: number, parts: number): Session {
  const events = source.events();
  const total = events.filter((e) => e.type === 'assistant/message').length;
  const cuts = [0];
  let requests = 0;
  events.forEach((e, i) => {
    if (e.type === 'assistant/message') requests++;
    if (e.type === 'turn/start' && cuts.length < parts && requests >= (cuts.length * total) / parts) cuts.push(i);
  });
  cuts.push(events.length);
  const out = Session.inMemory(`economics-part-${part}-of-${parts}`);
  for (const e of events.slice(cuts[part - 1], cuts[part])) {
    const input = { type: e.type, data: e.data } as AppendInput;
    if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    out.append(input);
  }
  return out;
}

/**
 * A longer session made of `copies` replays of `source` one after another, the n-th copy's
 * top-level folders renamed (`packages/` → `packages-2/`): a session that keeps meeting new
 * files and errors, turn numbers running on. Synthetic, but every message is a real one.
 */
export function stitched(source: Session, copies: number): Session {
  const events = source.events();
  const folders = new Set<string>();
  for (const p of historyFacts(events).paths) {
    const m = /^([\w.-]+)\//.exec(p);
    if (m?.[1] !== undefined && m[1] !== '.' && m[1] !== '..') folders.add(m[1]);
  }
  const turns = 1 + Math.max(0, ...events.map((e) => (typeof (e.data as { turn?: unknown }).turn === 'number' ? (e.data as { turn: number }).turn : 0)));
  const out = Session.inMemory(`economics-${copies}-copies`);
  for (let k = 0; k < copies; k++) {
    const rename = (text: string) => (k === 0 ? text : [...folders].reduce((t, f) => t.split(`${f}/`).join(`${f}-${k + 1}/`), text));
    for (const e of events) {
      const data = JSON.parse(rename(JSON.stringify(e.data))) as { turn?: number; callId?: string; content?: Array<{ type: string; id?: string }> };
      if (typeof data.turn === 'number') data.turn += k * turns;
      // Tool call ids are unique on a surface: each copy gets its own.
      if (k > 0 && typeof data.callId === 'string') data.callId += `-${k + 1}`;
      if (k > 0 && e.type === 'assistant/message') for (const b of data.content ?? []) if (b.type === 'tool-call' && b.id !== undefined) b.id += `-${k + 1}`;
      const input = { type: e.type, data } as AppendInput;
      if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
      out.append(input);
    }
  }
  return out;
}
