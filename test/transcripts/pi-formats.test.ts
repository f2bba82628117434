/**
 * pi's own compactions, its user-text message kinds and its tree format (docs/spec.md#11-real-transcripts-in-faithfully), on small
 * fixtures built for this (test/fixtures/pi-linear-compaction.jsonl, pi-tree-compaction.jsonl).
 * The expected requests are written out here from pi's rules (session-manager.ts
 * buildSessionContext, messages.ts convertToLlm), not derived from the importer.
 */
import { readFileSync, statSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { JsonlStore, Session, type SessionEvent } from '../../src/session/index';
import { PiImportError, importPiTranscript } from '../../src/transcripts/index';
import { COMPACTION_CHECKPOINT_SOURCE } from '../../src/session/events';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { removeTempDirs, tempDir } from '../helpers/session';

afterAll(removeTempDirs);

const fixture = (name: string) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url), 'utf8');
const LINEAR = fixture('pi-linear-compaction.jsonl');
const TREE = fixture('pi-tree-compaction.jsonl');
const PNG_URL = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

const piSummary = (summary: string) =>
  `The conversation history before this point was compacted into the following summary:\n\n<summary>\n${summary}\n</summary>`;

/** Role and text of each derived message: the request as pi sent it. */
function sent(session: Session): Array<[string, string]> {
  return session.deriveMessages().map((m) => {
    const c = (m as { content?: unknown }).content;
    const text =
      typeof c === 'string' ? c : Array.isArray(c) ? c.map((p: { type: string; text?: string }) => (p.type === 'text' ? p.text : `<${p.type}>`)).join('|') : '';
    const calls = m.role === 'assistant' && m.tool_calls ? m.tool_calls.map((t) => (t.type === 'function' ? `call ${t.function.name}` : '')).join(',') : '';
    return [m.role, calls ? `${text ?? ''}${calls}` : (text ?? '')];
  });
}

function bracket(session: Session) {
  const events = session.events();
  const start = events.findIndex((e) => e.type === 'compaction/start');
  return events.slice(start, start + 4);
}

describe('pi linear format (firstKeptEntryIndex)', () => {
  const session = Session.inMemory('linear');
  const report = importPiTranscript(session, LINEAR);

  it('sends what pi sent: the summary, the kept entries, then what followed; bash and custom messages as pi renders them', () => {
    expect(sent(session)).toEqual([
      ['user', piSummary('## Goal\nFix the failing test, then document the widgets.\n\n## Done\n- src/a.ts: answer = 2 (tests pass)\n')],
      ['user', 'Now document the widgets like this screenshot|<image_url>'],
      ['assistant', 'call write'],
      ['tool', 'Successfully wrote 2104 bytes to README.md'],
      ['assistant', 'README.md now documents all 40 widgets.'],
      ['user', 'Remember to run the linter before committing.'],
      ['user', 'thanks, commit it'],
      ['assistant', 'Committed.'],
    ]);
    expect(openAIMessageProblems(session.deriveMessages())).toEqual([]);
    const image = session.deriveMessages()[1] as { content: Array<{ type: string; image_url?: { url: string } }> };
    expect(image.content[1]!.image_url!.url).toBe(PNG_URL);
  });

  it('the shadowed bash execution was rendered as pi renders it', () => {
    const bash = session.events().find((e) => e.type === 'user/message' && JSON.stringify(e.data).includes('Ran `npm test`')) as SessionEvent<'user/message'>;
    expect(bash.data.content).toEqual([{ type: 'text', text: 'Ran `npm test`\n```\nPASS src/a.test.ts\nTests: 3 passed, 3 total\n```' }]);
  });

  it('reports what was imported, what pi never sent and what is unknown', () => {
    expect(report).toEqual({
      format: 'linear',
      mergedLines: 0,
      tornLines: 0,
      warnings: [],
      partialCompactions: 0,
      lines: 19,
      turns: 3,
      userMessages: 3,
      assistantMessages: 6,
      toolCalls: 3,
      toolResults: 3,
      synthesizedResults: 0,
      compactions: 1,
      rendered: { bashExecution: 1, 'custom:reminder': 1 },
      notSent: { thinking_level_change: 1, 'bashExecution excluded from context (!!)': 1 },
      ignored: { future_entry_kind: 1 },
    });
  });

  it('commits the compaction as the engine does: start, summary, checkpoint replace, end', () => {
    const [start, summary, checkpoint, end] = bracket(session) as [
      SessionEvent<'compaction/start'>,
      SessionEvent<'compaction/summary'>,
      SessionEvent<'user/message'>,
      SessionEvent<'compaction/end'>,
    ];
    expect([start.type, summary.type, checkpoint.type, end.type]).toEqual(['compaction/start', 'compaction/summary', 'user/message', 'compaction/end']);
    // pi compacted mid-turn (the second turn, opened by "Now document…", goes on after it).
    const turns = session.events().filter((e) => e.type === 'turn/start') as Array<SessionEvent<'turn/start'>>;
    expect(start.data).toEqual({ turn: turns[1]!.data.turn, trigger: 'pressure' });
    expect(end.data).toEqual({ turn: turns[1]!.data.turn });
    expect(checkpoint.data.source).toBe(COMPACTION_CHECKPOINT_SOURCE);
    expect(summary.data.shadowedTokens).toBe(2330);
    // The span: every surface node before the first kept entry (the user message of entry 9).
    const shadowedTexts = summary.data.shadowedSeqs.map((s) => session.event(s).type);
    expect(shadowedTexts).toEqual([
      'user/message',
      'assistant/message',
      'tool/result',
      'assistant/message',
      'tool/result',
      'assistant/message',
      'user/message',
    ]);
    expect(summary.data.range).toEqual({ start: summary.data.shadowedSeqs[0], end: summary.data.shadowedSeqs.at(-1) });
    expect(checkpoint.surfaceOp).toEqual({ op: 'replace', ...summary.data.range });
    expect(checkpoint.sourceEventSeqs).toEqual([start.seq, summary.seq, ...summary.data.shadowedSeqs]);
    expect(session.lock.held).toBe(false);
  });

  it('is stored and reopened by the log rules (the bracket replays)', async () => {
    const dir = tempDir();
    const stored = await Session.open(new JsonlStore(dir), 'pi-linear');
    importPiTranscript(stored, LINEAR);
    await stored.close();
    const reopened = await Session.open(new JsonlStore(dir), 'pi-linear');
    expect(reopened.deriveMessages()).toEqual(session.deriveMessages());
    expect(reopened.surface.replaceGeneration).toBe(1);
    await reopened.close();
  });
});

describe('pi tree format (id/parentId, the active branch)', () => {
  const session = Session.inMemory('tree');
  const report = importPiTranscript(session, TREE);

  it('follows the path from the last entry to the root; the branch summary, bash and custom messages as user text', () => {
    expect(sent(session)).toEqual([
      ['user', piSummary('## Goal\nSet up the build.\n\n## Done\n- npm init; webpack abandoned\n')],
      ['user', 'Try approach B: esbuild'],
      ['assistant', 'call bash'],
      ['tool', 'dist/index.js  12.1kb\n\n[image omitted: tool messages carry text only]'],
      [
        'user',
        'Ran `npm run lint`\n```\nsrc/index.ts:3 unused variable\nsrc/index.ts:3 unused variable\nsrc/index.ts:3 unused variable\n\n```\n\nCommand exited with code 1\n\n[Output truncated. Full output: /tmp/pi-bash-1.log]',
      ],
      ['user', 'Extension note: lint failed with 3 findings.'],
      ['user', 'fix the lint findings'],
      ['assistant', 'Fixed the unused variable.'],
    ]);
    // The abandoned branch (approach A) is not on the surface; its summary was, before the compaction.
    const texts = session
      .events()
      .filter((e) => e.type === 'user/message')
      .map((e) => JSON.stringify(e.data));
    expect(texts.some((t) => t.includes('webpack'))).toBe(true);
    expect(texts.some((t) => t.includes('Try approach A'))).toBe(false);
    const branch = session
      .events()
      .find((e) => e.type === 'user/message' && JSON.stringify(e.data).includes('branch that this conversation')) as SessionEvent<'user/message'>;
    expect(branch.data.content).toEqual([
      {
        type: 'text',
        text: 'The following is a summary of a branch that this conversation came back from:\n\n<summary>\nApproach A (webpack) was abandoned: it needed a config file.</summary>',
      },
    ]);
    // The tool result's image is kept as an image block in the log.
    const tool = session.events().find((e) => e.type === 'tool/result' && e.data.callId === 'toolu_12') as SessionEvent<'tool/result'>;
    expect(tool.data.content).toEqual([
      { type: 'text', text: 'dist/index.js  12.1kb' },
      { type: 'image', url: PNG_URL },
    ]);
  });

  it('reports the other branch, the settings entries and the kinds sent as user text', () => {
    expect(report).toMatchObject({
      format: 'tree',
      lines: 18,
      compactions: 1,
      rendered: { branch_summary: 1, bashExecution: 1, 'custom_message:status': 1 },
      notSent: { 'entries on other branches': 2, model_change: 1, label: 1 },
      ignored: {},
    });
    const a = session.events().find((e) => e.type === 'request/header') as SessionEvent<'request/header'>;
    expect(a.data).toMatchObject({ provider: 'anthropic', model: 'claude-sonnet-4-5' });
  });
});

describe('bad pi input: one error naming the line, nothing written', () => {
  const lines = (text: string) => text.trimEnd().split('\n');
  async function expectRefused(jsonl: string, line: number, pattern: RegExp) {
    const dir = tempDir();
    const target = await Session.open(new JsonlStore(dir), 'bad');
    const file = `${dir}/bad.jsonl`;
    const sizeBefore = statSync(file, { throwIfNoEntry: false })?.size ?? 0;
    let error: unknown;
    try {
      importPiTranscript(target, jsonl);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(PiImportError);
    expect((error as PiImportError).code).toBe('import');
    expect((error as PiImportError).line).toBe(line);
    expect((error as Error).message).toMatch(new RegExp(`line ${line}: `));
    expect((error as Error).message).toMatch(pattern);
    expect(target.length).toBe(0);
    await target.close();
    expect(statSync(file, { throwIfNoEntry: false })?.size ?? 0).toBe(sizeBefore);
  }

  it('a linear compaction whose firstKeptEntryIndex points at no entry', async () => {
    const l = lines(LINEAR);
    const at = l.findIndex((x) => x.includes('"type":"compaction"'));
    l[at] = l[at]!.replace('"firstKeptEntryIndex":9', '"firstKeptEntryIndex":400');
    await expectRefused(l.join('\n'), at + 1, /firstKeptEntryIndex 400 points at no entry/);
  });

  it('a tree compaction whose firstKeptEntryId is not in the file', async () => {
    const l = lines(TREE);
    const at = l.findIndex((x) => x.includes('"type":"compaction"'));
    l[at] = l[at]!.replace(/"firstKeptEntryId":"e\d+"/, '"firstKeptEntryId":"gone"');
    await expectRefused(l.join('\n'), at + 1, /firstKeptEntryId "gone" points at no entry/);
  });

  it('a branch whose parent is missing', async () => {
    const l = lines(TREE);
    const at = l.findIndex((x) => x.includes('"type":"label"'));
    l[at] = l[at]!.replace(/"parentId":"e\d+"/, '"parentId":"missing"');
    await expectRefused(l.join('\n'), at + 1, /parent "missing", which is not in the file/);
  });

  it('a parentId cycle on the active branch', async () => {
    const l = lines(TREE);
    const root = l.findIndex((x) => x.includes('"id":"e1"'));
    const child = l.findIndex((x) => x.includes('"parentId":"e1"'));
    const childId = /"id":"(e\d+)"/.exec(l[child]!)![1]!;
    l[root] = l[root]!.replace('"parentId":null', `"parentId":"${childId}"`);
    // The walk from the last entry meets the child again through the root: that entry is named.
    await expectRefused(l.join('\n'), child + 1, new RegExp(`entry "${childId}" is its own ancestor \\(a parentId cycle\\)`));
  });

  it('a compaction without a summary', async () => {
    const l = lines(LINEAR);
    const at = l.findIndex((x) => x.includes('"type":"compaction"'));
    l[at] = l[at]!.replace(/"summary":"[^"]*"/, '"summary":""');
    await expectRefused(l.join('\n'), at + 1, /no summary/);
  });

  it('content blocks that cannot be imported (unknown types, an image without data) are counted by kind, not dropped silently', () => {
    const s = Session.inMemory();
    const jsonl = [
      '{"type":"session","version":1,"id":"blocks","provider":"anthropic","modelId":"m"}',
      '{"type":"message","message":{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","mimeType":"image/png"},{"type":"audio","data":"AAAA"}]}}',
      '{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"hologram"},{"type":"toolCall","id":"c1","name":"read","arguments":{}}]}}',
      '{"type":"message","message":{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"r"},{"type":"audio","data":"AAAA"}]}}',
    ].join('\n');
    const r = importPiTranscript(s, jsonl);
    expect(r.ignored).toEqual({ 'image block without data': 1, 'block:audio': 2, 'assistant block:hologram': 1 });
    expect(sent(s)).toEqual([
      ['user', 'look'],
      ['assistant', 'okcall read'],
      ['tool', 'r'],
    ]);
  });

  it('an unknown entry type is counted, not fatal', () => {
    const s = Session.inMemory();
    const r = importPiTranscript(s, `${LINEAR}{"type":"another_new_kind"}\n{"type":"message","message":{"role":"robot"}}\n`);
    expect(r.ignored).toEqual({ future_entry_kind: 1, another_new_kind: 1, 'message:robot': 1 });
  });
});
