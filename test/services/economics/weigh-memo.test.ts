/**
 * A weighing asked again with nothing appended is the same answer, without walking the tail or
 * tokenizing again (docs/measured.md: a step that finds nothing to do stays cheap); anything appended
 * weighs afresh.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/services/config';
import { TokenMeter } from '../../../src/services/metering';
import { routeBudget } from '../../../src/services/core';
import { getTokenizer, type Tokenizer } from '../../../src/services/metering';
import { weighPressure } from '../../../src/services/economics';
import { Session, SessionWriter } from '../../../src/session/index';

describe('weighPressure', () => {
  it('answers a repeated question from the last weighing, and weighs afresh after an append', () => {
    const session = Session.inMemory();
    const calls = { n: 0 };
    const t = getTokenizer('o200k_base');
    const counting: Tokenizer = { ...t, count: (text) => (calls.n++, t.count(text)) };
    const meter = new TokenMeter(session, { tokenizerFor: () => counting });
    // Forgetting priced at zero: below the threshold an early compaction is weighed (the default weighs nothing there).
    const config = parseConfig({ forgetting: 0, models: { 'acme/m': { contextWindow: 200_000, maxOutputTokens: 4_000 } } });
    const deps = { session, meter, config };
    const w = new SessionWriter(session);
    w.startTurn();
    w.request({ provider: 'acme', model: 'm', systemPrompt: 'You are terse.', tools: [], maxTokens: 1000 });
    w.user('List the files.');
    const step = (i: number) => {
      w.startStep();
      w.request({ provider: 'acme', model: 'm', systemPrompt: 'You are terse.', tools: [], maxTokens: 1000 });
      w.assistant({ toolCalls: [{ id: `c${i}`, name: 'ls', arguments: `{"dir":"src/m${i}"}` }] });
      w.toolResult(`c${i}`, `file${i}.ts\n`.repeat(200 + i), { toolName: 'ls' });
      w.endStep();
    };
    for (let i = 0; i < 30; i++) step(i);
    const ask = () => weighPressure(deps, { provider: 'acme', model: 'm', totalTokens: meter.measure().totalTokens, budget: routeBudget(deps) });
    const first = ask();
    expect(first.compaction).toBeDefined();
    const before = calls.n;
    const again = ask();
    expect(again).toBe(first);
    expect(calls.n).toBe(before);
    step(30);
    const after = ask();
    expect(after).not.toBe(first);
    expect(after.pace.requests).toBe(first.pace.requests + 1);
  });
});
