/**
 * Every kind of secret the default rules promise (docs/reliability.md#secrets-where-text-leaves-the-log):
 * one planted secret of each kind is redacted whole; the ordinary values that look a little
 * like secrets (`foreign_key: account_id42`, `secret: my-k8s-secret-name-01`, a public key)
 * stay as they are; and a recall excerpt whose window ends or starts inside a secret shows
 * its mark, never a piece of it (the text is redacted before the window is cut).
 */
import { describe, expect, it } from 'vitest';
import { findSecrets, looksGenerated, nameWeight, redactForExcerpt, redactSecrets } from '../../../src/services/redaction/index';
import { runRecall } from '../../../src/services/recall/index';
import { Session } from '../../../src/session/session';
import { SessionWriter } from '../../../src/session/writer';
import { COMPACTION_CHECKPOINT_SOURCE } from '../../../src/session/events';
import { ORDINARY, PLANTED, leaks } from '../../helpers/secrets';

describe('the default rules', () => {
  it.each(PLANTED.map((p) => [p.kind, p] as const))('%s is redacted whole', (_kind, p) => {
    const r = redactSecrets(p.text);
    expect(r.count).toBeGreaterThanOrEqual(1);
    expect(leaks(r.text, p.secret), r.text).toBeUndefined();
  });

  it.each(ORDINARY.map((o) => [o] as const))('%s stays as it is', (text) => {
    expect(redactSecrets(text)).toEqual({ text, count: 0 });
  });

  it('a private key block cut short (its END gone, or its BEGIN) is redacted to the cut', () => {
    const p = PLANTED.find((x) => x.kind === 'pem-rsa')!;
    const head = p.text.slice(0, p.text.indexOf('\n', 200));
    const tail = p.text.slice(p.text.indexOf('\n', 200) + 1);
    for (const cut of [head, `${head}…`, `${head.slice(0, -10)}…\n[output cut]`, `…\n${tail}`]) {
      expect(leaks(redactSecrets(cut).text, p.secret), cut).toBeUndefined();
    }
  });

  it('a trailing … never makes a cut value a placeholder; a bare … or ... is one', () => {
    expect(redactSecrets('API_KEY=Xk7pL2mQ9rT4vW8y…').text).toBe('API_KEY=[REDACTED:assignment]');
    expect(redactSecrets('PGPASSWORD=hunter2-Xq…').text).toBe('PGPASSWORD=[REDACTED:assignment]');
    for (const text of ['API_KEY=…', 'API_KEY=...', 'TOKEN=abc…']) expect(redactSecrets(text).count, text).toBe(0);
  });

  it('names: how sure a name makes us, and what a generated value looks like', () => {
    expect(nameWeight('OPENAI_API_', 'KEY')).toBe('credential');
    expect(nameWeight('api', 'Key')).toBe('credential');
    expect(nameWeight('x-api-', 'key')).toBe('credential');
    expect(nameWeight('Shared' + 'Access', 'Key')).toBe('credential');
    expect(nameWeight('foreign_', 'key')).toBe('ambiguous');
    expect(nameWeight('', 'secret')).toBe('ambiguous');
    expect(nameWeight('PUBLIC_', 'KEY')).toBe('not-a-secret');
    expect(nameWeight('mon', 'key')).toBe('not-a-secret');
    expect(nameWeight('next_page_', 'token')).toBe('not-a-secret');
    expect(nameWeight('', 'token')).toBe('credential');
    expect(looksGenerated('Xk7pL2mQ9rT4vW8yB3nF6hJ1')).toBe(true);
    for (const v of ['account_id42', 'order-12345678', 'my-k8s-secret-name-01', 'getElementById2', '3f786850e387550fdab836ed7e6dc881de23001b'])
      expect(looksGenerated(v), v).toBe(false);
    expect(redactSecrets('cache_key: Xk7pL2mQ9rT4vW8yB3nF6hJ1').count).toBe(1);
  });

  it('overlapping finds are one span (their union): no piece of either is left between two marks', () => {
    const key = PLANTED.find((x) => x.kind === 'openai')!.secret;
    const spans = findSecrets(`OPENAI_API_KEY="${key}.tail"`);
    expect(spans).toHaveLength(1);
    expect(redactSecrets(`OPENAI_API_KEY="${key}.tail"`).text).toBe('OPENAI_API_KEY="[REDACTED:openai-key]"');
  });

  it("redactForExcerpt maps offsets onto the redacted text, a secret's inside onto its mark", () => {
    const key = PLANTED.find((x) => x.kind === 'github')!.secret;
    const text = `before ${key} after`;
    const m = redactForExcerpt(text);
    expect(m.text).toBe('before [REDACTED:github-token] after');
    expect(m.at(3, 'start')).toBe(3);
    expect(m.at(10, 'start')).toBe(7);
    expect(m.at(10, 'end')).toBe(7 + '[REDACTED:github-token]'.length);
    expect(m.text.slice(m.at(text.indexOf('after'), 'start'))).toBe('after');
  });
});

/** A session whose one checkpoint shadowed a single long tool result holding `text`. */
function shadowed(text: string): Session {
  const session = Session.inMemory('excerpt');
  const w = new SessionWriter(session);
  w.startTurn();
  w.request({ provider: 'p', model: 'm', tools: [] });
  w.user('Show me the log.');
  w.startStep();
  w.request({ provider: 'p', model: 'm', tools: [] });
  w.assistant({ toolCalls: [{ id: 'c1', name: 'bash', arguments: '{"command":"cat app.log"}' }] });
  w.toolResult('c1', text, { toolName: 'bash' });
  w.endStep();
  w.endTurn();
  const start = session.append({ type: 'compaction/start', data: { turn: null, trigger: 'manual' } });
  const first = session.surface.seqAt(0);
  const last = session.surface.seqAt(session.surface.length - 1);
  const shadowedSeqs = Array.from({ length: session.surface.length }, (_, i) => session.surface.seqAt(i));
  const summary = session.append({
    type: 'compaction/summary',
    data: { summary: 'The log was read.', range: { start: first, end: last }, shadowedSeqs, shadowedTokens: 100 },
  });
  session.append({
    type: 'user/message',
    data: { content: [{ type: 'text', text: '<compacted-summary>The log was read.</compacted-summary>' }], source: COMPACTION_CHECKPOINT_SOURCE },
    surfaceOp: { op: 'replace', start: first, end: last },
    sourceEventSeqs: [start.seq, summary.seq, ...shadowedSeqs],
  });
  session.append({ type: 'compaction/end', data: { turn: null } });
  return session;
}

describe('recall excerpts never show a piece of a secret', () => {
  // The window around a match reaches 400 characters past it (to a line end, when one is near):
  // the secret is placed so that the window's edge falls at every part of it, after the match and before it.
  const filler = (n: number) => 'lorem ipsum dolor sit amet '.repeat(Math.ceil(n / 27) + 1).slice(0, Math.max(0, n));

  it.each(PLANTED.map((p) => [p.kind, p] as const))('%s cut by the window after the match, or before it', (_kind, p) => {
    const leaked: string[] = [];
    const step = Math.max(1, Math.floor(p.text.length / 16));
    for (let d = Math.max(0, 400 - p.text.length - 12); d <= 412; d += step) {
      const after = `${filler(2000)}\nNEEDLEWORD ${filler(d)} ${p.text} ${filler(2000)}`;
      const before = `${filler(2000)}\n${filler(30)} ${p.text} ${filler(d)}NEEDLEWORD ${filler(2000)}`;
      for (const text of [after, before]) {
        const answer = runRecall(shadowed(text), { query: 'NEEDLEWORD' });
        expect(answer.matches).toBe(1);
        const piece = leaks(answer.text, p.secret);
        if (piece) leaked.push(`${d}: ${piece}`);
      }
    }
    expect(leaked).toEqual([]);
  });
});
