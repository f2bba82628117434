/**
 * Writing an agent's work into a world's session (headers, turns, tool steps), arranging what a
 * path needs (a held lock, a rewritten node, a broken store) and sizing texts in tokens.
 */
import { appendFileSync } from 'node:fs';
import { frameCheckpoint } from '../../src/services/summarizing';
import type { RangeSelection } from '../../src/services/selection';
import { getTokenizer } from '../../src/services/metering';
import type { SessionEvent } from '../../src/session/events';
import type { Call } from './controller';
import type { World } from './runner';

export const SYSTEM_PROMPT = 'You are a coding agent. Keep answers short.';

export function route(w: World, model: string = 'small'): void {
  w.writer.request({ provider: 'test', model, systemPrompt: SYSTEM_PROMPT, tools: [], maxTokens: 500 });
}

export function startTurn(w: World, text = 'Please fix the build.'): void {
  w.writer.startTurn();
  route(w);
  w.writer.user(text);
}

export function endTurn(w: World): void {
  if (w.session.openStep) w.writer.endStep();
  if (w.session.openTurn !== null) w.writer.endTurn();
}

/** One agent step: header, an assistant message with one tool call, its result. */
/** `promptTokens`: the provider's reported usage for the step's reply. */
export function toolStep(w: World, opts: { result?: string; open?: boolean; model?: string; promptTokens?: number } = {}): void {
  if (w.session.openTurn === null) startTurn(w);
  if (w.session.openStep) w.writer.endStep();
  const i = w.session.length; // unique per session, also across engines over a reopened one
  w.steps++;
  w.writer.startStep();
  route(w, opts.model);
  w.writer.assistant({
    text: `step ${i}`,
    // A tool whose arguments name no path, command or pattern: the checkpoint ledger stays empty,
    // so a summary the server is scripted to write is the checkpoint, at the size a path asks for.
    toolCalls: [{ id: `c${i}`, name: 'list', arguments: JSON.stringify({ dir: `dir${i}` }) }],
    ...(opts.promptTokens !== undefined ? { usage: { promptTokens: opts.promptTokens, completionTokens: 20 } } : {}),
  });
  w.writer.toolResult(`c${i}`, opts.result ?? `file${i}.ts\n`.repeat(60), { toolName: 'list' });
  if (!opts.open) w.writer.endStep();
}

export function pressureNow(w: World): { total: number; threshold: number } {
  const m = w.engine.measure();
  return { total: m.totalTokens, threshold: m.threshold ?? Infinity };
}

/** Tool steps until the request is at least `margin` tokens over the threshold; the last step stays open. */
export function fillAbove(w: World, margin = 0, opts: { result?: string } = {}): void {
  for (let i = 0; i < 200; i++) {
    toolStep(w, { open: true, ...opts });
    const p = pressureNow(w);
    if (p.total >= p.threshold + margin) return;
  }
  throw new Error('fillAbove: pressure never reached the threshold');
}

/** Tool steps that stay under the threshold; the last step stays open. */
export function fillBelow(w: World, steps = 3): void {
  for (let i = 0; i < steps; i++) toolStep(w, { open: true });
  const p = pressureNow(w);
  if (p.total >= p.threshold) throw new Error('fillBelow: already above the threshold');
}

/** An orphan lock: a compaction/start no compaction/end follows (another compaction, or a dead process). */
export function takeLock(w: World): SessionEvent {
  return w.session.append({ type: 'compaction/start', data: { turn: w.session.openTurn, trigger: 'manual' } });
}

/**
 * Rewrites one surface node in place (content-only, as a prune pass does): the node's seq
 * leaves the surface, so a span that names it is no longer intact.
 */
export function rewriteNode(w: World, seq: number): void {
  const e = w.session.event(seq);
  const op = { op: 'replace' as const, start: seq, end: seq };
  if (e.type === 'tool/result') {
    w.session.append({
      type: 'tool/result',
      data: { ...e.data, content: [{ type: 'text', text: 'rewritten while the compaction ran' }] },
      surfaceOp: op,
      sourceEventSeqs: [seq],
    });
  } else if (e.type === 'user/message' || e.type === 'assistant/message') {
    w.session.append({ type: e.type, data: e.data, surfaceOp: op, sourceEventSeqs: [seq] } as never);
  } else {
    throw new Error(`rewriteNode: cannot rewrite a ${e.type}`);
  }
}

/** Makes the store refuse the next write: bytes appended behind the writer's back. */
export async function breakStore(w: World): Promise<void> {
  await w.session.flush();
  appendFileSync(w.file, '{"torn":');
}

/** A summary text whose framed checkpoint costs about `tokens` tokens. */
export function summaryOfTokens(tokens: number): string {
  const tokenizer = getTokenizer('o200k_base');
  const textOf = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(' ') || 'x';
  const cost = (n: number) => tokenizer.count(frameCheckpoint(textOf(n))) + 4;
  let lo = 0;
  let hi = Math.max(1, tokens);
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cost(mid) < tokens) lo = mid + 1;
    else hi = mid;
  }
  return textOf(lo);
}

/** Plain text of about `tokens` tokens (distinct words, so it costs what it looks like). */
export function textOfTokens(tokens: number): string {
  const tokenizer = getTokenizer('o200k_base');
  const textOf = (n: number) => Array.from({ length: n }, (_, i) => `note${i}`).join(' ');
  let lo = 1;
  let hi = Math.max(2, tokens);
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (tokenizer.count(textOf(mid)) < tokens) lo = mid + 1;
    else hi = mid;
  }
  return textOf(lo);
}

export function rangeOf(call: Call): RangeSelection {
  const r = call.output as RangeSelection | null;
  if (!r) throw new Error('selectRange gave no range');
  return r;
}
