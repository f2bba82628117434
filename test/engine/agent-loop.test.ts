/**
 * The example agent loop (examples/agent-loop.ts) against the local OpenAI-compatible server,
 * over real HTTP with the `openai` SDK: a scripted model answers 60 steps of tool calls
 * (read_file and run_command on a real sandbox directory) with a 16k window. Checks what a
 * user of the loop relies on: compaction happens mid-turn right after tool steps, a
 * provider's overflow 400 is recovered by compacting and the retried request carries the
 * checkpoint instead of the old history, every request the server received is one a provider
 * accepts, and every request fits the window.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAgent, type AgentRun } from '../../examples/agent-loop';
import { planTask, TASK_PROMPTS } from '../../src/cli/demo/plan';
import { generateProject, writeProject } from '../../src/cli/demo/project';
import { createScriptedCoder, isSummaryRequest, type ScriptedCoder } from '../../src/cli/demo/scripted-coder';
import { isCheckpoint, type SessionEvent } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { JsonlStore } from '../../src/session/stores/jsonl';
import { SessionWriter } from '../../src/session/writer';
import { startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../src/testing/openai-server';
import { openAIMessageProblems } from '../helpers/openai-validator';

const WINDOW = 16_384;
const OVERFLOW_AT = 9; // the 10th step's first request is rejected as too long

describe('the example agent loop against the local server', () => {
  let dir: string;
  let server: LocalOpenAIServer;
  let coder: ScriptedCoder;
  let session: Session;
  let run: AgentRun;
  const measured: Array<{ turn: number; step: number; attempt: number; tokens: number; threshold: number | undefined; contextWindow: number | undefined }> = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'xcompact-agent-'));
    const files = generateProject(3);
    await writeProject(join(dir, 'project'), files);
    const plan = planTask({ files, turns: [56, 6], seed: 3, toolset: 'sandbox' });
    coder = createScriptedCoder({ plan, contextWindow: WINDOW, overflowAt: OVERFLOW_AT });
    server = await startOpenAIServer({ scenarios: coder.handler, defaultModel: 'demo-coder' });
    session = await Session.open(new JsonlStore(join(dir, 'sessions')), 'agent');
    run = await runAgent({
      client: new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }),
      provider: 'local',
      model: 'demo-coder',
      contextWindow: WINDOW,
      maxOutputTokens: 1024,
      // The cost model off: it would compact early enough that the scripted overflow never comes.
      config: { headroomTokens: 2048, maxTokens: 1024, economics: false },
      session,
      sandbox: join(dir, 'project'),
      inputs: [TASK_PROMPTS[0]!, '/compact the retry logic', TASK_PROMPTS[2]!],
      onRequest: (info) => measured.push(info),
    });
    await session.close();
  });

  afterAll(async () => {
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const agentBodies = () =>
    server.requests.filter((r) => r.path === '/v1/chat/completions' && !isSummaryRequest(r.json as ChatRequestBody)).map((r) => r.json as ChatRequestBody);

  it('runs 50+ steps of real tool calls in two turns', () => {
    expect(run.turns).toBe(2);
    expect(run.steps).toBeGreaterThanOrEqual(60);
    expect(run.answers).toHaveLength(2);
    expect(run.answers[0]).toMatch(/nextDelay/);
    // The tools ran against the sandbox: a read result holds the file's real first line.
    const reads = session.events().filter((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result' && e.data.toolName === 'read_file');
    expect(reads.some((e) => e.data.content.some((b) => b.type === 'text' && b.text.startsWith('/* eslint-disable */')))).toBe(true);
  });

  it('compacts mid-turn, right after tool steps and before their step/end', () => {
    const log = session.events();
    let openTurn: number | null = null;
    let openStep = false;
    let lastMessage: SessionEvent | undefined;
    const midTurn: number[] = [];
    for (let i = 0; i < log.length; i++) {
      const e = log[i]!;
      if (e.type === 'turn/start') openTurn = e.data.turn;
      else if (e.type === 'turn/end') openTurn = null;
      else if (e.type === 'step/start') openStep = true;
      else if (e.type === 'step/end') openStep = false;
      else if (e.type === 'compaction/start' && e.data.trigger === 'pressure') {
        expect(e.data.turn).toBe(openTurn);
        expect(openStep).toBe(true);
        // After the step's facts: its tool results, or its reply when it called no tool (a
        // background summary may start at the prepare point on an answer too).
        const answer = lastMessage?.type === 'assistant/message' && !lastMessage.data.content.some((b) => b.type === 'tool-call');
        expect(lastMessage?.type === 'tool/result' || answer).toBe(true);
        const nextStepEvent = log.slice(i + 1).find((x) => x.type === 'step/end' || x.type === 'step/start');
        expect(nextStepEvent?.type).toBe('step/end');
        if (lastMessage?.type === 'tool/result') midTurn.push(e.seq);
      }
      if (e.surfaceOp !== undefined && !isCheckpoint(e)) lastMessage = e;
    }
    expect(midTurn.length).toBeGreaterThanOrEqual(2);
    expect(run.compactions.filter((c) => c.trigger === 'pressure').length).toBe(midTurn.length);
    // And /compact between the turns is a manual compaction outside any turn.
    expect(log.some((e) => e.type === 'compaction/start' && e.data.trigger === 'manual' && e.data.turn === null)).toBe(true);
  });

  it('recovers from a context overflow: the retried request carries the checkpoint, not the old history', () => {
    const rejected = coder.served.find((s) => s.kind === 'overflow');
    expect(rejected).toBeDefined();
    const retried = coder.served.find((s) => s.kind === 'agent' && s.action === rejected!.action);
    expect(retried!.index).toBeGreaterThan(rejected!.index);
    const rejectedBody = server.requests[rejected!.index]!.json as ChatRequestBody;
    const retriedBody = server.requests[retried!.index]!.json as ChatRequestBody;

    // The compaction the recovery committed, between the two requests.
    const log = session.events();
    const start = log.find((e) => e.type === 'compaction/start' && e.data.trigger === 'overflow');
    expect(start).toBeDefined();
    const summary = log.find((e): e is SessionEvent<'compaction/summary'> => e.type === 'compaction/summary' && e.seq > start!.seq)!;
    const summaryRequests = server.requests.slice(rejected!.index + 1, retried!.index).filter((r) => isSummaryRequest(r.json as ChatRequestBody));
    // One for the recovery, after any background summary it waited for (docs/spec.md#13-background-compaction: overflow while one runs waits for it).
    const background = log.filter((e) => e.type === 'compaction/start' && e.data.background === true && e.seq < start!.seq).length;
    expect(summaryRequests.length).toBeGreaterThanOrEqual(1);
    expect(summaryRequests.length).toBeLessThanOrEqual(1 + background);

    // The oldest call the rejected request carried is gone; the checkpoint stands in for it.
    const oldestCall = rejectedBody.messages!.find((m) => m.role === 'assistant' && Array.isArray(m.tool_calls)) as { tool_calls: Array<{ id: string }> };
    const oldestId = oldestCall.tool_calls[0]!.id;
    // The first call, unless a background compaction (on by default) already replaced the head.
    const compactedBefore = log.some((e) => e.type === 'compaction/summary' && e.seq < start!.seq);
    if (!compactedBefore) expect(oldestId).toBe(coder.callId(0, 0));
    expect(JSON.stringify(retriedBody.messages)).not.toContain(oldestId);
    const checkpoint = retriedBody.messages!.find((m) => m.role === 'user' && typeof m.content === 'string' && m.content.includes('<compacted-summary>'));
    expect(checkpoint).toBeDefined();
    expect(String(checkpoint!.content)).toContain(summary.data.summary);
    expect(retriedBody.messages!.length).toBeLessThan(rejectedBody.messages!.length);
    expect(run.overflowRetries).toBe(1);
  });

  it('sends only requests a provider accepts: every tool call answered before the next message, no orphan results', () => {
    const bodies = server.requests.map((r) => r.json as ChatRequestBody);
    expect(bodies.length).toBeGreaterThan(run.steps);
    for (const [i, body] of bodies.entries()) {
      expect(openAIMessageProblems(body.messages ?? []), `request ${i}`).toEqual([]);
    }
    // Tool calls that were compacted away never leave a result behind, and vice versa.
    expect(agentBodies().every((b) => b.tools?.length === 2)).toBe(true);
  });

  it('keeps every chat request under the window, by our meter and by the server count', () => {
    expect(measured.length).toBe(agentBodies().length);
    for (const m of measured) {
      expect(m.contextWindow).toBe(WINDOW);
      expect(m.tokens, `turn ${m.turn} step ${m.step} attempt ${m.attempt}`).toBeLessThan(WINDOW);
    }
    const peak = Math.max(...measured.map((m) => m.tokens));
    expect(peak).toBeGreaterThan(0.6 * WINDOW); // the window was actually under pressure
    for (const s of coder.served.filter((x) => x.kind === 'agent')) expect(s.promptTokens).toBeLessThan(WINDOW);
  });

  it('leaves a session that reopens to the same conversation', async () => {
    const reopened = await Session.open(new JsonlStore(join(dir, 'sessions')), 'agent');
    try {
      expect(reopened.length).toBe(session.length);
      expect(reopened.needsRecovery).toBe(false);
      expect(reopened.deriveMessages()).toEqual(session.deriveMessages());
    } finally {
      await reopened.close();
    }
  });
});

describe('the example agent loop, reopened over a session that no longer fits', () => {
  it('checks the first request of the run (engine.beforeRequest): compacted before it is sent, no overflow answered', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'xcompact-agent-reopen-'));
    const window = 8_192;
    const server = await startOpenAIServer({
      contextWindow: window,
      defaultModel: 'demo-coder',
      scenarios: (req) =>
        isSummaryRequest(req.body)
          ? { kind: 'reply', content: '## Goal\nRead the notes.\n## Progress\nThe notes were read.' }
          : { kind: 'reply', content: 'Done.' },
    });
    try {
      // A history written by another process (no engine ran on it): three long turns, over the window.
      const store = new JsonlStore(join(dir, 'sessions'));
      const before = await Session.open(store, 'agent');
      const w = new SessionWriter(before);
      w.system('You are a coding agent.');
      for (let t = 0; t < 3; t++) {
        w.startTurn();
        w.user(`Turn ${t}: ${'please read these notes carefully, '.repeat(250)}`);
        w.startStep();
        w.request({ provider: 'local', model: 'demo-coder', maxTokens: 1024 });
        w.assistant({ text: `Noted ${t}. ${'the notes say many things. '.repeat(150)}`, provider: 'local', model: 'demo-coder' });
        w.endStep();
        w.endTurn('completed');
      }
      await before.close();

      const session = await Session.open(store, 'agent');
      const sandbox = join(dir, 'project');
      await writeProject(sandbox, generateProject(1));
      const run = await runAgent({
        client: new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }),
        provider: 'local',
        model: 'demo-coder',
        contextWindow: window,
        maxOutputTokens: 1024,
        config: { maxTokens: 1024, economics: false },
        session,
        sandbox,
        inputs: ['and now?'],
      });
      await session.close();
      expect(run.answers).toEqual(['Done.']);
      // Without the check the first request went out whole and came back as the server's overflow 400.
      expect(run.overflowRetries).toBe(0);
      expect(run.compactions.length).toBeGreaterThanOrEqual(1);
      const first = server.requests.find((r) => r.path === '/v1/chat/completions' && !isSummaryRequest(r.json as ChatRequestBody))!;

      expect(JSON.stringify(first.json)).toContain('Read the notes.'); // it carried the checkpoint
    } finally {
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
