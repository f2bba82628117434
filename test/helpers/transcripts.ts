/**
 * The committed transcripts of other harnesses (test/fixtures/claude-code/, test/fixtures/codex/):
 * the two real ones (MIT, licences beside them) and the hand-made edge cases. A missing
 * fixture is an error, never a skipped test.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { TokenMeter } from '../../src/advanced';
import { getTokenizer } from '../../src/index';
import type { AppendInput, SessionEvent } from '../../src/session/events';
import { Session } from '../../src/session/session';

export function fixture(path: string): string {
  const file = fileURLToPath(new URL(`../fixtures/${path}`, import.meta.url));
  if (!existsSync(file)) throw new Error(`the transcript fixture is missing: ${file} (it is committed with the repository)`);
  return file;
}

export const CLAUDE_REAL = fixture('claude-code/real-session.jsonl');
export const CODEX_REAL = fixture('codex/real-rollout.jsonl');

export const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

/**
 * The meter lived through an imported session: the log is appended again event by event, and
 * just before each recorded reply with usage, the meter's figure for the request on the
 * surface is set against the prompt the provider reported for it. The meter anchors on each
 * report and calibrates its per-route ratio online, as it does in a live session.
 */
export function usageTracking(source: Session): Array<{ seq: number; predicted: number; actual: number }> {
  const session = Session.inMemory('usage-tracking');
  const meter = new TokenMeter(session, { tokenizerFor: () => getTokenizer('o200k_base') });
  const rows: Array<{ seq: number; predicted: number; actual: number }> = [];
  for (const e of source.events()) {
    if (e.type === 'assistant/message' && e.data.usage) {
      rows.push({ seq: e.seq, predicted: meter.measure().totalTokens, actual: e.data.usage.promptTokens });
    }
    const input = { type: e.type, data: e.data } as AppendInput;
    if (e.surfaceOp !== undefined) input.surfaceOp = e.surfaceOp;
    if (e.sourceEventSeqs !== undefined) input.sourceEventSeqs = e.sourceEventSeqs;
    session.append(input);
  }
  return rows;
}

export function eventsOf<T extends SessionEvent['type']>(session: Session, type: T): SessionEvent<T>[] {
  return session.events().filter((e) => e.type === type) as unknown as SessionEvent<T>[];
}
