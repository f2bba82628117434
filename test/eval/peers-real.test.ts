/**
 * The simulated peers as real as their sources (src/eval/peers.ts): each decides on the request
 * as its harness counts it (the last usage, plus a rough count of what came since), and none
 * sends a request over the window where its harness compacts first or recovers from the
 * provider's refusal; pi's cut keeps at most about its keepRecentTokens (its findCutPoint).
 */
import { describe, expect, it } from 'vitest';
import { claudeCode, codex, naive, opencode, pi } from '../../src/eval/peers';
import { Pricer } from '../../src/eval/pricing';
import { SimState, simulate, type PeerPolicy } from '../../src/eval/simulate';
import type { AppendInput } from '../../src/session/events';
import { Session } from '../../src/session/session';

/** One long turn of shell steps, one of them a large output early on, then more turns. */
function longTurns(turns: number, steps: number, big = 9_000): Session {
  const s = Session.inMemory('long-turn');
  const add = (type: AppendInput['type'], data: unknown, surface = false) =>
    s.append({ type, data, ...(surface ? { surfaceOp: 'append' } : {}) } as AppendInput);
  for (let t = 0; t < turns; t++) {
    add('turn/start', { turn: t });
    add('user/message', { content: [{ type: 'text', text: `Task ${t}: find why the build fails in package ${t}.` }] }, true);
    for (let k = 0; k < steps; k++) {
      add('step/start', { turn: t, step: k });
      add('request/header', { provider: 'p', model: 'm', tools: [] });
      add(
        'assistant/message',
        { content: [{ type: 'tool-call', id: `c${t}-${k}`, name: 'bash', arguments: JSON.stringify({ command: `npm test -w pkg${t} -- --shard ${k}` }) }] },
        true,
      );
      const words = k === 1 ? big : 300;
      add(
        'tool/result',
        { callId: `c${t}-${k}`, toolName: 'bash', content: [{ type: 'text', text: Array.from({ length: words }, (_, i) => `w${t}_${k}_${i}`).join(' ') }] },
        true,
      );
      add('step/end', { turn: t, step: k });
    }
    add('step/start', { turn: t, step: steps });
    add('request/header', { provider: 'p', model: 'm', tools: [] });
    add('assistant/message', { content: [{ type: 'text', text: `Package ${t} fixed.` }] }, true);
    add('step/end', { turn: t, step: steps });
    add('turn/end', { turn: t });
  }
  return s;
}

const WINDOW = 32_768;

async function overWindow(policy: PeerPolicy, session: Session): Promise<{ over: number; compactions: number }> {
  let over = 0;
  const pricer = new Pricer('o200k_base');
  const r = await simulate(session.events(), policy, pricer, { window: WINDOW, maxOutputTokens: 4_096, summaryCap: 4_096, userWordsTokens: 2_000 }, (_m, c) => {
    if (c.ledger.lastTokens > WINDOW) over++;
  });
  return { over, compactions: r.state.compactions };
}

describe('the simulated peers, as their sources', () => {
  it.each([codex, opencode, claudeCode, naive].map((p) => ({ name: p.name, p })))(
    '$name sends no request over the window where its harness compacts first or recovers',
    async ({ p }) => {
      const r = await overWindow(p, longTurns(6, 14));
      expect(r.compactions).toBeGreaterThan(0);
      expect(r.over).toBe(0);
    },
  );

  it("opencode's compaction summarizes the whole history and says to continue, as SessionCompaction.process does", async () => {
    const seen: string[][] = [];
    await simulate(longTurns(6, 14).events(), opencode, new Pricer('o200k_base'), { window: WINDOW, maxOutputTokens: 4_096, summaryCap: 4_096 }, (m, c) => {
      if (c.compactions > 0 && seen.length === 0) seen.push(m.map((x) => (typeof x.content === 'string' ? x.content : '')));
    });
    const first = seen[0]!;
    expect(first.some((t) => t.includes('Continue if you have next steps'))).toBe(true);
    // Nothing of the history before the compaction is sent but the summary.
    expect(first.filter((t) => /^w\d+_\d+_0 /.test(t))).toHaveLength(0);
  });

  it("pi's cut keeps at most about keepRecentTokens: the first valid cut point from where the newest entries reach it", () => {
    const s = new SimState(new Pricer('o200k_base'), { window: WINDOW, maxOutputTokens: 4_096, summaryCap: 4_096 });
    for (const e of longTurns(1, 14).events()) if (e.surfaceOp === 'append') s.entries.push(s.entry(e as never));
    const keptFrom = (cut: number) => s.entries.slice(cut).reduce((n, e) => n + e.tokens, 0);
    const newer = s.cutKeeping(5_000, 'newer');
    const older = s.cutKeeping(5_000);
    expect(s.entries[newer]!.event.type).not.toBe('tool/result');
    expect(keptFrom(newer)).toBeLessThanOrEqual(keptFrom(older));
    expect(keptFrom(older)).toBeGreaterThanOrEqual(5_000);
    expect(pi.counts).toBe('estimate');
  });

  it('a harness counts the request as its last usage plus a rough count of what came since; exactly once the history changed', async () => {
    const s = new SimState(new Pricer('o200k_base'), { window: WINDOW, maxOutputTokens: 4_096, summaryCap: 4_096 });
    const events = longTurns(1, 3)
      .events()
      .filter((e) => e.surfaceOp === 'append');
    for (const e of events.slice(0, 2)) s.entries.push(s.entry(e as never));
    s.report(10_000);
    expect(s.level('usage')).toBe(10_000);
    s.entries.push(s.entry(events[2]! as never));
    const text = JSON.stringify((events[2]!.data as { content: unknown }).content);
    expect(s.level('estimate')).toBeGreaterThan(10_000);
    expect(s.level('estimate')).toBeLessThanOrEqual(10_000 + Math.ceil(text.length / 4));
    expect(s.level('exact')).toBe(s.tokens());
    s.compactions++;
    // A compaction since the report: no usage describes the history; the rough count of all of it.
    expect(s.level('estimate')).toBeLessThan(10_000);
  });
});
