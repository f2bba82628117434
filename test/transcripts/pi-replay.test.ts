/**
 * Replays the real pi transcript (test/fixtures/pi-large-session.jsonl: 88 turns, 453
 * assistant steps, ~140k tokens of history) through the engine as if an agent were living it
 * with a 32k-token window (test/helpers/replay.ts: afterStep after each step's results, before
 * its step/end; recorded usage dropped). Every request the agent would then send must fit the
 * window and be valid for an OpenAI-compatible API.
 */
import { describe, expect, it } from 'vitest';
import { createCompactionEngine, type AfterStepResult, type EngineNotification } from '../../src/engine/facade';
import { importPiFile } from '../../src/transcripts/pi';
import { Session } from '../../src/session/session';
import { ExtractiveSummarizer } from '../../src/services/summarizing';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { findPiData } from '../helpers/pi-data';
import { replayThroughEngine } from '../helpers/replay';

const WINDOW = 32_768;
const { path: piPath } = findPiData();

describe(`pi transcript replay through the engine (${piPath})`, () => {
  it('keeps every request of a 453-step session under a 32k window with the extractive summarizer', async () => {
    const session = Session.inMemory('pi-replay');
    const engine = createCompactionEngine({
      session,
      summarizer: new ExtractiveSummarizer(),
      models: {
        'anthropic/claude-sonnet-4-5': { contextWindow: WINDOW, maxOutputTokens: 4096 },
        'openai/gpt-5.1-codex': { contextWindow: WINDOW, maxOutputTokens: 4096 },
      },
      // The default headroom (65,536) is larger than this window: scale it down.
      config: { headroomTokens: 4096, maxTokens: 4096 },
    });
    const notes: EngineNotification[] = [];
    engine.on((e) => notes.push(e));
    const requests: Array<{ seq: number; tokens: number; problems: string[] }> = [];

    // The transcript as the importer maps it (88 turns, 453 steps), lived again step by step.
    const source = Session.inMemory('pi-source');
    await importPiFile(source, piPath);
    const results = await replayThroughEngine(source, session, engine, {
      beforeReply: (e) => requests.push({ seq: e.seq, tokens: engine.measure().totalTokens, problems: openAIMessageProblems(session.deriveMessages()) }),
    });
    engine.stop();

    // Same conversation as the importer produces (counts from test/transcripts/pi.test.ts).
    const count = (t: string) => session.events().filter((e) => e.type === t).length;
    expect(count('assistant/message')).toBe(453);
    expect(count('turn/start')).toBe(88);
    expect(requests).toHaveLength(453);

    const committed = notes.filter((n): n is Extract<EngineNotification, { type: 'compaction.committed' }> => n.type === 'compaction.committed');
    const pruned = notes.filter((n): n is Extract<EngineNotification, { type: 'pruned' }> => n.type === 'pruned');
    const saved = committed.reduce((s, c) => s + (c.tokensBefore - c.tokensAfter), 0) + pruned.reduce((s, p) => s + p.tokensFreed, 0);
    const statuses: Record<string, number> = {};
    for (const r of results) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    const peak = Math.max(...requests.map((r) => r.tokens));
    console.log(
      `pi replay: ${requests.length} requests, ${committed.length} compactions, ${pruned.reduce((s, p) => s + p.count, 0)} pruned results, ` +
        `${saved} tokens saved; peak request ${peak} of ${WINDOW}; afterStep statuses ${JSON.stringify(statuses)}`,
    );

    expect(committed.length).toBeGreaterThan(0);
    expect(saved).toBeGreaterThan(100_000); // the history is ~140k tokens; the window holds 32k
    for (const r of requests) {
      expect(r.problems, `request for reply ${r.seq}`).toEqual([]);
      expect(r.tokens, `request for reply ${r.seq}`).toBeLessThanOrEqual(WINDOW);
    }
    // Nothing failed and no unit was too big to fix: every step ended below the threshold.
    expect(statuses.failed ?? 0).toBe(0);
    expect(statuses.stuck ?? 0).toBe(0);
    for (const r of results) if (r.after) expect(r.after.totalTokens).toBeLessThan(r.after.threshold);
    expect(openAIMessageProblems(session.deriveMessages())).toEqual([]);
  });
});
