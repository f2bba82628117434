/**
 * examples/xstate-agent.ts: an agent loop written as an XState machine that invokes the
 * compaction machine, against the local OpenAI-compatible server on 127.0.0.1 over the
 * `openai` SDK. The model keeps calling a tool whose results fill a small window; the loop
 * gets its answers and notifications from the compaction machine as events only.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runXStateAgent, type XStateAgentRun } from '../../examples/xstate-agent';
import { isCheckpoint } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { MemoryStore } from '../../src/session/stores/memory';
import { COMPACTION_INSTRUCTION } from '../../src/services/summarizing';
import { OVERFLOW_BODIES, startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../src/testing/openai-server';
import { openAIMessageProblems } from '../helpers/openai-validator';

const STEPS = 14;
const OVERFLOW_AT = 9; // the model's 10th request is rejected once as too long

const isSummaryRequest = (body: ChatRequestBody) => {
  const last = body.messages?.at(-1);
  return last?.role === 'user' && typeof last.content === 'string' && last.content.startsWith(COMPACTION_INSTRUCTION.slice(0, 60));
};

describe('examples/xstate-agent.ts against the local server', () => {
  let server: LocalOpenAIServer;
  let session: Session;
  let run: XStateAgentRun;
  const agentRequests: ChatRequestBody[] = [];

  beforeAll(async () => {
    let calls = 0;
    let overflowed = false;
    server = await startOpenAIServer({
      defaultModel: 'tiny',
      scenarios: (req) => {
        if (isSummaryRequest(req.body)) return { kind: 'reply', content: '## Goal\nRead the build notes.\n## Progress\nRead the notes of several topics.' };
        agentRequests.push(req.body);
        if (calls === OVERFLOW_AT && !overflowed) {
          overflowed = true;
          return { kind: 'status', ...OVERFLOW_BODIES.openai };
        }
        calls++;
        if (calls >= STEPS) return { kind: 'reply', content: 'Done: the build order is 0 → 39.' };
        return { kind: 'reply', toolCalls: [{ id: `call_${calls}`, name: 'read_notes', arguments: JSON.stringify({ topic: `topic${calls}` }) }] };
      },
    });
    session = await Session.open(new MemoryStore(), 'xstate-agent');
    run = await runXStateAgent({
      client: new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }),
      session,
      provider: 'local',
      model: 'tiny',
      contextWindow: 6000,
      maxTokens: 300,
      config: { headroomTokens: 300, maxTokens: 300 },
      task: 'Find the build order in the notes.',
      maxSteps: STEPS + 5,
    });
  });

  afterAll(async () => {
    await session?.close();
    await server?.close();
  });

  it('runs to the answer, every step reported to the compaction machine', () => {
    expect(run.answer).toBe('Done: the build order is 0 → 39.');
    expect(run.steps).toBe(STEPS);
    expect(session.openTurn).toBeNull();
  });

  it('compacted under pressure, and recovered the overflow by compacting and retrying', () => {
    expect(run.compactions.length).toBeGreaterThan(0);
    expect(run.compactions.some((c) => c.trigger === 'pressure')).toBe(true);
    expect(run.overflowRetries).toBe(1);
    expect(session.events().filter((e) => e.type === 'compaction/start').length).toBe(session.events().filter((e) => e.type === 'compaction/end').length);
    expect(session.surface.length).toBeGreaterThan(0);
    expect([...session.events()].some((e) => isCheckpoint(e))).toBe(true);
    expect(session.lock.held).toBe(false);
  });

  it('every request the model got was valid: tool calls paired with their results', () => {
    expect(agentRequests.length).toBe(STEPS + 1);
    for (const body of agentRequests) expect(openAIMessageProblems(body.messages ?? [])).toEqual([]);
  });
});
