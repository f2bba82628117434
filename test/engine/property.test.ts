/**
 * Property test of the whole engine: random agent sessions on a JsonlStore, the
 * OpenAISummarizer talking to the local server. Turns; steps with 1–3 parallel tool calls
 * whose results have random sizes (some over the prune threshold) and, on some, provider
 * usage on the assistant message (a provider counting 100–140% of our estimate), `afterStep` after each;
 * overflow errors through `onRequestError`; manual compactions between turns; summaries that
 * fail; aborts and crashes (stop + reopen + recover) at random service calls.
 *
 * After every operation:
 * - the derived request is valid (each tool call has its result, no orphan result);
 * - the stored bytes replay (in a fresh Session) to the same log and messages;
 * - the log only grew: the stored bytes before the operation are a prefix of the bytes after;
 * - no commit grew the request (tokens after ≤ before, checkpoint < span);
 * - once the provider reported usage, pressure stays anchored to it (prunes and checkpoints keep the anchor);
 * - the lock is released, unless a crash left an orphan (and then recover() releases it).
 */
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineNotification } from '../../src/engine/facade';
import { Session } from '../../src/session/session';
import { JsonlStore } from '../../src/session/stores/jsonl';
import { openAIMessageProblems } from '../helpers/openai-validator';
import { attachEngine, cleanupWorlds, openWorld, route, startServer, type Call, type Server, type World } from '../machines/runner';

const SERVER_500 = {
  kind: 'status' as const,
  status: 500,
  body: { error: { message: 'The server had an error', type: 'server_error', param: null, code: null } },
};

type Interrupt = { kind: 'none' } | { kind: 'abort'; at: number } | { kind: 'crash'; at: number };
type Op =
  /** `providerPercent`: the assistant message reports provider usage, the provider counting that % of our estimate. */
  | { kind: 'step'; results: number[]; providerPercent: number | null; interrupt: Interrupt; summaryFails: boolean }
  | { kind: 'overflow'; interrupt: Interrupt; summaryFails: boolean }
  | { kind: 'manual'; interrupt: Interrupt; summaryFails: boolean }
  | { kind: 'crash' };

const resultSize = fc.oneof({ weight: 5, arbitrary: fc.integer({ min: 40, max: 2500 }) }, { weight: 1, arbitrary: fc.integer({ min: 9000, max: 16000 }) });
const interrupt: fc.Arbitrary<Interrupt> = fc.oneof(
  { weight: 6, arbitrary: fc.constant({ kind: 'none' as const }) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 10 }).map((at) => ({ kind: 'abort' as const, at })) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 10 }).map((at) => ({ kind: 'crash' as const, at })) },
);
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant('step' as const),
      results: fc.array(resultSize, { minLength: 1, maxLength: 3 }),
      providerPercent: fc.option(fc.integer({ min: 100, max: 140 }), { nil: null }),
      interrupt,
      summaryFails: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('overflow' as const), interrupt, summaryFails: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('manual' as const), interrupt, summaryFails: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'crash' as const }) },
);

let srv: Server;
beforeAll(async () => {
  srv = await startServer();
});
afterAll(async () => {
  await cleanupWorlds();
  await srv.close();
});

function resultText(callId: string, chars: number): string {
  const line = `${callId}: ok `;
  let out = '';
  for (let i = 0; out.length < chars; i++) out += `${line}${i}\n`;
  return out.slice(0, chars);
}

interface Run {
  w: World;
  notes: EngineNotification[];
  /** Stored bytes after the previous operation. */
  bytes: string;
}

function writeStep(w: World, sizes: number[], providerPercent: number | null = null): void {
  if (w.session.openTurn === null) {
    w.writer.startTurn();
    route(w);
    w.writer.user('Carry on with the task.');
  }
  if (w.session.openStep) w.writer.endStep();
  w.writer.startStep();
  route(w);
  const ids = sizes.map((_, j) => `c${w.session.length}_${j}`);
  // The provider's count of the request it answered (its tokenizer counts more than ours).
  const usage =
    providerPercent === null ? undefined : { promptTokens: Math.round((w.engine.measure().estimatedTokens * providerPercent) / 100), completionTokens: 20 };
  w.writer.assistant({ text: 'working', toolCalls: ids.map((id) => ({ id, name: 'bash', arguments: JSON.stringify({ id }) })), ...(usage ? { usage } : {}) });
  // Parallel calls answer in any order; here the last call answers first.
  ids
    .map((id, j) => [id, sizes[j]!] as const)
    .reverse()
    .forEach(([id, n]) => w.writer.toolResult(id, resultText(id, n), { toolName: 'bash' }));
}

/** Settles every service call for real, aborting or crashing at the `at`-th call of this operation. */
function drive(run: Run, controller: AbortController, inter: Interrupt, summaryFails: boolean): { crashed: () => boolean } {
  let n = 0;
  let crashed = false;
  const settle = async (call: Call) => {
    n++;
    if (inter.kind === 'abort' && n === inter.at) controller.abort(new Error('random abort'));
    if (inter.kind === 'crash' && n === inter.at) {
      crashed = true;
      run.w.engine.actor.stop(); // a dead process: no cleanup runs
      return;
    }
    if (call.service === 'summarize' && summaryFails) srv.queue.push(SERVER_500);
    await call.runReal();
  };
  const all = Object.fromEntries(Object.keys(run.w.defaults).map((k) => [k, settle]));
  run.w.ctl.setAuto(all);
  return { crashed: () => crashed };
}

async function reopenAfterCrash(run: Run): Promise<void> {
  const { w } = run;
  const live = w.session.events().map((e) => JSON.stringify(e));
  w.engine.actor.stop(); // a dead process: no cleanup runs
  await w.session.close();
  const session = await Session.open(w.store, w.id);
  // Nothing the process wrote is lost (the store flushed it when the file was released).
  expect(session.events().map((e) => JSON.stringify(e))).toEqual(live);
  // A compaction/start without an end is an orphan until recover() makes it stale.
  if (session.lock.held) expect(session.lock.orphan).toBe(true);
  const report = session.recover();
  expect(session.lock.held).toBe(false);
  expect(session.needsRecovery).toBe(false);
  if (report.clearedLock !== undefined) expect(session.lock.staleOrphans).toContain(report.clearedLock);
  run.w = attachEngine(srv, { dir: w.dir, store: w.store, id: w.id, session });
  run.w.engine.on((e) => run.notes.push(e));
}

async function checkInvariants(run: Run, label: string): Promise<void> {
  const { w } = run;
  const s = w.session;
  // A valid request: every call answered, no orphan result.
  expect(openAIMessageProblems(s.deriveMessages()), label).toEqual([]);
  // Append-only on disk: what was stored before is a prefix of what is stored now.
  await s.flush();
  const bytes = existsSync(w.file) ? readFileSync(w.file, 'utf8') : '';
  expect(bytes.startsWith(run.bytes), `${label}: the stored log only grows`).toBe(true);
  run.bytes = bytes;
  // The stored bytes replay to the same session.
  const copyDir = mkdtempSync(join(tmpdir(), 'xcompact-replay-'));
  try {
    if (bytes.length > 0) copyFileSync(w.file, join(copyDir, `${w.id}.jsonl`));
    const replayed = await Session.open(new JsonlStore(copyDir, { sync: false }), w.id);
    expect(
      replayed.events().map((e) => JSON.stringify(e)),
      `${label}: replay`,
    ).toEqual(s.events().map((e) => JSON.stringify(e)));
    expect(JSON.stringify(replayed.deriveMessages())).toBe(JSON.stringify(s.deriveMessages()));
    await replayed.close();
  } finally {
    rmSync(copyDir, { recursive: true, force: true });
  }
  // Pressure stays anchored to the provider's count once it reported one: prunes and
  // checkpoints (replaces) never drop the anchor (the system prompt and tools never change here).
  const reported = s.events().some((e) => e.type === 'assistant/message' && (e.data.usage?.promptTokens ?? 0) > 0);
  const m = w.engine.measure();
  expect(m.anchor !== undefined, `${label}: anchored to provider usage`).toBe(reported);
  // docs/spec.md#11-real-transcripts-in-faithfully/§12: an anchored figure far below our calibrated estimate (a replace removed more
  // than the provider counted) is suspect, and the larger figure wins; a non-empty surface never measures 0.
  if (m.anchor && !m.suspectUsage) expect(m.totalTokens).toBe(m.anchor.providerTokens + m.anchor.growthTokens);
  if (m.suspectUsage) expect(m.totalTokens).toBe(m.calibratedTokens);
  if (s.surface.length > 0) expect(m.totalTokens, `${label}: a non-empty surface never measures 0`).toBeGreaterThan(0);
  // Brackets: every compaction/start is ended (or made stale by recover()).
  expect(s.lock.held, `${label}: the lock is released`).toBe(false);
  // No commit grew the request.
  for (const n of run.notes.splice(0)) {
    if (n.type !== 'compaction.committed') continue;
    expect(n.checkpointTokens, label).toBeLessThan(n.spanTokens);
    expect(n.tokensAfter, label).toBeLessThanOrEqual(n.tokensBefore);
  }
}

async function apply(run: Run, o: Op, i: number): Promise<void> {
  const label = `op ${i} ${JSON.stringify(o)}`;
  if (o.kind === 'crash') {
    await reopenAfterCrash(run);
    return checkInvariants(run, label);
  }
  const w = run.w;
  if (o.kind === 'step') writeStep(w, o.results, o.providerPercent);
  if (o.kind === 'manual') {
    if (w.session.openStep) w.writer.endStep();
    if (w.session.openTurn !== null) w.writer.endTurn();
  }
  if (o.kind === 'overflow' && w.session.surface.length < 2) writeStep(w, [100]);
  const controller = new AbortController();
  const d = drive(run, controller, o.interrupt, o.summaryFails);
  let failure: unknown;
  try {
    if (o.kind === 'step') await w.engine.afterStep({ signal: controller.signal });
    else if (o.kind === 'overflow') await w.engine.onRequestError(srv.overflowError, { signal: controller.signal });
    else await w.engine.compactNow({ signal: controller.signal });
  } catch (err) {
    failure = err;
  }
  if (d.crashed()) {
    expect((failure as { code?: string }).code).toBe('engine-stopped');
    // The dead process's session, reopened: an orphan lock is possible until recover().
    await reopenAfterCrash(run);
  } else if (failure !== undefined) {
    // Only compactNow throws, and only a CompactionError.
    expect(o.kind).toBe('manual');
    expect(failure).toHaveProperty('code');
  }
  if (run.w.session.openStep) run.w.writer.endStep();
  await checkInvariants(run, label);
}

describe('random agent sessions on the real engine', () => {
  // Many sessions against a real server: seconds on an idle machine, far more on a loaded one.
  it('keep every request valid, the log append-only and replayable, commits shrinking, the lock released', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 4, maxLength: 14 }), async (ops) => {
        const w = await openWorld(srv);
        const run: Run = { w, notes: [], bytes: '' };
        w.engine.on((e) => run.notes.push(e));
        try {
          for (let i = 0; i < ops.length; i++) await apply(run, ops[i]!, i);
        } finally {
          run.w.engine.stop();
          await run.w.session.close().catch(() => undefined);
        }
      }),
      { numRuns: 30 },
    );
  });
});
