/**
 * The user's words have a budget of their own in every checkpoint (config `userWordsTokens`,
 * docs/memory.md): through the public engine, a chat of many turns compacted again and again
 * keeps every message the user wrote verbatim, where sharing the summary's cap lost most of them.
 * Intent recall as the eval measures it (src/eval/memory.ts): each user message's first 160
 * characters, or its first line of ≥ 20, present verbatim in what the agent sends.
 */
import { describe, expect, it } from 'vitest';
import { createCompactionEngine, Session, SessionWriter } from '../../../src/index';
import { userMessageKey } from '../../../src/services/summarizing';

const MODEL = { provider: 'p', model: 'm' };
const SYSTEM = 'You are a careful coding agent.';

/** One user turn: the request, a tool call whose output is bulky, the agent's short answer. */
async function chat(turns: number, userWordsTokens?: number) {
  const session = Session.inMemory();
  const engine = createCompactionEngine({
    session,
    models: { 'p/m': { contextWindow: 8_192, maxOutputTokens: 512 } },
    config: { economics: false, background: false, ...(userWordsTokens !== undefined ? { userWordsTokens } : {}) },
  });
  const w = new SessionWriter(session);
  w.system(SYSTEM);
  const asked: string[] = [];
  let compactions = 0;
  for (let i = 0; i < turns; i++) {
    const text = `Request ${i}: rename the ${['parser', 'lexer', 'store', 'cache'][i % 4]} helper ${i} to ${['parse', 'lex', 'keep', 'hold'][i % 4]}${i} and keep the tests green`;
    asked.push(text);
    w.startTurn();
    w.user(text);
    w.startStep();
    w.request({ ...MODEL, systemPrompt: SYSTEM, tools: [] });
    const id = `call-${i}`;
    w.assistant({ toolCalls: [{ id, name: 'read', arguments: JSON.stringify({ path: `src/helper-${i}.ts` }) }] });
    w.toolResult(id, Array.from({ length: 40 }, (_, k) => `export const value${i}_${k} = ${i * 100 + k};`).join('\n'), { toolName: 'read' });
    if ((await engine.afterStep()).status === 'compacted') compactions++;
    w.endStep();
    w.startStep();
    w.request({ ...MODEL, systemPrompt: SYSTEM, tools: [] });
    w.assistant({ text: `Renamed helper ${i}.` });
    if ((await engine.afterStep()).status === 'compacted') compactions++;
    w.endStep();
    w.endTurn('completed');
  }
  const sent = session
    .deriveMessages()
    .map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)))
    .join('\n');
  const kept = asked.filter((t) => sent.includes(userMessageKey(t))).length;
  const measured = engine.measure();
  engine.stop();
  return { kept, asked: asked.length, compactions, measured };
}

describe("the user's words in checkpoints (userWordsTokens)", () => {
  it('a chat of 60 turns compacted again and again keeps every user message verbatim within its budget, and stays under the threshold', async () => {
    // 2,150 tokens: what an 8k window gave them by default before checkpoints were sized to the window (docs/reliability.md).
    const r = await chat(60, 2_150);
    expect(r.compactions).toBeGreaterThanOrEqual(3);
    expect(r.kept).toBe(r.asked);
    expect(r.measured.totalTokens).toBeLessThan(r.measured.threshold!);
  });

  it('by default, sized to the window (a third of threshold − retain, less the cap), an 8k window keeps the newest ones', async () => {
    const r = await chat(60);
    expect(r.compactions).toBeGreaterThanOrEqual(3);
    // Fewer than all in 8k, but more than sharing the cap keeps (the next test), and under the threshold.
    expect(r.kept).toBeGreaterThanOrEqual(r.asked * 0.4);
    expect(r.measured.totalTokens).toBeLessThan(r.measured.threshold!);
  });

  it('sharing the summary cap (userWordsTokens: 0) loses most of them: the budget is what keeps them', async () => {
    const r = await chat(60, 0);
    expect(r.compactions).toBeGreaterThanOrEqual(3);
    expect(r.kept).toBeLessThan(r.asked * 0.8);
  });
});
