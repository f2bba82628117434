/**
 * One secret of each kind (test/helpers/secrets.ts), planted in a real run and looked for
 * everywhere text leaves the log (docs/reliability.md#secrets-where-text-leaves-the-log): the example
 * agent loop reads one file per planted secret over real HTTP (the `openai` SDK against the
 * local server), then enough ordinary files that the session compacts them away; the scripted
 * summarizer copies every planted line it is shown into its summary, so a secret that reached
 * it would reach the checkpoint too. Looked for, in whole or in any 10-character piece: the
 * checkpoints and summary events, every summary request, every agent request after a
 * compaction, recall answers (the model's own call, and by text, regular expression, path and
 * handle), `xcompact inspect --recall` on the session file, and the eval report. Found: none.
 * The log keeps every original (nothing is deleted).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAgent, type AgentRun } from '../../../examples/agent-loop';
import { runInspectRecall } from '../../../src/cli/inspect-recall';
import { renderEvalReport } from '../../../src/cli/eval-report';
import { runRecall } from '../../../src/services/recall/index';
import { isCheckpoint, type SessionEvent } from '../../../src/session/events';
import { Session } from '../../../src/session/session';
import { JsonlStore } from '../../../src/session/stores/jsonl';
import { startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer, type Scenario } from '../../../src/testing/openai-server';
import { fileBody } from '../../helpers/recall-script';
import { PLANTED, leaks } from '../../helpers/secrets';

const PADDING = Array.from({ length: 10 }, (_, i) => `src/module${i}.ts`);
const fileOf = (kind: string) => `secrets/${kind}.txt`;
const INPUT = 'Read every file you are given, then say done.';

type Message = NonNullable<ChatRequestBody['messages']>[number];
const textOf = (m: Message | undefined): string => (typeof m?.content === 'string' ? m.content : JSON.stringify(m?.content ?? ''));
const isSummary = (body: ChatRequestBody) => {
  const last = body.messages?.[body.messages.length - 1];
  return last?.role === 'user' && textOf(last).length > 300 && !textOf(last).startsWith('Read every');
};

/** Every planted line the summarizer was shown, copied (60 characters of it) into its summary. */
function leakySummary(body: ChatRequestBody): string {
  const shown = (body.messages ?? []).map(textOf).join('\n').replace(/\\n/g, '\n');
  const lines = shown.split('\n');
  const copied = lines.flatMap((l, i) => (l.includes('PLANTED') ? [`- ${l.trim().slice(0, 40)} ${(lines[i + 1] ?? '').slice(0, 60)}`] : []));
  return `## Files and Code\n${copied.join('\n')}\n## Next Step\nRead the rest.`;
}

function script(): { handler: (req: { body: ChatRequestBody }) => Scenario; recalled: string[] } {
  const files = [...PLANTED.map((p) => fileOf(p.kind)), ...PADDING];
  const recalled: string[] = [];
  let n = 0;
  let asked = false;
  const handler = (req: { body: ChatRequestBody }): Scenario => {
    if (isSummary(req.body)) return { kind: 'reply', content: leakySummary(req.body) };
    const messages = req.body.messages ?? [];
    const last = messages[messages.length - 1];
    if (asked && last?.role === 'tool') {
      recalled.push(textOf(last));
      return { kind: 'reply', content: 'done' };
    }
    if (n < files.length) return { kind: 'reply', toolCalls: [{ id: `call_${n}`, name: 'read_file', arguments: JSON.stringify({ path: files[n++] }) }] };
    asked = true;
    return { kind: 'reply', toolCalls: [{ id: 'call_recall', name: 'recall', arguments: JSON.stringify({ query: 'PLANTED', maxTokens: 8000 }) }] };
  };
  return { handler, recalled };
}

/** Where each planted secret showed, `place: kind (piece)`. */
function found(place: string, text: string, out: string[]): void {
  for (const p of PLANTED) {
    const piece = leaks(text, p.secret);
    if (piece) out.push(`${place}: ${p.kind} (${piece})`);
  }
}

class Capture extends Writable {
  text = '';
  override _write(chunk: Buffer, _enc: string, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

describe('a secret of each kind, planted in a run, leaves the log nowhere', () => {
  let dir: string;
  let server: LocalOpenAIServer;
  let run: AgentRun;
  let log: readonly SessionEvent[];
  let session: Session;
  let recalled: string[];
  const sessionFile = () => join(dir, 'sessions', 'agent.jsonl');

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'xcompact-planted-'));
    for (const p of PLANTED) {
      const path = join(dir, 'project', fileOf(p.kind));
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, `PLANTED ${p.kind}\n${p.text}\n# end of ${p.kind}\n`);
    }
    for (const f of PADDING) {
      mkdirSync(dirname(join(dir, 'project', f)), { recursive: true });
      writeFileSync(join(dir, 'project', f), fileBody(f));
    }
    const s = script();
    recalled = s.recalled;
    server = await startOpenAIServer({ scenarios: s.handler, defaultModel: 'scripted' });
    session = await Session.open(new JsonlStore(join(dir, 'sessions')), 'agent');
    run = await runAgent({
      client: new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }),
      provider: 'local',
      model: 'scripted',
      contextWindow: 16_384,
      maxOutputTokens: 2_048,
      config: { headroomTokens: 1024, maxTokens: 2048, economics: false, background: false, recall: true },
      session,
      sandbox: join(dir, 'project'),
      inputs: [INPUT],
      maxStepsPerTurn: 200,
    });
    log = [...session.events()];
    await session.flush();
  });

  afterAll(async () => {
    await session?.close();
    await server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the run compacted every planted file away, and the log keeps every secret as it was', () => {
    expect(run.compactions.length).toBeGreaterThanOrEqual(1);
    const raw = readFileSync(sessionFile(), 'utf8');
    for (const p of PLANTED) expect(raw.includes(JSON.stringify(p.text).slice(1, -1)), p.kind).toBe(true);
    const onSurface = session
      .deriveMessages()
      .map((m) => JSON.stringify(m))
      .join('\n');
    const left: string[] = [];
    found('surface', onSurface, left);
    expect(left).toEqual([]);
  });

  it('checkpoints and summary events: 0 found', () => {
    const out: string[] = [];
    for (const e of log.filter((x) => isCheckpoint(x) || x.type === 'compaction/summary')) found(`${e.type} ${e.seq}`, JSON.stringify(e.data), out);
    expect(log.filter(isCheckpoint).length).toBe(run.compactions.length);
    expect(out).toEqual([]);
  });

  it('summary requests and every request after a compaction: 0 found', () => {
    const summaries = server.requests.filter((r) => isSummary(r.json as ChatRequestBody));
    const checkpointed = (body: ChatRequestBody) => (body.messages ?? []).some((m) => m.role === 'user' && textOf(m).includes('<compacted-summary>'));
    const after = server.requests.filter((r) => !isSummary(r.json as ChatRequestBody) && checkpointed(r.json as ChatRequestBody));
    expect(summaries.length).toBeGreaterThanOrEqual(run.compactions.length);
    expect(after.length).toBeGreaterThanOrEqual(2);
    // The summarizer was shown the planted lines (redacted): it copied their marks.
    expect(summaries.some((r) => r.raw.includes('PLANTED'))).toBe(true);
    expect(log.filter(isCheckpoint).some((e) => JSON.stringify(e.data).includes('[REDACTED:'))).toBe(true);
    const out: string[] = [];
    for (const r of summaries) found(`summary request ${r.index}`, r.raw, out);
    for (const r of after) found(`request ${r.index}`, r.raw, out);
    expect(out).toEqual([]);
  });

  it("recall answers, the model's own and by text, regular expression, path and handle: 0 found", () => {
    expect(recalled).toHaveLength(1);
    expect(recalled[0]).toContain('PLANTED');
    const out: string[] = [];
    found("the model's recall", recalled[0]!, out);
    const handles = log.filter(isCheckpoint).map((e) => /cp-\d+/.exec(JSON.stringify(e.data))![0]);
    const queries = [
      { query: 'PLANTED', maxTokens: 16_000 },
      { query: 'PLANT.*\\n.*', regex: true, maxTokens: 16_000 },
      ...PLANTED.map((p) => ({ query: `PLANTED ${p.kind}` })),
      ...PLANTED.map((p) => ({ path: fileOf(p.kind) })),
      ...handles.map((handle) => ({ handle, maxTokens: 16_000 })),
    ];
    let matched = 0;
    for (const q of queries) {
      const a = runRecall(session, q);
      expect(a.isError, JSON.stringify(q)).toBe(false);
      matched += a.matches;
      found(`recall ${JSON.stringify(q)}`, a.text, out);
    }
    expect(matched).toBeGreaterThanOrEqual(3 * PLANTED.length);
    expect(out).toEqual([]);
  });

  it('xcompact inspect --recall on the session file: 0 found', async () => {
    const out: string[] = [];
    for (const recall of ['/PLANTED/', 'PLANTED', ...PLANTED.map((p) => `PLANTED ${p.kind}`)]) {
      for (const json of [false, true]) {
        const capture = new Capture();
        const a = await runInspectRecall(sessionFile(), { recall, recallTokens: 16_000, json }, capture as unknown as NodeJS.WriteStream);
        expect(a.matches, recall).toBeGreaterThan(0);
        found(`inspect --recall ${recall}${json ? ' --json' : ''}`, capture.text, out);
      }
    }
    expect(out).toEqual([]);
  });

  it('the eval report: 0 found', () => {
    const html = renderEvalReport(
      PLANTED.map((p) => ({ file: `/runs/${p.text}.jsonl`, format: p.text, requests: 1, windows: [{ window: 1000, runs: [] }] })),
      { prices: { input: 1, cacheRead: 0.1, cacheWrite: 1, output: 2 } },
    );
    const out: string[] = [];
    found('eval report', html, out);
    expect(html).toContain('[REDACTED:');
    expect(out).toEqual([]);
  });
});
