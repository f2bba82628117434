/**
 * Which surface a provider report counts (docs/local-models.md#counts-the-tokenizer-is-not-ours; src/services/metering/measurement.ts):
 * a report answers the request of its request/header. A background commit recorded while that
 * request was open does not make the report describe the compacted surface; an overflow
 * recovery that re-sent the request under the same header does.
 */
import { describe, expect, it } from 'vitest';
import { getTokenizer, TokenMeter } from '../../../src/services/metering';
import { Session, SessionWriter } from '../../../src/session/index';

const TOOL = { type: 'function', function: { name: 'read', parameters: { type: 'object' } } };

function world() {
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  const t = getTokenizer('o200k_base');
  const meter = new TokenMeter(session, { tokenizerFor: () => t });
  /** What "the provider" counts: our own price of the request (a 1× provider). */
  const count = () => meter.measure().estimatedTokens;
  w.startTurn();
  w.startStep();
  w.request({ provider: 'p', model: 'm', systemPrompt: 'You are an agent.', tools: [TOOL] });
  for (let i = 0; i < 12; i++) {
    w.user(`Step ${i}: please look at module ${i}; `.repeat(30));
    w.assistant({ text: `Module ${i} is fine.`, usage: { promptTokens: count(), completionTokens: 0 } });
  }
  return { session, w, meter, count };
}

/** Condenses every node but the system prompt and the newest two into one checkpoint. */
function compact(session: Session): void {
  const seqs = [...session.surface.seqs()];
  const span = seqs.slice(1, seqs.length - 2);
  session.append({
    type: 'user/message',
    data: { content: [{ type: 'text', text: 'Modules 0–10 were looked at; all fine.' }] },
    surfaceOp: { op: 'replace', start: span[0]!, end: span[span.length - 1]! },
    sourceEventSeqs: span,
  });
}

describe('the surface a report counts', () => {
  it('a reply to a request sent before a background commit does not anchor the compacted surface to its count', () => {
    const { session, w, meter, count } = world();
    w.user('One more question about module 12. '.repeat(20));
    w.request({ provider: 'p', model: 'm', tools: [TOOL] });
    const sent = count(); // the provider counts the request as it was sent
    compact(session); // the background summary commits while the request is open
    w.assistant({ text: 'Module 12 is fine.', usage: { promptTokens: sent, completionTokens: 8 } });
    const truth = count();
    const m = meter.measure();
    expect(truth).toBeLessThan(sent / 3);
    expect(Math.abs(m.totalTokens - truth) / truth, `measured ${m.totalTokens}, the next request is ${truth}`).toBeLessThan(0.05);
    expect(m.suspectUsage).toBe(false);
  });

  it('a request re-sent after an overflow recovery, under the same header, is counted as it is now', () => {
    const { session, w, meter, count } = world();
    w.user('One more question about module 12. '.repeat(20));
    w.request({ provider: 'p', model: 'm', tools: [TOOL] });
    compact(session); // overflow recovery compacts; the agent re-sends from the surface now
    const resent = count();
    w.assistant({ text: 'Module 12 is fine.', usage: { promptTokens: resent, completionTokens: 8 } });
    const m = meter.measure();
    expect(m.anchor?.providerTokens).toBe(resent + 8);
    expect(Math.abs(m.totalTokens - count()) / count()).toBeLessThan(0.05);
  });
});
