/**
 * The SIGKILL/resume suite's agent process: the drop-in loop over a JSONL session, printing
 * `reply <n>` after each answered request, until its parent kills it (SIGKILL) or it has sent
 * XC_REQUESTS requests. Env: XC_BASE_URL, XC_DIR, XC_REQUESTS, XC_PROC, XC_TOKENIZER.
 */
import { JsonlStore, Session } from '../../src/index';
import { dropInLoop } from './loops';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`child.ts: ${name} is not set`);
  return v;
};

const session = await Session.open(new JsonlStore(env('XC_DIR')), 'resume');
const run = await dropInLoop({
  baseURL: env('XC_BASE_URL'),
  session,
  requests: Number(env('XC_REQUESTS')),
  tokenizer: env('XC_TOKENIZER') === 'server' ? 'server' : 'o200k_base',
  proc: env('XC_PROC'),
  seed: Number(env('XC_PROC').replace(/\D/g, '') || '1'),
  onReply: (n) => process.stdout.write(`reply ${n}\n`),
});
await session.close();
process.stdout.write(`done ${JSON.stringify(run)}\n`);
