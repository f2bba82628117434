/**
 * Records a real compaction for the viewer: an agent session grows past the pressure
 * threshold, one more step runs `afterStep` (pressure → prune → select → transaction), then the
 * turn ends and `/compact` runs a manual compaction. The summarizer is a stand-in (no network);
 * everything else is the real engine on an in-memory session.
 *
 * `npm run visualize` writes it as visualizer/out/sample-trace.js with a counting clock, so the
 * committed copy is byte-for-byte reproducible; the browser test records it with the real clock.
 */
import { createCompactionEngine, type AfterStepResult, type CompactionRecord } from '../src/engine/facade';
import { Session, SessionWriter } from '../src/session/index';
import { createTraceRecorder, type Trace, type TraceRecorder } from '../src/trace';

export interface SampleRun {
  trace: Trace;
  afterStep: AfterStepResult;
  manual: CompactionRecord | null;
}

const ROUTE = { provider: 'test', model: 'small', systemPrompt: 'You are a coding agent.', maxTokens: 500 } as const;

export async function recordSampleCompaction(options: { now?: () => number; follow?: string } = {}): Promise<SampleRun> {
  const session = Session.inMemory('sample', { now: () => Date.UTC(2026, 0, 1) });
  const writer = new SessionWriter(session);
  let recorder: TraceRecorder | undefined;
  const engine = createCompactionEngine({
    session,
    models: { 'test/small': { contextWindow: 6000, maxOutputTokens: 500 } },
    config: { headroomTokens: 500, maxTokens: 400 },
    summarizer: { name: 'fake', summarize: async (request) => ({ text: `summary of ${request.messages.length} messages`, requests: 0 }) },
    // The recorder starts once the session is full, so the trace holds only the interesting part.
    inspect: (event) => recorder?.inspect(event),
  });
  try {
    writer.startTurn();
    writer.request({ ...ROUTE, tools: [] });
    writer.user('Please fix the build.');
    const toolStep = (i: number) => {
      writer.startStep();
      writer.request(ROUTE);
      writer.assistant({ text: `step ${i}`, toolCalls: [{ id: `c${i}`, name: 'bash', arguments: JSON.stringify({ command: `ls dir${i}` }) }] });
      writer.toolResult(`c${i}`, `file${i}.ts\n`.repeat(60), { toolName: 'bash' });
    };
    let i = 0;
    for (; i < 200; i++) {
      const m = engine.measure();
      if (m.threshold !== undefined && m.totalTokens >= m.threshold) break;
      toolStep(i);
      writer.endStep();
    }
    if (i === 200) throw new Error('visualizer sample: the session never reached the pressure threshold');

    recorder = createTraceRecorder(session, { ...(options.now ? { now: options.now } : {}), ...(options.follow ? { follow: options.follow } : {}) });
    toolStep(i);
    const afterStep = await engine.afterStep();
    writer.endStep();
    writer.endTurn();
    const manual = await engine.compactNow();
    recorder.stop();
    return { trace: recorder.toJSON(), afterStep, manual };
  } finally {
    engine.stop();
  }
}

/** A clock that ticks 1 ms per reading: a reproducible trace. */
export function countingClock(): () => number {
  let tick = 0;
  return () => tick++;
}
