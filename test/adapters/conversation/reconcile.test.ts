/**
 * Which of the caller's messages are new (src/adapters/conversation/reconcile.ts), rule by rule, on
 * fingerprints: the whole conversation, only the new part, the reply echoed first, a history
 * that starts like the recording but does not continue it.
 */
import { describe, expect, it } from 'vitest';
import { DropInError } from '../../../src/adapters/conversation/errors';
import { firstNewMessage } from '../../../src/adapters/conversation/reconcile';

const R = ['u1', 'a1', 't1', 'a2'];

describe('firstNewMessage', () => {
  it('nothing recorded: everything is new', () => {
    expect(firstNewMessage([], ['u1', 'a1'])).toBe(0);
  });

  it('the whole conversation, then new messages: the new ones start after the recording', () => {
    expect(firstNewMessage(R, [...R, 'u2'])).toBe(4);
    expect(firstNewMessage(R, R)).toBe(4);
  });

  it('only the new messages: all of them are new', () => {
    expect(firstNewMessage(R, ['t2', 't3'])).toBe(0);
  });

  it('the reply echoed, then the tool results: the echo is already recorded', () => {
    expect(firstNewMessage(R, ['a2', 't2'])).toBe(1);
    expect(firstNewMessage(R, ['t1', 'a2', 'u2'])).toBe(2);
  });

  it('a history that starts like the recording but leaves it: history-diverged, naming the message', () => {
    const edited = () => firstNewMessage(R, ['u1', 'a1', 'EDITED', 'a2', 'u2']);
    expect(edited).toThrow(DropInError);
    expect(edited).toThrow(/message 2 differs/);
    // A dropped message too.
    expect(() => firstNewMessage(R, ['u1', 'a2', 'u2'])).toThrow(/message 1 differs/);
  });
});
