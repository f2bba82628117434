import OpenAI from 'openai';
import { runAgent } from '../examples/agent-loop';
import { Session } from '../src/session/session';
import { withErrorBodyRecovery } from '../src/index';
import { checkLoop, loopScenarios, type LoopContext } from '../src/testing';
async function exampleLoop(ctx: LoopContext) {
  const session = await Session.open(ctx.store, ctx.sessionId);
  if (session.needsRecovery) session.recover();
  try {
    await runAgent({ client: withErrorBodyRecovery(new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 })), provider: ctx.provider, model: ctx.model, contextWindow: ctx.contextWindow, maxOutputTokens: ctx.maxOutputTokens, config: ctx.config, session, sandbox: ctx.workdir, inputs: ctx.turns, signal: ctx.signal, log: (l) => console.log('  LOG', l.slice(0, 150)), onRequest: (i) => console.log('  REQ', JSON.stringify(i)) });
  } finally { await session.close().catch(() => undefined); }
}
const name = process.argv[2]!;
const s = loopScenarios({ only: [name] })[0]!;
console.log(s.name);
const r = await checkLoop(exampleLoop, s);
console.log(r.violations, r.ended.kind, r.ended.kind === 'rejected' ? String((r.ended as any).error) : '');
for (const e of r.events) if (!['request/header'].includes(e.type)) console.log(e.seq, e.type, JSON.stringify(e.data).slice(0, 120));
