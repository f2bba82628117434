/**
 * Replays the real pi transcript (../shared/data/pi-large-session.jsonl: 88 turns, 453
 * assistant steps, ~140k tokens of history) through the engine as if an agent were living it
 * with a 32k-token window: each pi line is appended the way importPiTranscript maps it, and
 * afterStep runs after each assistant step's tool results, before its step/end. Every request
 * the agent would then send must fit the window and be valid for an OpenAI-compatible API.
 *
 * The transcript's own `usage` is left out on purpose: it counts the prompts of the original,
 * never-compacted run (up to ~180k tokens), so anchoring the replayed meter to it would measure
 * a conversation this replay no longer has.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createCompactionEngine, type AfterStepResult, type EngineNotification } from '../src/engine';
import type { ImageBlock, TextBlock } from '../src/session/events';
import { Session } from '../src/session/session';
import { SessionWriter } from '../src/session/writer';
import { ExtractiveSummarizer } from '../src/services/summarizers/extractive';
import { openAIMessageProblems } from './helpers/openai-validator';
import { findPiData } from './helpers/pi-data';

const WINDOW = 32_768;
const { path: piPath } = findPiData();

interface PiBlock {
  type: string;
  text?: string;
  thinking?: string;
  id?: string;
  name?: string;
  arguments?: unknown;
  data?: string;
  mimeType?: string;
}

function userBlocks(content: unknown): Array<TextBlock | ImageBlock> {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  const out: Array<TextBlock | ImageBlock> = [];
  for (const b of (content ?? []) as PiBlock[]) {
    if (b.type === 'text') out.push({ type: 'text', text: b.text ?? '' });
    else if (b.type === 'image' && b.data) out.push({ type: 'image', url: `data:${b.mimeType ?? 'image/png'};base64,${b.data}` });
  }
  return out.length > 0 ? out : [{ type: 'text', text: '' }];
}

describe(`pi transcript replay through the engine (${piPath})`, () => {
  it('keeps every request of a 453-step session under a 32k window with the extractive summarizer', async () => {
    const session = Session.inMemory('pi-replay');
    const w = new SessionWriter(session);
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
    const results: AfterStepResult[] = [];
    const requests: Array<{ line: number; tokens: number; problems: string[] }> = [];

    const closeStep = async () => {
      for (const callId of session.surface.pendingCalls()) {
        w.toolResult(callId, 'No result was recorded for this tool call (the run was aborted before it finished).', { isError: true });
      }
      if (session.openStep) {
        results.push(await engine.afterStep());
        w.endStep();
      }
    };

    let provider = 'unknown';
    let model = 'unknown';
    const lines = readFileSync(piPath!, 'utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      if (lines[i]!.trim() === '') continue;
      const entry = JSON.parse(lines[i]!) as { type?: string; provider?: string; modelId?: string; message?: Record<string, unknown> };
      if (entry.type === 'session' || entry.type === 'model_change') {
        provider = entry.provider ?? provider;
        model = entry.modelId ?? model;
        continue;
      }
      if (entry.type !== 'message' || !entry.message) continue;
      const m = entry.message;
      if (m.role === 'user') {
        await closeStep();
        if (session.openTurn !== null) w.endTurn();
        w.startTurn();
        w.user(userBlocks(m.content));
      } else if (m.role === 'assistant') {
        if (session.openTurn === null) w.startTurn();
        await closeStep();
        w.startStep();
        const route = { provider: typeof m.provider === 'string' ? m.provider : provider, model: typeof m.model === 'string' ? m.model : model };
        w.request({ ...route, tools: [] });
        // This is the request the agent sends for this step.
        requests.push({ line: i + 1, tokens: engine.measure().totalTokens, problems: openAIMessageProblems(session.deriveMessages()) });
        const blocks = (m.content ?? []) as PiBlock[];
        const text = blocks.filter((b) => b.type === 'text').map((b) => b.text ?? '').join('\n\n');
        w.assistant({
          ...(text ? { text } : {}),
          toolCalls: blocks.filter((b) => b.type === 'toolCall').map((b) => ({ id: String(b.id), name: String(b.name), arguments: JSON.stringify(b.arguments ?? {}) })),
          ...route,
        });
      } else if (m.role === 'toolResult') {
        w.toolResult(String(m.toolCallId), userBlocks(m.content), {
          ...(m.isError === true ? { isError: true } : {}),
          ...(typeof m.toolName === 'string' ? { toolName: m.toolName } : {}),
        });
      }
    }
    await closeStep();
    if (session.openTurn !== null) w.endTurn();
    engine.stop();

    // Same conversation as the importer produces (counts from test/import-pi.test.ts).
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
      expect(r.problems, `request before line ${r.line}`).toEqual([]);
      expect(r.tokens, `request before line ${r.line}`).toBeLessThanOrEqual(WINDOW);
    }
    // Nothing failed and no unit was too big to fix: every step ended below the threshold.
    expect(statuses.failed ?? 0).toBe(0);
    expect(statuses.stuck ?? 0).toBe(0);
    for (const r of results) if (r.after) expect(r.after.totalTokens).toBeLessThan(r.after.threshold);
    expect(openAIMessageProblems(session.deriveMessages())).toEqual([]);
  }, 120_000);
});
