/** The one tool-call pairing walk every face refuses bad input with (src/adapters/conversation/pairing.ts). */
import { describe, expect, it } from 'vitest';
import { callsHave, pairingProblem, type PairingStep } from '../../../src/adapters/conversation/pairing';

const user: PairingStep = { role: 'user', results: [], calls: [] };
const asks = (...calls: string[]): PairingStep => ({ role: 'assistant', results: [], calls });
const answers = (...results: string[]): PairingStep => ({ role: 'tool', results, calls: [] });

describe('pairingProblem', () => {
  it('passes calls each answered before the next message, in one tool message or several', () => {
    expect(pairingProblem([], [user, asks('a', 'b'), answers('a'), answers('b'), asks(), user])).toBeUndefined();
    expect(pairingProblem([], [asks('a', 'b'), answers('b', 'a'), user])).toBeUndefined();
    expect(pairingProblem(['p'], [answers('p'), user])).toBeUndefined(); // a call the session already waits on
    expect(pairingProblem([], [])).toBeUndefined();
  });

  it('names a result for a call that is not waiting: never made, or answered twice', () => {
    expect(pairingProblem([], [answers('x')])).toEqual({ kind: 'unexpected-result', callId: 'x' });
    expect(pairingProblem([], [asks('a'), answers('a'), answers('a')])).toEqual({ kind: 'unexpected-result', callId: 'a' });
    expect(pairingProblem([], [asks('a'), answers('a', 'z')])).toEqual({ kind: 'unexpected-result', callId: 'z' });
  });

  it('names the calls still waiting when another message comes, and the role of that message', () => {
    expect(pairingProblem([], [asks('a', 'b'), answers('a'), user])).toEqual({ kind: 'missing-results', callIds: ['b'], before: 'user' });
    expect(pairingProblem(['p'], [asks('a')])).toEqual({ kind: 'missing-results', callIds: ['p'], before: 'assistant' });
  });

  it('names the calls still waiting at the end of the input', () => {
    expect(pairingProblem([], [user, asks('a', 'b')])).toEqual({ kind: 'missing-results', callIds: ['a', 'b'] });
    expect(pairingProblem(['p'], [])).toEqual({ kind: 'missing-results', callIds: ['p'] });
  });

  it('words one call and several', () => {
    expect(callsHave(['a'])).toBe('tool call "a" has');
    expect(callsHave(['a', 'b'])).toBe('tool calls "a", "b" have');
  });
});
