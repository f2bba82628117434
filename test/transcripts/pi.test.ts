/**
 * Imports the real pi transcript in ../shared/data into a Session and checks what a user
 * would: the counts, that every derived request pairs calls and results, and that usage is
 * normalised (pi counts cache reads and writes apart from input; ours includes them).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonlStore, Session, type SessionEvent } from '../../src/session/index';
import { PiImportError, importPiFile, importPiTranscript } from '../../src/transcripts/index';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { findPiData } from '../helpers/pi-data';
import { referenceCuts } from '../helpers/reference';
import { durableSnapshot, removeTempDirs, tempDir } from '../helpers/session';

afterAll(removeTempDirs);

const { path: piPath } = findPiData();
const suiteName = `pi transcript import (${piPath})`;

/** What the file says, read independently of the importer. */
function piFacts(path: string) {
  const lines = readFileSync(path, 'utf8').split('\n');
  const callIds: string[] = [];
  const resultIds = new Set<string>();
  const entries = lines.map((l, i) => ({ line: i + 1, entry: l.trim() === '' ? undefined : (JSON.parse(l) as Record<string, any>) }));
  for (const { entry } of entries) {
    const m = entry?.type === 'message' ? entry.message : undefined;
    if (m?.role === 'assistant') for (const b of m.content ?? []) if (b.type === 'toolCall') callIds.push(b.id);
    if (m?.role === 'toolResult') resultIds.add(m.toolCallId);
  }
  return { entries, callIds, unanswered: callIds.filter((id) => !resultIds.has(id)) };
}

describe(suiteName, () => {
  const path = piPath;
  const session = Session.inMemory('pi');
  let report: Awaited<ReturnType<typeof importPiFile>>;
  const facts = piPath ? piFacts(path) : undefined;
  beforeAll(async () => {
    report = await importPiFile(session, path);
  });

  it('imports every message with the counts the transcript has', () => {
    expect(report).toMatchObject({
      lines: 1019,
      turns: 88,
      userMessages: 88,
      assistantMessages: 453,
      toolCalls: 391,
      toolResults: 373,
      synthesizedResults: 18,
    });
    const byType = (t: SessionEvent['type']) => session.events().filter((e) => e.type === t);
    expect(byType('user/message')).toHaveLength(88);
    expect(byType('assistant/message')).toHaveLength(453);
    expect(byType('tool/result')).toHaveLength(391);
    expect(byType('turn/start')).toHaveLength(88);
    expect(byType('step/start')).toHaveLength(453);
    expect(byType('request/header')).toHaveLength(453);
    const calls = byType('assistant/message').flatMap((e) => (e as SessionEvent<'assistant/message'>).data.content.filter((b) => b.type === 'tool-call'));
    expect(calls).toHaveLength(391);
    expect(session.needsRecovery).toBe(false);
    expect(session.openTurn).toBeNull();
  });

  it('answers exactly the calls pi left without a result, with an error result saying so', () => {
    expect(facts!.unanswered).toHaveLength(18);
    const synthesized = session
      .events()
      .filter((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result' && JSON.stringify(e.data.content).includes('No result was recorded'));
    expect(synthesized.map((e) => e.data.callId).sort()).toEqual([...facts!.unanswered].sort());
    for (const e of synthesized) expect(e.data.isError).toBe(true);
  });

  it('derives messages a provider accepts: every call answered, no result without its call', () => {
    const messages = session.deriveMessages();
    expect(messages).toHaveLength(session.surface.length);
    expect(openAIMessageProblems(messages)).toEqual([]);
    const toolCalls = messages.flatMap((m) => (m.role === 'assistant' && m.tool_calls ? m.tool_calls : []));
    expect(toolCalls.map((c) => c.id)).toEqual(facts!.callIds);
    expect(messages.filter((m) => m.role === 'tool')).toHaveLength(391);
    expect(session.balancedCuts()).toEqual(referenceCuts(session.surface.slice(0), (q) => session.event(q)));
  });

  it('normalises usage: prompt = input + cache read + cache write', () => {
    // line 10: an assistant message with four parallel calls and all four usage figures
    const line = facts!.entries[9]!.entry!;
    expect(line.message.role).toBe('assistant');
    const u = line.message.usage as { input: number; output: number; cacheRead: number; cacheWrite: number };
    expect(u).toMatchObject({ input: 7, output: 231, cacheRead: 1684, cacheWrite: 9518 });
    const firstCall = (line.message.content as Array<{ type: string; id: string }>).find((b) => b.type === 'toolCall')!.id;
    const event = session
      .events()
      .find(
        (e): e is SessionEvent<'assistant/message'> =>
          e.type === 'assistant/message' && e.data.content.some((b) => b.type === 'tool-call' && b.id === firstCall),
      )!;
    expect(event.data.usage).toEqual({ promptTokens: 7 + 1684 + 9518, completionTokens: 231, cachedTokens: 1684, cacheWriteTokens: 9518 });
    expect(event.data.provider).toBe(line.message.provider);
    expect(event.data.model).toBe(line.message.model);
    expect(event.data.finishReason).toBe('toolUse');
    // the header of the same step names the same model
    const headerBefore = session
      .events()
      .slice(0, event.seq)
      .reverse()
      .find((e) => e.type === 'request/header') as SessionEvent<'request/header'>;
    expect(headerBefore.data).toMatchObject({ provider: line.message.provider, model: line.message.model });
  });

  it('imports into a JsonlStore and reopens to the same session', async () => {
    const store = new JsonlStore(tempDir(), { sync: false });
    const s = await Session.open(store, 'pi');
    await importPiFile(s, path, { systemPrompt: 'You are pi.', tools: [{ type: 'function', function: { name: 'read' } }] });
    expect(s.deriveMessages()[0]).toEqual({ role: 'system', content: 'You are pi.' });
    expect(s.latestHeader?.data.tools).toEqual([{ type: 'function', function: { name: 'read' } }]);
    const before = durableSnapshot(s);
    await s.close();
    const r = await Session.open(store, 'pi');
    expect(durableSnapshot(r)).toEqual(before);
    await r.close();
  });
});

describe('pi import errors', () => {
  it('a line that is not JSON names its line (a torn last line is skipped instead)', () => {
    const prompt = JSON.stringify({ type: 'message', message: { role: 'user', content: 'hi' } });
    const s = Session.inMemory();
    expect(() => importPiTranscript(s, `{"type":"session"}\nnot json\n${prompt}\n`)).toThrow(PiImportError);
    expect(() => importPiTranscript(Session.inMemory(), `{"type":"session"}\nnot json\n${prompt}\n`)).toThrow(/line 2/);
    const torn = importPiTranscript(Session.inMemory(), `{"type":"session"}\n${prompt}\n${prompt.slice(0, 20)}`);
    expect(torn.tornLines).toBe(1);
    expect(torn.userMessages).toBe(1);
  });

  it('a result for a call that was never made names its line and the rule', () => {
    const jsonl = [
      JSON.stringify({ type: 'message', message: { role: 'user', content: 'hi' } }),
      JSON.stringify({ type: 'message', message: { role: 'toolResult', toolCallId: 'ghost', content: [{ type: 'text', text: 'x' }] } }),
    ].join('\n');
    expect(() => importPiTranscript(Session.inMemory(), jsonl)).toThrow(/line 2: .*orphan-tool-result/);
  });

  it('a small transcript: turns, steps, a parallel batch, an aborted call, ignored lines', () => {
    const s = Session.inMemory();
    const msg = (m: object) => JSON.stringify({ type: 'message', message: m });
    const r = importPiTranscript(
      s,
      [
        JSON.stringify({ type: 'session', provider: 'anthropic', modelId: 'claude' }),
        msg({ role: 'user', content: [{ type: 'text', text: 'go' }] }),
        msg({
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'hm' },
            { type: 'toolCall', id: 't1', name: 'read', arguments: { p: 1 } },
            { type: 'toolCall', id: 't2', name: 'ls', arguments: {} },
          ],
          usage: { input: 1, output: 2 },
        }),
        msg({ role: 'toolResult', toolCallId: 't2', toolName: 'ls', content: [{ type: 'text', text: 'a' }], isError: false }),
        JSON.stringify({ type: 'thinking_level_change', level: 'high' }),
        msg({ role: 'user', content: 'again' }),
        msg({ role: 'assistant', content: [{ type: 'text', text: 'ok' }] }),
      ].join('\n'),
    );
    expect(r).toEqual({
      format: 'linear',
      mergedLines: 0,
      tornLines: 0,
      warnings: [],
      partialCompactions: 0,
      lines: 7,
      turns: 2,
      userMessages: 2,
      assistantMessages: 2,
      toolCalls: 2,
      toolResults: 1,
      synthesizedResults: 1,
      compactions: 0,
      rendered: {},
      // A known pi entry that pi never sends to the model.
      notSent: { thinking_level_change: 1 },
      ignored: {},
    });
    expect(s.deriveMessages()).toEqual([
      { role: 'user', content: 'go' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 't1', type: 'function', function: { name: 'read', arguments: '{"p":1}' } },
          { id: 't2', type: 'function', function: { name: 'ls', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 't2', content: 'a' },
      { role: 'tool', tool_call_id: 't1', content: 'No result was recorded for this tool call (the run was aborted before it finished).' },
      { role: 'user', content: 'again' },
      { role: 'assistant', content: 'ok' },
    ]);
    const a = s.events().find((e) => e.type === 'assistant/message') as SessionEvent<'assistant/message'>;
    expect(a.data).toMatchObject({
      provider: 'anthropic',
      model: 'claude',
      usage: { promptTokens: 1, completionTokens: 2, cachedTokens: 0, cacheWriteTokens: 0 },
    });
  });
});

describe('pi import is all or nothing', () => {
  it('a bad line halfway through leaves the target session and its file untouched', async () => {
    const dir = tempDir();
    const store = new JsonlStore(dir);
    const session = await Session.open(store, 'partial');
    const good = '{"type":"message","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}';
    const orphan = '{"type":"message","message":{"role":"toolResult","toolCallId":"nope","content":[]}}';
    expect(() => importPiTranscript(session, `${good}\n${orphan}\n`)).toThrow(PiImportError);
    expect(session.length).toBe(0);
    await session.close();
    const reopened = await Session.open(store, 'partial');
    expect(reopened.length).toBe(0);
    await reopened.close();
  });

  it('refuses a session that already has events', () => {
    const s = Session.inMemory();
    s.append({ type: 'session/end-seed', data: {} });
    expect(() => importPiTranscript(s, '')).toThrow(/empty session/);
  });
});
