/**
 * Recall end to end, over real HTTP with the `openai` SDK against the local server, through the
 * example agent loop (examples/agent-loop.ts) on a real sandbox and a JSONL store: the scripted
 * model reads eight files, the session compacts on the way, the checkpoint only names the
 * files, the model calls recall for the first file by path and gets its original text back.
 * Then the same session reopened, and after a crash plus recover().
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAgent, type AgentRun } from '../../../examples/agent-loop';
import { recallTool } from '../../../src/services/recall/index';
import { isCheckpoint, type SessionEvent } from '../../../src/session/events';
import { Session } from '../../../src/session/session';
import { SessionWriter } from '../../../src/session/writer';
import { JsonlStore } from '../../../src/session/stores/jsonl';
import { startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer } from '../../../src/testing/openai-server';
import { openAIMessageProblems } from '../../helpers/openai-validator';
import { FILES, NEEDLE, fileBody, isSummaryRequest, recallScript, type RecallScript } from '../../helpers/recall-script';

const WINDOW = 8_192;

function textOf(e: SessionEvent): string {
  return 'content' in e.data ? (e.data.content as Array<{ type: string; text?: string }>).map((b) => b.text ?? '').join('\n') : '';
}

describe('recall through the example agent loop, against the local server', () => {
  let dir: string;
  let server: LocalOpenAIServer;
  let script: RecallScript;
  let run: AgentRun;
  let log: readonly SessionEvent[];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'xcompact-recall-'));
    for (const f of FILES) {
      mkdirSync(dirname(join(dir, 'project', f)), { recursive: true });
      writeFileSync(join(dir, 'project', f), fileBody(f));
    }
    script = recallScript();
    server = await startOpenAIServer({ scenarios: script.handler, defaultModel: 'scripted' });
    const session = await Session.open(new JsonlStore(join(dir, 'sessions')), 'agent');
    run = await runAgent({
      client: new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }),
      provider: 'local',
      model: 'scripted',
      contextWindow: WINDOW,
      maxOutputTokens: 512,
      // Results stay whole until the compaction: the checkpoint, not a prune, is what recall brings back here.
      config: { headroomTokens: 1024, maxTokens: 512, economics: false, background: false, recall: true, prune: { thresholdChars: 8192 } },
      session,
      sandbox: join(dir, 'project'),
      inputs: ['Read every module, then tell me the retry limit.'],
    });
    log = [...session.events()];
    await session.close();
  });

  afterAll(async () => {
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('compacts, the checkpoint names the file and its handle but not its text, and recall brings the text back', () => {
    expect(run.compactions.length).toBeGreaterThanOrEqual(1);
    const checkpoint = log.filter(isCheckpoint).at(-1)!;
    const framed = textOf(checkpoint);
    expect(framed).toContain(FILES[0]);
    expect(framed).not.toContain(NEEDLE);
    expect(framed).toMatch(/recall \{"handle":"cp-\d+"\}/);
    // The model asked by path and read the original tool result, the line it needed included.
    expect(script.recalled).toHaveLength(1);
    expect(script.recalled[0]).toContain(fileBody(FILES[0]!));
    expect(run.answers).toEqual([`Found it: ${NEEDLE}`]);
    // The recall result is an ordinary tool result in the log, answering the model's call.
    const result = log.find((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result' && e.data.toolName === 'recall')!;
    expect(textOf(result)).toBe(script.recalled[0]);
    expect(result.data.isError).toBeUndefined();
  });

  it('every request was one a provider accepts, with the recall tool declared', () => {
    const bodies = server.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.json as ChatRequestBody);
    for (const [i, body] of bodies.entries()) expect(openAIMessageProblems(body.messages ?? []), `request ${i}`).toEqual([]);
    const agent = bodies.filter((b) => !isSummaryRequest(b));
    expect(agent.every((b) => (b.tools ?? []).some((t) => (t as { function: { name: string } }).function.name === 'recall'))).toBe(true);
  });

  it('after a reopen, the index is rebuilt from the stored log and answers the same', async () => {
    const session = await Session.open(new JsonlStore(join(dir, 'sessions')), 'agent');
    try {
      const out = recallTool(session).run({ path: FILES[0] });
      expect(out.text).toBe(script.recalled[0]);
      const q = recallTool(session).run({ query: NEEDLE });
      expect(q.matches).toBeGreaterThanOrEqual(1);
      expect(q.text).toContain(NEEDLE);
    } finally {
      await session.close();
    }
  });

  it('after a crash mid-turn and recover(), recall answers and the log continues', async () => {
    const live = await Session.open(new JsonlStore(join(dir, 'sessions')), 'agent');
    const w = new SessionWriter(live);
    w.startTurn();
    w.request({ provider: 'local', model: 'scripted', tools: [] });
    w.user('What was the retry limit again?');
    w.startStep();
    w.request({ provider: 'local', model: 'scripted', tools: [] });
    w.assistant({ toolCalls: [{ id: 'call_lost', name: 'recall', arguments: JSON.stringify({ query: 'RETRY_LIMIT' }) }] });
    await live.flush();
    // The process dies here: its log bytes are on disk, its lock and open turn are left behind.
    cpSync(join(dir, 'sessions'), join(dir, 'crashed'), { recursive: true });
    await live.close();
    const reopened = await Session.open(new JsonlStore(join(dir, 'crashed')), 'agent');
    try {
      expect(reopened.needsRecovery).toBe(true);
      const before = reopened.length;
      const report = reopened.recover();
      expect(report.closedCalls).toEqual(['call_lost']);
      expect(reopened.length).toBeGreaterThan(before);
      const out = recallTool(reopened).run({ query: 'RETRY_LIMIT' });
      expect(out.isError).toBe(false);
      expect(out.text).toContain(NEEDLE);
    } finally {
      await reopened.close();
    }
  });
});

describe('recall and the prompt cache', () => {
  it('the summary request is byte for byte the same with recall on and off; only the checkpoint gains its line', async () => {
    const { createCompactionEngine } = await import('../../../src/engine/facade');
    const server = await startOpenAIServer({ defaultModel: 'm' });
    try {
      const client = new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 });
      const bodies: string[] = [];
      const checkpoints: string[] = [];
      for (const recall of [false, true]) {
        const session = Session.inMemory();
        const w = new SessionWriter(session);
        w.system('You are a coding agent.');
        w.startTurn();
        w.request({ provider: 'deepseek', model: 'deepseek-chat', tools: [] });
        w.user('Read the files.');
        for (const [i, f] of FILES.slice(0, 3).entries()) {
          w.startStep();
          w.request({ provider: 'deepseek', model: 'deepseek-chat', tools: [] });
          w.assistant({ toolCalls: [{ id: `c${i}`, name: 'read_file', arguments: JSON.stringify({ path: f }) }] });
          w.toolResult(`c${i}`, fileBody(f), { toolName: 'read_file' });
          w.endStep();
        }
        w.endTurn();
        const engine = createCompactionEngine({
          session,
          client,
          models: { 'deepseek/deepseek-chat': { contextWindow: 50_000, maxOutputTokens: 2000 } },
          config: { recall },
        });
        const before = server.requests.length;
        server.enqueue({ kind: 'reply', content: '## Files and Code\n- three modules read' });
        expect(await engine.compactNow()).not.toBeNull();
        engine.stop();
        bodies.push(server.requests[before]!.raw);
        checkpoints.push(textOf(session.events().find(isCheckpoint)!));
      }
      expect(bodies[0]!.length).toBeGreaterThan(1000);
      expect(bodies[1]).toBe(bodies[0]);
      expect(checkpoints[0]).not.toContain('recall');
      expect(checkpoints[1]!.startsWith(checkpoints[0]!)).toBe(true);
      expect(checkpoints[1]!.slice(checkpoints[0]!.length)).toMatch(
        /^\n\nNothing in this span is lost: the recall tool brings back its original messages \(recall \{"handle":"cp-\d+"\}/,
      );
    } finally {
      await server.close();
    }
  });
});
