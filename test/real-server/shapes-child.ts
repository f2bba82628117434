/**
 * The shapes suite's SIGKILL/resume child: one shape's loop over a JSONL session, printing
 * `reply <n>` after each answered request, until its parent kills it or it has sent XC_REQUESTS.
 * Env: XC_URL (the proxy), XC_DIR, XC_SHAPE, XC_STREAM, XC_REQUESTS, XC_SEED, XC_CTX.
 */
import { JsonlStore, Session } from '../../src/index';
import { runLoop, type Shape } from './shapes-loops';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`shapes-child.ts: ${name} is not set`);
  return v;
};
const session = await Session.open(new JsonlStore(env('XC_DIR')), 'resume');
const run = await runLoop({
  shape: env('XC_SHAPE') as Shape,
  stream: env('XC_STREAM') === '1',
  url: env('XC_URL'),
  session,
  requests: Number(env('XC_REQUESTS')),
  seed: Number(env('XC_SEED')),
  ctx: Number(env('XC_CTX')),
  onReply: (n) => void process.stdout.write(`reply ${n}\n`),
});
await session.close();
process.stdout.write(`done ${JSON.stringify(run)}\n`);
