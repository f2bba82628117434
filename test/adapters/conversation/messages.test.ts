/**
 * The face mappings (src/adapters/responses/map.ts, src/adapters/anthropic/map.ts): a Responses reply's items are one assistant
 * message, its reasoning item kept whole and given back byte for byte; signed thinking goes back
 * to Messages verbatim; each shape leaves the other's provider data out whole; a session's
 * messages read back through any shape fingerprint the same.
 */
import { describe, expect, it } from 'vitest';
import { Session, SessionWriter } from '../../../src/index';
import type { SurfaceEvent } from '../../../src/session/events';
import { anthropicMessagesOf, messagesOfAnthropic } from '../../../src/adapters/anthropic/map';
import { messagesOfResponsesItems, responsesInputOf } from '../../../src/adapters/responses/map';
import { fingerprint as shapeFingerprint, messageOf as shapeMessageOf } from '../../../src/adapters/conversation/messages';

const reasoningItem = { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'plan' }], encrypted_content: 'gAAAA-opaque' };
const responsesReply = [
  reasoningItem,
  { type: 'message', role: 'assistant', id: 'msg_1', content: [{ type: 'output_text', text: 'reading', annotations: [] }] },
  { type: 'function_call', id: 'fc_1', call_id: 'c1', name: 'read_file', arguments: '{"path": "a"}' },
];
const anthropicReply = {
  role: 'assistant',
  content: [
    { type: 'thinking', thinking: 'hmm', signature: 'sig-opaque' },
    { type: 'redacted_thinking', data: 'redacted-opaque' },
    { type: 'tool_use', id: 'c2', name: 'read_file', input: { path: 'b' } },
  ],
};

function sessionWithBoth(): { session: Session; events: SurfaceEvent[] } {
  const session = Session.inMemory();
  const w = new SessionWriter(session);
  w.startTurn();
  w.user('go');
  w.startStep();
  const a1 = messagesOfResponsesItems(responsesReply)[0]!;
  session.append({ type: 'assistant/message', data: { content: (a1 as unknown as { blocks: never[] }).blocks }, surfaceOp: 'append' });
  w.toolResult('c1', 'A');
  w.endStep();
  w.startStep();
  const a2 = messagesOfAnthropic([anthropicReply as never]).messages[0]!;
  session.append({ type: 'assistant/message', data: { content: (a2 as unknown as { blocks: never[] }).blocks }, surfaceOp: 'append' });
  w.toolResult('c2', 'B');
  const events = [...session.surface.seqs()].map((s) => session.event(s) as SurfaceEvent);
  return { session, events };
}

describe('shape mappings', () => {
  it("a Responses reply is one assistant message; its reasoning item goes back whole, the other shape's thinking not at all", () => {
    const [m] = messagesOfResponsesItems(responsesReply);
    expect(m!.role).toBe('assistant');
    expect((m as { blocks: Array<{ type: string }> }).blocks.map((b) => b.type)).toEqual(['reasoning', 'text', 'tool-call']);
    const { events } = sessionWithBoth();
    const { input } = responsesInputOf(events);
    expect(input.filter((i) => i.type === 'reasoning')).toEqual([reasoningItem]);
    // The reasoning item stays right before the call it led to; the Anthropic turn goes without its thinking.
    expect(input.map((i) => i.type ?? i.role)).toEqual([
      'user',
      'reasoning',
      'message',
      'function_call',
      'function_call_output',
      'function_call',
      'function_call_output',
    ]);
  });

  it('signed and redacted thinking go back to Messages verbatim with their turn; the encrypted reasoning item does not', () => {
    const { events } = sessionWithBoth();
    const { messages } = anthropicMessagesOf(events);
    const blocks = messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []));
    expect(blocks.filter((b) => b.type === 'thinking' || b.type === 'redacted_thinking')).toEqual([
      { type: 'thinking', thinking: 'hmm', signature: 'sig-opaque' },
      { type: 'redacted_thinking', data: 'redacted-opaque' },
    ]);
    expect(JSON.stringify(messages)).not.toContain('gAAAA-opaque');
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
  });

  it('the conversation read back through either shape maps to the same fingerprints', () => {
    const { events } = sessionWithBoth();
    const recorded = events.filter((e) => e.type !== 'system/message').map((e) => shapeFingerprint(shapeMessageOf(e)));
    const viaResponses = messagesOfResponsesItems(responsesInputOf(events).input).map(shapeFingerprint);
    const viaMessages = messagesOfAnthropic(anthropicMessagesOf(events).messages).messages.map(shapeFingerprint);
    expect(viaResponses).toEqual(recorded);
    expect(viaMessages).toEqual(recorded);
  });
});
