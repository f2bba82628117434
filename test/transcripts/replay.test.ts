/**
 * The real Claude Code session and Codex rollout, imported and lived again through the engine
 * (the replay of test/transcripts/pi-replay.test.ts) at a 32k and a 128k window: the engine makes its own
 * compaction decisions on the conversation (the harness's own compactions are taken out:
 * withoutCompactions), and every request the agent would then send must fit the window and
 * pair every tool call with its result.
 */
import { describe, expect, it } from 'vitest';
import { createCompactionEngine, type EngineNotification } from '../../src/engine/facade';
import { withoutCompactions } from '../../src/eval/lived';
import { ExtractiveSummarizer } from '../../src/index';
import { importClaudeCodeFile } from '../../src/transcripts/claude-code';
import { importCodexFile } from '../../src/transcripts/codex';
import { Session } from '../../src/session/session';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { replayThroughEngine } from '../helpers/replay';
import { CLAUDE_REAL, CODEX_REAL, eventsOf } from '../helpers/transcripts';

const CASES = [
  { name: 'Claude Code session', path: CLAUDE_REAL, load: importClaudeCodeFile },
  { name: 'Codex rollout', path: CODEX_REAL, load: importCodexFile },
] as const;

describe.each(CASES)('$name replayed through the engine', ({ path, load }) => {
  it.each([32_768, 131_072])(
    'keeps every request within a %i-token window, every call with its result',
    async (window) => {
      const imported = Session.inMemory('imported');
      await load(imported, path);
      const source = withoutCompactions(imported);
      expect(eventsOf(source, 'compaction/summary')).toHaveLength(0);
      const models: Record<string, { contextWindow: number; maxOutputTokens: number }> = {};
      for (const h of eventsOf(source, 'request/header')) models[`${h.data.provider}/${h.data.model}`] = { contextWindow: window, maxOutputTokens: 4096 };
      const session = Session.inMemory('replay');
      const engine = createCompactionEngine({ session, summarizer: new ExtractiveSummarizer(), models, config: { headroomTokens: 4096, maxTokens: 4096 } });
      const notes: EngineNotification[] = [];
      engine.on((n) => notes.push(n));
      const requests: Array<{ seq: number; tokens: number; problems: string[] }> = [];
      const results = await replayThroughEngine(source, session, engine, {
        beforeReply: (e) => requests.push({ seq: e.seq, tokens: engine.measure().totalTokens, problems: openAIMessageProblems(session.deriveMessages()) }),
      });
      engine.stop();
      const replies = eventsOf(source, 'assistant/message').length;
      expect(requests).toHaveLength(replies);
      const compactions = notes.filter((n) => n.type === 'compaction.committed').length;
      const peak = Math.max(...requests.map((r) => r.tokens));
      console.log(`${path.split('/').pop()} at ${window}: ${requests.length} requests, ${compactions} compactions, peak ${peak} of ${window}`);
      for (const r of requests) {
        expect(r.problems, `request for reply ${r.seq}`).toEqual([]);
        expect(r.tokens, `request for reply ${r.seq}`).toBeLessThanOrEqual(window);
      }
      expect(results.filter((r) => r.status === 'failed' || r.status === 'stuck')).toEqual([]);
      expect(openAIMessageProblems(session.deriveMessages())).toEqual([]);
    },
    180_000,
  );
});
