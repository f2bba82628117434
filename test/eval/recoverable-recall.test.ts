/**
 * Recoverable recall (src/eval/memory.ts): a needed fact missing from a request counts when the
 * recall tool returns it for a literal query naming it. Only a policy with the recall tool can
 * recover anything: xcompact with `recall: true`; the peers and xcompact without it score their
 * needed recall.
 */
import { describe, expect, it } from 'vitest';
import { evaluateWindow, naive } from '../../src/eval/index';
import type { AppendInput } from '../../src/session/events';
import { Session } from '../../src/session/session';

/** Turn t lists folder lib/t (its files named only in the listing); turn t + 6 reads one of them. */
function listingSession(turns: number): Session {
  const s = Session.inMemory('listing');
  const add = (type: AppendInput['type'], data: unknown, surface = false) =>
    s.append({ type, data, ...(surface ? { surfaceOp: 'append' } : {}) } as AppendInput);
  const step = (t: number, n: number, call: { name: string; args: object } | undefined, output?: string) => {
    add('step/start', { turn: t, step: n });
    add('request/header', { provider: 'p', model: 'm', tools: [] });
    if (call) {
      add('assistant/message', { content: [{ type: 'tool-call', id: `c${t}-${n}`, name: call.name, arguments: JSON.stringify(call.args) }] }, true);
      add('tool/result', { callId: `c${t}-${n}`, toolName: call.name, content: [{ type: 'text', text: output ?? '' }] }, true);
    } else add('assistant/message', { content: [{ type: 'text', text: `Done with step ${n} of task ${t}.` }] }, true);
    add('step/end', { turn: t, step: n });
  };
  for (let t = 0; t < turns; t++) {
    add('turn/start', { turn: t });
    add('user/message', { content: [{ type: 'text', text: `Task ${t}: go on with the port.` }] }, true);
    const listing = [`lib/l${t}/alpha_${t}.rs`, `lib/l${t}/beta_${t}.rs`, ...Array.from({ length: 40 }, (_, i) => `  entry ${i} of folder ${t}: ok`)].join(
      '\n',
    );
    step(t, 0, { name: 'list', args: { dir: `lib/l${t}` } }, listing);
    if (t >= 6) step(t, 1, { name: 'read', args: { path: `lib/l${t - 6}/beta_${t - 6}.rs` } }, `fn beta_${t - 6}() {}`);
    step(t, 2, undefined);
    add('turn/end', { turn: t });
  }
  return s;
}

describe('recoverable recall', () => {
  const options = { peers: [naive], maxOutputTokens: 256, summaryCap: 400 };

  it('is 100% for xcompact with the recall tool, where its needed recall is below, and equals needed recall without it and for a peer', async () => {
    const source = listingSession(30);
    const withRecall = await evaluateWindow(source, 4_000, { ...options, config: { recall: true } });
    const [ours, peer] = withRecall.runs;
    expect(ours!.compactions).toBeGreaterThan(0);
    expect(ours!.memory.neededRecall).toBeLessThan(1);
    expect(ours!.memory.recoverableRecall).toBe(1);
    expect(peer!.memory.recoverableRecall).toBe(peer!.memory.neededRecall);

    const without = (await evaluateWindow(source, 4_000, { ...options, peers: [], config: { recall: false } })).runs[0]!;
    expect(without.compactions).toBeGreaterThan(0);
    expect(without.memory.recoverableRecall).toBe(without.memory.neededRecall);
  });
});
