/**
 * Secrets do not outlive a compaction (docs/reliability.md): the commands of the issue — a curl
 * with a bearer key, `export OPENAI_API_KEY=…`, `PGPASSWORD=…` — after a compaction are not in
 * the checkpoint, the summary request or a recall answer; the log keeps them (nothing is
 * deleted) and the compaction/summary counts what was redacted. Hashes, UUIDs and paths pass.
 */
import { describe, expect, it } from 'vitest';
import { createCompactionEngine } from '../../../src/engine/facade';
import { recallTool } from '../../../src/services/recall/index';
import { redactDeep, redactSecrets } from '../../../src/services/redaction/index';
import { ExtractiveSummarizer, type Summarizer, type SummaryRequest } from '../../../src/services/summarizing';
import { parseConfig } from '../../../src/services/config';
import { renderEvalReport } from '../../../src/cli/eval-report';
import { MODELS, newSession, readTurn } from '../../helpers/recall';
import { SessionWriter } from '../../../src/session/writer';

const OPENAI = 'sk-live-4f3a9b2c8d7e6f5a4b3c2d1e0f9a8b7c';
const GH = 'ghp_abcdefghijklmnopqrstuvwxyz0123456789AB';
const PG = 'hunter2-Xq81zz';
const COMMANDS = [
  `curl -H 'Authorization: Bearer ${OPENAI}' https://api.openai.com/v1/models`,
  `export OPENAI_API_KEY=${OPENAI}`,
  `PGPASSWORD=${PG} psql -h db.internal -U app`,
  `git remote set-url origin https://x:${GH}@github.com/acme/app.git`,
];
const SECRETS = [OPENAI, GH, PG];

function bashTurn(w: SessionWriter, command: string, output: string): void {
  w.startTurn();
  w.request({ provider: 'deepseek', model: 'deepseek-chat', tools: [] });
  w.user(`Run ${command.split(' ')[0]}.`);
  w.startStep();
  w.request({ provider: 'deepseek', model: 'deepseek-chat', tools: [] });
  const id = `call_${w.session.length}`;
  w.assistant({ toolCalls: [{ id, name: 'bash', arguments: JSON.stringify({ command }) }] });
  w.toolResult(id, `$ ${command}\n${output}`, { toolName: 'bash' });
  w.endStep();
  w.startStep();
  w.request({ provider: 'deepseek', model: 'deepseek-chat', tools: [] });
  w.assistant({ text: 'Done.' });
  w.endStep();
  w.endTurn();
}

describe('redactSecrets: the common shapes', () => {
  it.each([
    ['bearer', `Authorization: Bearer abcDEF0123456789xyzXYZ`, 'abcDEF0123456789xyzXYZ'],
    ['openai key', `key sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34`, 'sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34'],
    ['anthropic key', `sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789`, 'sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789'],
    ['github token', `token ${GH}`, GH],
    ['aws key', 'AKIAIOSFODNN7EXAMPLE', 'AKIAIOSFODNN7EXAMPLE'],
    ['slack token', 'xoxb-123456789012-abcdefghij', 'xoxb-123456789012-abcdefghij'],
    ['_KEY=', 'STRIPE_SECRET_KEY=rk_live_51Habc123', 'rk_live_51Habc123'],
    ['_TOKEN=', 'export NPM_TOKEN="npm_aB3dE5fG7hJ9kL1mN3pQ5"', 'npm_aB3dE5fG7hJ9kL1mN3pQ5'],
    ['PASSWORD=', `PGPASSWORD=${PG} psql`, PG],
    ['SECRET:', 'client_secret: 9f8e7d6c5b4a3210fedcba', '9f8e7d6c5b4a3210fedcba'],
    ['json password', '{"password": "correct-horse-battery-9"}', 'correct-horse-battery-9'],
    ['url password', 'postgres://app:s3cr3t-pw@db:5432/prod', 's3cr3t-pw'],
    ['private key', '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----', 'b3BlbnNzaC1rZXktdjEAAAAA'],
  ])('%s', (_name, text, secret) => {
    const r = redactSecrets(text);
    expect(r.text).not.toContain(secret);
    expect(r.text).toContain('[REDACTED:');
    expect(r.count).toBeGreaterThanOrEqual(1);
  });

  it('keeps names, references and what is not a secret: hashes, UUIDs, paths, code', () => {
    const kept = [
      'commit 3f786850e387550fdab836ed7e6dc881de23001b',
      'id 123e4567-e89b-12d3-a456-426614174000',
      'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      '/usr/lib/x86_64-linux-gnu/libssl.so.3 and ./src/services/api_key.ts',
      'const API_KEY = process.env.API_KEY;',
      'DB_PASSWORD=${DB_PASSWORD} JWT_SECRET=$SECRET',
      'monkey=banana123 key=value PWD=/home/me max_tokens: 4096 primary_key: id',
      'SSH_KEY=~/.ssh/id_ed25519',
      'task-manager-something-long and sk-learn',
    ];
    for (const text of kept) expect(redactSecrets(text), text).toEqual({ text, count: 0 });
  });

  it('keeps the name and quotes of an assignment; off means off; extra patterns are added', () => {
    expect(redactSecrets(`export OPENAI_API_KEY='${OPENAI}'`).text).toBe("export OPENAI_API_KEY='[REDACTED:openai-key]'");
    expect(redactSecrets(`PGPASSWORD=${PG}`, { enabled: false })).toEqual({ text: `PGPASSWORD=${PG}`, count: 0 });
    const extra = redactSecrets('ticket ACME-SECRET-77 and order=12', { patterns: ['ACME-SECRET-\\d+', 'order=(?<secret>\\d+)'] });
    expect(extra.text).toBe('ticket [REDACTED:pattern-1] and order=[REDACTED:pattern-2]');
    expect(extra.count).toBe(2);
  });

  it('the config key: defaults on, patterns validated', () => {
    expect(parseConfig({}).redaction).toEqual({ enabled: true, patterns: [] });
    expect(parseConfig({ redaction: { enabled: false } }).redaction.enabled).toBe(false);
    expect(() => parseConfig({ redaction: { patterns: ['([a-'] } })).toThrow(/valid regular expression/);
  });

  it('redactDeep copies only what changed', () => {
    const shared = { text: 'nothing here' };
    const value = { a: [shared, { text: `PGPASSWORD=${PG}` }], n: 3 };
    const r = redactDeep(value);
    expect(r.count).toBe(1);
    expect(r.value.a[0]).toBe(shared);
    expect(JSON.stringify(r.value)).not.toContain(PG);
    expect(JSON.stringify(value)).toContain(PG);
  });
});

describe('secrets do not outlive a compaction', () => {
  async function compacted(config: Record<string, unknown> = {}) {
    const { session, w } = newSession();
    for (const c of COMMANDS) bashTurn(w, c, 'ok');
    readTurn(w, 'Now the server.', ['src/server.ts'], 'Server read.');
    const before = JSON.stringify(session.events());
    const requests: SummaryRequest[] = [];
    const extractive = new ExtractiveSummarizer();
    const summarizer: Summarizer = {
      name: 'recording-extractive',
      summarize: (request, signal) => {
        requests.push(request);
        return extractive.summarize(request, signal);
      },
    };
    const engine = createCompactionEngine({ session, models: MODELS, summarizer, config: { economics: false, background: false, recall: true, ...config } });
    const record = await engine.compactNow();
    engine.stop();
    if (!record) throw new Error('nothing compacted');
    readTurn(w, 'And the router.', ['src/router.ts'], 'Router read.');
    return { session, record, requests, before };
  }

  it('checkpoint, summary event, summary request and recall answer hold no secret; the log keeps the originals; the count is recorded', async () => {
    const { session, record, requests, before } = await compacted();
    const checkpoint = JSON.stringify(session.event(record.checkpointSeq).data);
    const summaryEvent = session.event(record.checkpointSeq - 1);
    expect(summaryEvent.type).toBe('compaction/summary');
    for (const s of SECRETS) {
      expect(checkpoint, s).not.toContain(s);
      expect(JSON.stringify(summaryEvent.data), s).not.toContain(s);
      expect(JSON.stringify(requests), s).not.toContain(s);
    }
    expect(checkpoint).toContain('[REDACTED:');
    expect(JSON.stringify(requests)).toContain('[REDACTED:');
    expect((summaryEvent.data as { redacted?: number }).redacted).toBeGreaterThanOrEqual(3);
    // Nothing of the log was changed or deleted: every original event is still there, byte for byte.
    expect(JSON.stringify(session.events()).startsWith(before.slice(0, -1))).toBe(true);
    for (const s of SECRETS) expect(before).toContain(s);
    const recall = recallTool(session);
    for (const query of ['OPENAI_API_KEY', 'PGPASSWORD', 'Bearer', 'set-url']) {
      const out = recall.run({ query });
      expect(out.matches, query).toBeGreaterThan(0);
      for (const s of SECRETS) expect(out.text, `${query}: ${s}`).not.toContain(s);
    }
  });

  it('redaction off: the checkpoint carries the commands as they were', async () => {
    const { session, record } = await compacted({ redaction: { enabled: false } });
    const checkpoint = JSON.stringify(session.event(record.checkpointSeq).data);
    expect(checkpoint).toContain(PG);
    expect((session.event(record.checkpointSeq - 1).data as { redacted?: number }).redacted).toBeUndefined();
  });

  it('the eval report redacts every text it prints', () => {
    const html = renderEvalReport(
      [{ file: `/tmp/OPENAI_API_KEY=${OPENAI}.jsonl`, format: `PGPASSWORD=${PG}`, requests: 0, windows: [{ window: 1000, runs: [] }] }],
      { prices: { input: 1, cacheRead: 0.1, cacheWrite: 1, output: 2 } },
    );
    for (const s of [OPENAI, PG]) expect(html).not.toContain(s);
    expect(html).toContain('[REDACTED:');
  });
});
